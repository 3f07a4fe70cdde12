"""A small incremental reader of LLVM's training-log stream for the regalloc channel.

mlgo.log is the project's general reader; this one is the minimal subset the regalloc
compile loop needs (header, context, observation; sizes from the header's specs) kept
here so the hot loop has no dependency on that package's buffering. It never reads past
the record it is parsing, so it can sit on the FIFO while llc waits for our answer.
"""
import json
import os

import numpy as np

_DTYPES = {"int64_t": np.int64, "float": np.float32, "double": np.float64,
           "int32_t": np.int32, "int8_t": np.int8, "uint8_t": np.uint8,
           "int16_t": np.int16, "uint16_t": np.uint16, "uint32_t": np.uint32,
           "uint64_t": np.uint64}


class ChannelError(RuntimeError):
  pass


class ChannelReader:
  def __init__(self, fd: int):
    self.fd = fd
    self.buf = bytearray()
    self.offset = 0
    header = json.loads(self._line())
    self.specs = []
    for f in header["features"]:
      dt = np.dtype(_DTYPES[f["type"]])
      shape = tuple(int(d) for d in f["shape"])
      self.specs.append((f["name"], dt, shape, int(np.prod(shape)) * dt.itemsize))
    self.names = [s[0] for s in self.specs]
    self.record_bytes = sum(s[3] for s in self.specs)

  def _more(self) -> bool:
    data = os.read(self.fd, 1 << 16)
    if not data:
      return False
    self.buf += data
    return True

  def _line(self):
    while True:
      i = self.buf.find(b"\n")
      if i >= 0:
        line = bytes(self.buf[:i])
        del self.buf[:i + 1]
        self.offset += i + 1
        return line
      if not self._more():
        if self.buf:
          raise ChannelError(f"stream ends inside a line at byte {self.offset}")
        return None

  def _bytes(self, n):
    while len(self.buf) < n:
      if not self._more():
        raise ChannelError(f"stream ends inside a record at byte {self.offset}")
    out = bytes(self.buf[:n])
    del self.buf[:n]
    self.offset += n
    return out

  def next_event(self):
    """('context', name) | ('observation', index, {name: array}) | None at EOF."""
    line = self._line()
    if line is None:
      return None
    ev = json.loads(line)
    if "context" in ev:
      return ("context", ev["context"])
    if "observation" in ev:
      raw = self._bytes(self.record_bytes + 1)
      if raw[-1:] != b"\n":
        raise ChannelError(f"observation {ev['observation']} not followed by a newline "
                           f"at byte {self.offset}")
      feats = {}
      pos = 0
      for name, dt, shape, nb in self.specs:
        feats[name] = np.frombuffer(raw, dtype=dt, count=nb // dt.itemsize,
                                    offset=pos).reshape(shape)
        pos += nb
      return ("observation", int(ev["observation"]), feats)
    if "outcome" in ev:
      raise ChannelError("unexpected outcome record on the interactive channel")
    raise ChannelError(f"unknown event line at byte {self.offset}: {line[:80]!r}")
