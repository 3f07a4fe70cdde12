"""The native (C++) training-log reader, same API as mlgo.log.pyreader.

Raises ImportError when the pybind module (//cc/log_reader:log_reader_py) is absent."""

raise ImportError("native log reader not built yet")
