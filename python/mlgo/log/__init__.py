"""Reading LLVM's training-log stream (the interactive channel's observations).

`StreamReader` and `read_log` are the native (C++) reader when it is built
(`//cc/log_reader:log_reader_py`, a dependency of `//python:mlgo`), else the
pure-Python reference in `mlgo.log.pyreader`; both follow the rules in spec.py.
"""

from mlgo.log.spec import (DTYPES, Context, ContextLog, FeatureSpec, LogFormatError,
                           Observation, Outcome)
from mlgo.log.writer import LogWriter, encode_log, write_log
from mlgo.log import pyreader

try:
  from mlgo.log import native
  StreamReader = native.StreamReader
  read_log = native.read_log
  NATIVE = True
except ImportError:
  native = None
  StreamReader = pyreader.StreamReader
  read_log = pyreader.read_log
  NATIVE = False

__all__ = ["StreamReader", "read_log", "FeatureSpec", "Context", "Observation",
           "Outcome", "ContextLog", "LogFormatError", "LogWriter", "write_log",
           "encode_log", "DTYPES", "pyreader", "native", "NATIVE"]
