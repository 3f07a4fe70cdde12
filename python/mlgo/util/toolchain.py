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
