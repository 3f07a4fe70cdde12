"""Pure-Python reader of LLVM's training-log stream: the reference implementation.

It reads incrementally and never asks its source for more bytes than the current
record still needs (a read returns whatever the pipe holds), so it can sit on the
interactive channel's FIFO while the compiler waits for our answer. The native reader
(mlgo.log.native) follows the same rules; see spec.py for them.
"""

import io
import json
import os
import re
from typing import Optional, Union

import numpy as np

from mlgo.log.spec import (DTYPES, MAX_DIM, MAX_EVENT_LINE, MAX_HEADER_LINE,
                           MAX_INDEX, MAX_INT_DIGITS, MAX_JSON_DEPTH,
                           MAX_RECORD_BYTES, MAX_TENSOR_BYTES, Context,
                           ContextLog, FeatureSpec, LogFormatError, Observation,
                           Outcome)

_CHUNK = 1 << 16
_OBS_RE = re.compile(rb'\{"observation":(0|[1-9][0-9]{0,17})\}')
_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"')


def _open_source(source):
  """Returns a read(n) function that does at most one underlying read."""
  if isinstance(source, (bytes, bytearray, memoryview)):
    source = io.BytesIO(bytes(source))
  if isinstance(source, int):
    fd = source
    return lambda n: os.read(fd, n)
  if hasattr(source, "read1"):
    return source.read1
  if hasattr(source, "read"):  # raw (unbuffered) file objects read once already
    return source.read
  raise TypeError(f"cannot read a training log from {type(source).__name__}")


def _reject_constant(name):
  raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs):
  d = {}
  for k, v in pairs:
    if k in d:
      raise ValueError(f"duplicate key {k!r}")
    d[k] = v
  return d


def _check_depth(text: str) -> None:
  depth = 0
  for ch in _STRING_RE.sub("", text):
    if ch in "[{":
      depth += 1
      if depth > MAX_JSON_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH}")
    elif ch in "]}":
      depth -= 1


def _parse_int(s: str):
  if len(s.lstrip("-")) > MAX_INT_DIGITS:
    raise ValueError("integer literal too long")
  return int(s)


def parse_json_line(line: bytes, offset: int, what: str):
  """Strict JSON (no NaN/Infinity, no duplicate keys, bounded depth) of one line."""
  try:
    text = line.decode("utf-8")
    _check_depth(text)
    return json.loads(text, object_pairs_hook=_no_duplicates,
                      parse_constant=_reject_constant, parse_int=_parse_int)
  except (ValueError, RecursionError) as e:
    raise LogFormatError(offset, f"{what} is not valid JSON ({e})") from None


def _is_int(v) -> bool:
  return type(v) is int  # bool is an int subclass; JSON true is not a number


def _check_text(v, offset, what) -> str:
  if not isinstance(v, str):
    raise LogFormatError(offset, f"{what} must be a string")
  try:
    v.encode("utf-8")
  except UnicodeEncodeError:
    raise LogFormatError(offset, f"{what} is not valid Unicode (lone surrogate)") from None
  return v


def parse_spec(obj, offset: int, what: str) -> FeatureSpec:
  """One tensor spec of the header, validated and sized."""
  if not isinstance(obj, dict):
    raise LogFormatError(offset, f"{what} must be an object")
  if "name" not in obj:
    raise LogFormatError(offset, f"{what} has no \"name\"")
  name = _check_text(obj["name"], offset, f"{what} name")
  what = f"{what} {name!r}"
  if "type" not in obj:
    raise LogFormatError(offset, f"{what} has no \"type\"")
  tname = obj["type"]
  if not isinstance(tname, str) or tname not in DTYPES:
    raise LogFormatError(offset, f"{what} has unsupported type {tname!r}")
  dtype = DTYPES[tname]
  port = obj.get("port", 0)
  if not _is_int(port) or not -(1 << 31) <= port < (1 << 31):
    raise LogFormatError(offset, f"{what} has a bad \"port\" (not a 32-bit integer)")
  if "shape" not in obj:
    raise LogFormatError(offset, f"{what} has no \"shape\"")
  shape = obj["shape"]
  if not isinstance(shape, list):
    raise LogFormatError(offset, f"{what} shape must be an array")
  n = 1
  for d in shape:
    if not _is_int(d) or d < 0 or d > MAX_DIM:
      raise LogFormatError(offset, f"{what} has a bad dimension {d!r} "
                           f"(must be an integer in 0..{MAX_DIM})")
    n *= d
  if n * dtype.itemsize > MAX_TENSOR_BYTES:
    raise LogFormatError(offset, f"{what} is too large ({n} elements of {tname}, "
                         f"limit {MAX_TENSOR_BYTES} bytes)")
  return FeatureSpec(name, dtype, tuple(shape), port)


