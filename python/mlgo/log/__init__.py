"""Reading LLVM's training-log stream (the interactive channel's observations).

`StreamReader` and `read_log` are the native (C++) reader when it is built
(`//cc/log_reader:log_reader_py`, a dependency of `//python:mlgo`; from a checkout,
mlgo.log.build_native compiles it on first use), else the pure-Python reference in
`mlgo.log.pyreader`; both follow the rules in spec.py.
"""
import warnings

from mlgo.log.spec import (DTYPES, Context, ContextLog, FeatureSpec, LogFormatError,
                           Observation, Outcome)
from mlgo.log.writer import LogWriter, encode_log, write_log
from mlgo.log import build_native, pyreader


def _import_native():
  """mlgo.log.native, built on first use when run from a checkout; None if unavailable."""
  try:
    from mlgo.log import native as mod  # pylint: disable=import-outside-toplevel
    return mod
  except ImportError:
    if not build_native.wanted():
      return None
  try:
    build_native.load()
    from mlgo.log import native as mod  # pylint: disable=import-outside-toplevel
    return mod
  except (build_native.BuildError, ImportError, OSError) as e:
    warnings.warn(f"the native log reader is unavailable, using the pure-Python one: {e}",
                  stacklevel=2)
    return None


native = _import_native()
NATIVE = native is not None
StreamReader = native.StreamReader if NATIVE else pyreader.StreamReader
read_log = native.read_log if NATIVE else pyreader.read_log

__all__ = ["StreamReader", "read_log", "FeatureSpec", "Context", "Observation",
           "Outcome", "ContextLog", "LogFormatError", "LogWriter", "write_log",
           "encode_log", "DTYPES", "pyreader", "native", "NATIVE"]
