"""Finding the LLVM tools of one version (Debian installs them as clang-22, llc-22, ...).

LLVM 22 is the primary compiler, LLVM 19 is supported. Bitcode is tied to the LLVM that
wrote it (19 cannot read 22's), so every corpus records the version and every compile
uses the tools of that version.
"""
import dataclasses
import functools
import os
import shutil
import struct
import subprocess

DEFAULT_LLVM_VERSION = int(os.environ.get("MLGO_LLVM_VERSION", "22"))
SUPPORTED_LLVM_VERSIONS = (22, 19)


class ToolchainError(RuntimeError):
  pass


@dataclasses.dataclass(frozen=True)
class Toolchain:
  version: int
  clang: str
  clangxx: str
  llc: str
  opt: str
  llvm_size: str
  llvm_dis: str

  @property
  def bin_dir(self) -> str:
    return os.path.dirname(self.llc)


@functools.lru_cache(maxsize=None)
def toolchain(version: int = DEFAULT_LLVM_VERSION) -> Toolchain:
  """The clang/llc/... of LLVM `version`, or ToolchainError saying what to install."""
  version = int(version)
  base = f"/usr/lib/llvm-{version}/bin"
  def find(name: str) -> str:
    for cand in (os.path.join(base, name), shutil.which(f"{name}-{version}")):
      if cand and os.path.exists(cand):
        return cand
    raise ToolchainError(
        f"{name} of LLVM {version} not found (looked in {base} and PATH for {name}-{version}); "
        f"run ./setup.sh or `apt-get install clang-{version} llvm-{version}`")
  return Toolchain(version=version, clang=find("clang"), clangxx=find("clang++"),
                   llc=find("llc"), opt=find("opt"), llvm_size=find("llvm-size"),
                   llvm_dis=find("llvm-dis"))


def clang_version_string(version: int = DEFAULT_LLVM_VERSION) -> str:
  out = subprocess.run([toolchain(version).clang, "--version"], capture_output=True,
                       text=True, check=True).stdout
  return out.splitlines()[0].strip()


def text_size(obj_path: str) -> int:
  """Total size of the allocated executable sections (.text*) of an ELF object.

  Read straight from the ELF section headers: no subprocess per module. Counts every
  section named .text or .text.* (-ffunction-sections puts each function in its own).
  """
  with open(obj_path, "rb") as f:
    data = f.read()
  return text_size_of_bytes(data, obj_path)


def text_size_of_bytes(data: bytes, name: str = "<object>") -> int:
  if len(data) < 64 or data[:4] != b"\x7fELF":
    raise ValueError(f"{name}: not an ELF object")
  if data[4] != 2:
    raise ValueError(f"{name}: only 64-bit ELF is supported")
  end = "<" if data[5] == 1 else ">"
  shoff, = struct.unpack_from(end + "Q", data, 0x28)
  shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
  if shoff == 0 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
    raise ValueError(f"{name}: truncated or malformed ELF section table")
  def section(i):
    return struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize)
  strtab = section(shstrndx)
  str_off, str_size = strtab[4], strtab[5]
  total = 0
  for i in range(shnum):
    sh_name, sh_type, _flags, _addr, _off, sh_size = section(i)[:6]
    if sh_name >= str_size:
      raise ValueError(f"{name}: section name offset out of range")
    start = str_off + sh_name
    stop = data.index(b"\0", start)
    sname = data[start:stop].decode("ascii", "replace")
    if sh_type == 1 and (sname == ".text" or sname.startswith(".text.")):  # SHT_PROGBITS
      total += sh_size
  return total


def function_sizes(obj_path: str) -> dict:
  """{symbol: bytes} of the functions defined in an ELF object's .text* sections (the
  symbol table's STT_FUNC entries and their st_size). Per-function native size, e.g. for
  the IR2Native dataset; a function that was inlined everywhere and deleted is absent."""
  with open(obj_path, "rb") as f:
    data = f.read()
  return function_sizes_of_bytes(data, obj_path)


def function_sizes_of_bytes(data: bytes, name: str = "<object>") -> dict:
  text_size_of_bytes(data, name)  # the same header checks, the same error messages
  end = "<" if data[5] == 1 else ">"
  shoff, = struct.unpack_from(end + "Q", data, 0x28)
  shentsize, shnum, shstrndx = struct.unpack_from(end + "HHH", data, 0x3A)
  sections = [struct.unpack_from(end + "IIQQQQIIQQ", data, shoff + i * shentsize)
              for i in range(shnum)]

  def cstr(off, start):
    stop = data.find(b"\0", off + start)
    if stop < 0:
      raise ValueError(f"{name}: unterminated string in a string table")
    return data[off + start:stop].decode("utf-8", "replace")

  shstr = sections[shstrndx][4]
  is_text = [s[1] == 1 and (cstr(shstr, s[0]) == ".text" or
                            cstr(shstr, s[0]).startswith(".text.")) for s in sections]
  out = {}
  for sh_name, sh_type, _f, _a, off, size, link, _i, _al, entsize in sections:
    if sh_type != 2:  # SHT_SYMTAB
      continue
    if entsize != 24 or off + size > len(data) or link >= shnum:
      raise ValueError(f"{name}: malformed symbol table")
    str_off = sections[link][4]
    for pos in range(off, off + size, 24):
      st_name, st_info, _other, st_shndx, _value, st_size = struct.unpack_from(
          end + "IBBHQQ", data, pos)
      if st_info & 0xF != 2 or st_shndx >= shnum or not is_text[st_shndx]:  # STT_FUNC
        continue
      out[cstr(str_off, st_name)] = out.get(cstr(str_off, st_name), 0) + st_size
  return out