def parse_header(line: bytes, offset: int = 0):
  """-> (features, score, advice) from the header line (without its newline)."""
  obj = parse_json_line(line, offset, "header")
  if not isinstance(obj, dict):
    raise LogFormatError(offset, "header must be a JSON object")
  if "features" not in obj:
    raise LogFormatError(offset, "header has no \"features\"")
  feats = obj["features"]
  if not isinstance(feats, list):
    raise LogFormatError(offset, "header \"features\" must be an array")
  features = []
  names = set()
  total = 0
  for i, f in enumerate(feats):
    spec = parse_spec(f, offset, f"feature {i}")
    if spec.name in names:
      raise LogFormatError(offset, f"duplicate feature name {spec.name!r}")
    names.add(spec.name)
    total += spec.nbytes
    features.append(spec)
  if total > MAX_RECORD_BYTES:
    raise LogFormatError(offset, f"an observation would take {total} bytes "
                         f"(limit {MAX_RECORD_BYTES})")
  score = parse_spec(obj["score"], offset, "score") if "score" in obj else None
  advice = parse_spec(obj["advice"], offset, "advice") if "advice" in obj else None
  return features, score, advice


class StreamReader:
  """Reads a training-log stream event by event.

  source: a binary file object (read1() or a raw read() is used, one read at a time),
  a file descriptor, or bytes. The header is read on first use of .header/.score/
  .advice/next_event(), so constructing the reader never blocks.
  """

  def __init__(self, source: Union[int, io.IOBase, bytes]):
    self._read = _open_source(source)
    self._buf = bytearray()
    self._pos = 0          # next unread byte in _buf
    self._base = 0         # stream offset of _buf[0]
    self._eof = False
    self._header = None
    self._error: Optional[LogFormatError] = None
    self._obs_bytes = 0
    self._offsets = None

  # -- buffering -------------------------------------------------------------
  def _fill(self) -> bool:
    """One read from the source; False at EOF."""
    if self._eof:
      return False
    if self._pos > _CHUNK and self._pos * 2 > len(self._buf):
      del self._buf[:self._pos]
      self._base += self._pos
      self._pos = 0
    data = self._read(_CHUNK)
    if not data:
      self._eof = True
      return False
    self._buf += data
    return True

  def _offset(self) -> int:
    return self._base + self._pos

  def _line(self, limit: int, what: str, eof_ok: bool) -> Optional[bytes]:
    """The next line without its newline; None at EOF if eof_ok and nothing left."""
    start = self._offset()
    scanned = 0  # bytes after _pos known to hold no newline (_fill may move _pos)
    while True:
      nl = self._buf.find(b"\n", self._pos + scanned, self._pos + limit + 1)
      if nl >= 0:
        line = bytes(self._buf[self._pos:nl])
        self._pos = nl + 1
        return line
      have = len(self._buf) - self._pos
      if have > limit:
        raise LogFormatError(start, f"{what} line longer than {limit} bytes")
      scanned = have
      if not self._fill():
        if have == 0 and eof_ok:
          return None
        raise LogFormatError(start, f"stream ends inside the {what} line "
                             f"({have} bytes, no newline)")

  def _bytes(self, n: int, start: int, what: str) -> bytearray:
    while len(self._buf) - self._pos < n:
      if not self._fill():
        have = len(self._buf) - self._pos
        raise LogFormatError(start, f"stream ends inside {what}: "
                             f"{n} bytes expected, {have} present")
    data = self._buf[self._pos:self._pos + n]
    self._pos += n
    return data

  # -- header ----------------------------------------------------------------
  def _ensure_header(self):
    if self._header is None:
      if self._error is not None:
        raise self._error
      try:
        line = self._line(MAX_HEADER_LINE, "header", eof_ok=True)
        if line is None:
          raise LogFormatError(0, "empty stream: no header")
        self._header = parse_header(line, 0)
      except LogFormatError as e:
        self._error = e
        raise
      feats = self._header[0]
      self._obs_bytes = sum(f.nbytes for f in feats)
      self._offsets = []
      off = 0
      for f in feats:
        self._offsets.append(off)
        off += f.nbytes
    return self._header

  @property
  def header(self) -> list:
    return self._ensure_header()[0]

  @property
  def score(self) -> Optional[FeatureSpec]:
    return self._ensure_header()[1]

  @property
  def advice(self) -> Optional[FeatureSpec]:
    return self._ensure_header()[2]

  # -- events ----------------------------------------------------------------
  def next_event(self):
    """Context | Observation | Outcome, or None at a clean end of stream."""
    self._ensure_header()
    if self._error is not None:
      raise self._error
    try:
      return self._next_event()
    except LogFormatError as e:
      self._error = e
      raise

  def __iter__(self):
    while True:
      ev = self.next_event()
      if ev is None:
        return
      yield ev

  def _tensors(self, n: int, start: int, what: str) -> bytearray:
    data = self._bytes(n + 1, start, what + " data and its closing newline")
    if data[n] != 0x0A:
      raise LogFormatError(start, f"{what}: {n} bytes of tensor data are followed "
                           f"by byte 0x{data[n]:02x}, not a newline")
    del data[n]
    return data

  def _next_event(self):
    start = self._offset()
    line = self._line(MAX_EVENT_LINE, "event", eof_ok=True)
    if line is None:
      return None
    m = _OBS_RE.fullmatch(line)
    if m:
      key, value = "observation", int(m.group(1))
    else:
      obj = parse_json_line(line, start, "event line")
      if not isinstance(obj, dict) or len(obj) != 1:
        raise LogFormatError(start, "event line must be a JSON object with exactly "
                             "one key (context, observation or outcome)")
      (key, value), = obj.items()
    if key == "context":
      return Context(_check_text(value, start, "context name"))
    if key not in ("observation", "outcome"):
      raise LogFormatError(start, f"unknown event {key!r}")
    if not _is_int(value) or not 0 <= value <= MAX_INDEX:
      raise LogFormatError(start, f"{key} number must be an integer in 0..{MAX_INDEX}")
    if key == "observation":
      feats = self._header[0]
      data = self._tensors(self._obs_bytes, start, f"observation {value}")
      out = []
      for spec, off in zip(feats, self._offsets):
        out.append(np.frombuffer(data, spec.dtype, spec.size, off).reshape(spec.shape))
      return Observation(value, out)
    score = self._header[1]
    if score is None:
      raise LogFormatError(start, "outcome in a stream whose header has no score")
    data = self._tensors(score.nbytes, start, f"outcome {value}")
    return Outcome(value, np.frombuffer(data, score.dtype, score.size).reshape(score.shape))


