"""The native (C++) training-log reader, same API as mlgo.log.pyreader.

Built by //cc/log_reader:log_reader_py (a dependency of //python:mlgo); importing
this module raises ImportError when the extension is not on the path. Reads from
an fd release the GIL; pass an fd or an unbuffered file (buffering=0) on FIFOs.
"""

import os
from typing import Optional

import mlgo_log_reader_native as _native  # ImportError when not built

from mlgo.log.spec import FeatureSpec


class StreamReader:
  """Reads a training-log stream event by event (see pyreader.StreamReader)."""

  def __init__(self, source):
    if isinstance(source, (str, os.PathLike)):
      raise TypeError("StreamReader reads a file object, fd or bytes; use read_log for paths")
    self._r = _native.Reader(source)

  @property
  def header(self) -> list:
    return self._r.header()[0]

  @property
  def score(self) -> Optional[FeatureSpec]:
    return self._r.header()[1]

  @property
  def advice(self) -> Optional[FeatureSpec]:
    return self._r.header()[2]

  def next_event(self):
    return self._r.next_event()

  def __iter__(self):
    while True:
      ev = self._r.next_event()
      if ev is None:
        return
      yield ev


def read_log(source) -> list:
  """Whole stream -> list[ContextLog] (path, bytes, fd or binary file object)."""
  if isinstance(source, os.PathLike):
    source = os.fspath(source)
  return _native.read_log(source)
