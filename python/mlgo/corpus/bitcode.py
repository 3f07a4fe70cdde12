"""Cheap checks of LLVM bitcode files without running an LLVM tool.

Two things are needed per corpus module: is the file plausibly complete bitcode (magic
and the top-level block lengths fit in the file: catches corrupt and truncated files
with a clear message before a compiler chokes on them), and which LLVM wrote it (the
identification block's producer string, e.g. "LLVM22.1.8"), because LLVM N cannot read
bitcode written by a newer LLVM.

The reader understands just enough of the bitstream container for that: the wrapper
header, ENTER_SUBBLOCK headers, and within the identification block DEFINE_ABBREV,
unabbreviated and abbreviated records.
"""
import re
import struct

RAW_MAGIC = b"BC\xc0\xde"
WRAPPER_MAGIC = 0x0B17C0DE
IDENTIFICATION_BLOCK_ID = 13
MODULE_BLOCK_ID = 8


class BitcodeError(ValueError):
  """A file that is not (complete) LLVM bitcode. The message names the file."""


class _Bits:
  """Little-endian bit reader over a bytes object (LLVM bitstream order)."""

  def __init__(self, data: bytes, start: int, end: int):
    self.data = data
    self.pos = start * 8
    self.end = end * 8

  def read(self, width: int) -> int:
    if width == 0:
      return 0
    if self.pos + width > self.end:
      raise EOFError
    value = 0
    got = 0
    while got < width:
      byte = self.data[self.pos >> 3]
      shift = self.pos & 7
      take = min(8 - shift, width - got)
      value |= ((byte >> shift) & ((1 << take) - 1)) << got
      got += take
      self.pos += take
    return value

  def vbr(self, width: int) -> int:
    value = 0
    shift = 0
    hi = 1 << (width - 1)
    while True:
      piece = self.read(width)
      value |= (piece & (hi - 1)) << shift
      shift += width - 1
      if not piece & hi:
        return value
      if shift > 64:
        raise EOFError

  def align32(self):
    self.pos = (self.pos + 31) & ~31

  @property
  def byte_pos(self) -> int:
    return self.pos >> 3


_CHAR6 = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._"


def _payload(data: bytes, name: str) -> tuple[int, int]:
  """(start, end) of the raw bitstream inside `data`, or BitcodeError."""
  if len(data) >= 4 and data[:4] == RAW_MAGIC:
    return 4, len(data)
  if len(data) >= 20 and struct.unpack_from("<I", data, 0)[0] == WRAPPER_MAGIC:
    _magic, _version, offset, size, _cpu = struct.unpack_from("<5I", data, 0)
    if offset + size > len(data) or size < 4 or data[offset:offset + 4] != RAW_MAGIC:
      raise BitcodeError(f"{name}: truncated or corrupt bitcode (bad wrapper header)")
    return offset + 4, offset + size
  if not data:
    raise BitcodeError(f"{name}: empty file, expected LLVM bitcode")
  raise BitcodeError(f"{name}: not LLVM bitcode (bad magic {data[:4].hex()})")


def _read_abbrev_def(bits: _Bits) -> list:
  ops = []
  n = bits.vbr(5)
  i = 0
  while i < n:
    if bits.read(1):
      ops.append(("lit", bits.vbr(8)))
    else:
      enc = bits.read(3)
      if enc in (1, 2):
        ops.append(("fixed" if enc == 1 else "vbr", bits.vbr(5)))
      elif enc == 3:
        # The element encoding follows as the next operand definition.
        i += 1
        if bits.read(1):
          ops.append(("array", ("lit", bits.vbr(8))))
        else:
          eenc = bits.read(3)
          if eenc in (1, 2):
            ops.append(("array", ("fixed" if eenc == 1 else "vbr", bits.vbr(5))))
          else:
            ops.append(("array", ("char6" if eenc == 4 else "blob", 0)))
      elif enc == 4:
        ops.append(("char6", 0))
      elif enc == 5:
        ops.append(("blob", 0))
      else:
        raise EOFError
    i += 1
  return ops