def _stack(arrays, spec: FeatureSpec) -> np.ndarray:
  if not arrays:
    return np.zeros((0,) + tuple(spec.shape), spec.dtype)
  return np.stack(arrays)


def read_log(source) -> list:
  """Whole stream -> list[ContextLog], in order of first appearance of each context.

  source: a path (str/os.PathLike), bytes, a binary file object or an fd."""
  if isinstance(source, (str, os.PathLike)):
    with open(source, "rb") as f:
      return read_log(f)
  reader = StreamReader(source)
  header, score, _ = reader._ensure_header()
  groups = {}

  def group(name):
    g = groups.get(name)
    if g is None:
      g = groups[name] = ([[] for _ in header], [], [])
    return g

  current = None
  for ev in reader:
    if isinstance(ev, Context):
      current = group(ev.name)
    elif isinstance(ev, Observation):
      if current is None:
        current = group("")
      for lst, a in zip(current[0], ev.features):
        lst.append(a)
      current[2].append(ev.index)
    else:
      if current is None:
        current = group("")
      current[1].append(ev.value)
  logs = []
  for name, (feats, outcomes, indices) in groups.items():
    logs.append(ContextLog(
        name=name,
        features={s.name: _stack(f, s) for s, f in zip(header, feats)},
        outcomes=_stack(outcomes, score) if outcomes else None,
        indices=np.array(indices, dtype=np.int64)))
  return logs