def _read_scalar(bits: _Bits, op) -> int:
  kind, arg = op
  if kind == "lit":
    return arg
  if kind == "fixed":
    return bits.read(arg)
  if kind == "vbr":
    return bits.vbr(arg)
  if kind == "char6":
    return ord(_CHAR6[bits.read(6)])
  raise EOFError


def _read_abbreviated(bits: _Bits, ops: list) -> list[int]:
  values = []
  for op in ops:
    if op[0] == "array":
      n = bits.vbr(6)
      values.extend(_read_scalar(bits, op[1]) for _ in range(n))
    elif op[0] == "blob":
      n = bits.vbr(6)
      bits.align32()
      values.extend(bits.data[bits.byte_pos:bits.byte_pos + n])
      bits.pos += n * 8
      bits.align32()
    else:
      values.append(_read_scalar(bits, op))
  return values


def inspect_bitcode(path: str) -> str | None:
  """Checks that `path` is complete bitcode; returns its producer string or None.

  Raises BitcodeError (message names the file) for a missing, empty, corrupt or
  truncated file.
  """
  try:
    with open(path, "rb") as f:
      data = f.read()
  except OSError as e:
    raise BitcodeError(f"{path}: cannot read bitcode: {e.strerror}") from None
  return inspect_bitcode_bytes(data, str(path))


def inspect_bitcode_bytes(data: bytes, name: str = "<bitcode>") -> str | None:
  start, end = _payload(data, name)
  bits = _Bits(data, start, end)
  producer = None
  saw_module = False
  try:
    while bits.pos + 32 <= bits.end:
      abbrev = bits.read(2)
      if abbrev != 1:  # top level holds only blocks (trailing zero padding is fine)
        if abbrev == 0 and not any(data[bits.byte_pos:end]):
          break
        raise BitcodeError(f"{name}: corrupt bitcode (unexpected top-level record)")
      block_id = bits.vbr(8)
      abbrev_width = bits.vbr(4)
      bits.align32()
      num_words = bits.read(32)
      block_start = bits.byte_pos
      block_end = block_start + 4 * num_words
      if block_end > end:
        raise BitcodeError(
            f"{name}: truncated bitcode (block {block_id} needs {block_end - start + 4} "
            f"bytes, file has {end - start + 4})")
      if block_id == IDENTIFICATION_BLOCK_ID:
        producer = _read_identification(data, block_start, block_end, abbrev_width)
      elif block_id == MODULE_BLOCK_ID:
        saw_module = True
      bits.pos = block_end * 8
  except EOFError:
    raise BitcodeError(f"{name}: truncated or corrupt bitcode") from None
  if not saw_module:
    raise BitcodeError(f"{name}: truncated or corrupt bitcode (no module block)")
  return producer


def _read_identification(data: bytes, start: int, end: int, width: int) -> str | None:
  bits = _Bits(data, start, end)
  abbrevs = []
  try:
    while bits.pos < bits.end:
      aid = bits.read(width)
      if aid == 0:
        return None
      if aid == 1:
        return None  # no nested blocks expected here; give up quietly
      if aid == 2:
        abbrevs.append(_read_abbrev_def(bits))
        continue
      if aid == 3:
        code = bits.vbr(6)
        n = bits.vbr(6)
        values = [bits.vbr(6) for _ in range(n)]
      else:
        if aid - 4 >= len(abbrevs):
          return None
        rec = _read_abbreviated(bits, abbrevs[aid - 4])
        code, values = rec[0], rec[1:]
      if code == 1:  # IDENTIFICATION_CODE_STRING
        return bytes(v & 0xFF for v in values).decode("ascii", "replace")
  except (EOFError, IndexError):
    return None
  return None


def producer_llvm_version(producer: str | None) -> int | None:
  """Major LLVM version of a producer string such as "LLVM22.1.8" (None if unknown)."""
  if not producer:
    return None
  m = re.match(r"\D*(\d+)", producer)
  return int(m.group(1)) if m else None
