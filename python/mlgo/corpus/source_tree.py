"""The translation units of an unpacked source tree, and the flags to compile them.

No build system runs: include directories are guessed from the tree (every directory
with headers and its ancestors, plus a directory of generated stand-ins for config
headers that a configure step would have written), and a few packages get the defines
and generated headers their Debian build would provide. Separate from build.py: this
reads a tree (and writes stand-in headers), build.py runs the compiler on it.
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re

from mlgo.util import toolchain as toolchain_lib

C_EXTS = (".c",)
CXX_EXTS = (".cc", ".cpp", ".cxx")
HEADER_EXTS = (".h", ".hh", ".hpp", ".hxx", ".inc", ".inl", ".ipp")
# Directories never compiled: Debian packaging, quilt's copies of unpatched files, and
# ports to other systems (their headers would shadow the POSIX ones).
SKIP_DIRS = {"debian", ".pc", ".git", "win32", "win64", "windows", "msvc", "vms", "amiga",
             "os2", "msdos", "watcom", "nintendods", "vstudio", "visual", "wince", "qnx",
             "djgpp", "mingw", "cmake-build", "CMakeFiles"}
# Small per-package hints a configure step would normally provide.
PACKAGE_DEFINES = {
    "leveldb": ["-DLEVELDB_PLATFORM_POSIX=1", "-DHAVE_FULLFSYNC=0", "-DHAVE_FDATASYNC=1",
                "-DHAVE_O_CLOEXEC=1"],
    "libsodium": ["-DCONFIGURED=1", "-DDEV_MODE=0"],
    "pcre2": ["-DPCRE2_CODE_UNIT_WIDTH=8", "-DHAVE_CONFIG_H", "-DSUPPORT_UNICODE"],
    "lua5.4": ["-DLUA_USE_LINUX"],
    "jansson": ["-DHAVE_STDINT_H=1", "-DHAVE_UNISTD_H=1"],
    "cmark": ["-DHAVE_STDBOOL_H=1", "-DHAVE___BUILTIN_EXPECT=1", "-DHAVE___ATTRIBUTE__=1"],
    "libyaml": ["-DYAML_VERSION_MAJOR=0", "-DYAML_VERSION_MINOR=2", "-DYAML_VERSION_PATCH=5",
                '-DYAML_VERSION_STRING="0.2.5"'],
}
# Headers a Debian build generates before compiling (contents as on amd64).
PACKAGE_HEADERS = {
    "lua5.4": {"lua5.4-deb-multiarch.h": '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"\n'},
    # CMake's generate_export_header output for a shared-library build on ELF.
    "libebml": {"ebml_export.h": '#define EBML_DLL_API __attribute__((visibility("default")))\n'},
    "cmark": {"cmark_export.h": '#define CMARK_EXPORT __attribute__((visibility("default")))\n',
              "cmark_version.h": "#define CMARK_VERSION ((0 << 16) | (30 << 8) | 2)\n"
                                 '#define CMARK_VERSION_STRING "0.30.2"\n'},
}
# Test files of C++ packages use googletest; Debian's googletest package ships its headers
# in /usr/src (setup.sh installs it). Without it those units are skipped and listed.
GTEST_INCLUDES = ("/usr/src/googletest/googletest/include",
                  "/usr/src/googletest/googlemock/include")
# A directory holding a header named like a system one (a test's override of time.h,
# a port's stdint.h) must not shadow the system header for every unit: such
# directories are searched only for "quoted" includes.
SYSTEM_HEADERS = {
    "assert.h", "ctype.h", "errno.h", "float.h", "inttypes.h", "limits.h", "locale.h",
    "math.h", "setjmp.h", "signal.h", "stdarg.h", "stdbool.h", "stddef.h", "stdint.h",
    "stdio.h", "stdlib.h", "string.h", "time.h", "wchar.h", "unistd.h", "fcntl.h",
    "pthread.h", "memory.h", "strings.h", "alloca.h", "malloc.h", "dirent.h", "config.h",
}


@dataclasses.dataclass
class Unit:
  package: str
  root: pathlib.Path  # package source root
  rel: str  # source path relative to root
  language: str

  @property
  def name(self) -> str:
    return f"{self.package}/{self.rel}"


def _walk(root: pathlib.Path):
  for dirpath, dirnames, filenames in os.walk(root):
    dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("."))
    yield pathlib.Path(dirpath), sorted(filenames)


def find_units(package: str, root: pathlib.Path) -> list[Unit]:
  units = []
  for d, files in _walk(root):
    for f in files:
      ext = os.path.splitext(f)[1]
      if ext in C_EXTS:
        lang = "c"
      elif ext in CXX_EXTS:
        lang = "c++"
      else:
        continue
      units.append(Unit(package, root, str((d / f).relative_to(root)), lang))
  return units


_CMAKEDEFINE01 = re.compile(r"^#\s*cmakedefine01\s+(\w+).*$", re.M)
_CMAKEDEFINE = re.compile(r"^#\s*cmakedefine\s+(\w+).*$", re.M)


def _autoconf_value(m: re.Match) -> str:
  # Substituted values are mostly numbers (versions, 0/1 feature switches); an inline
  # keyword is the common exception.
  return "inline" if "inline" in m.group(0).lower() else "0"


def generate_config_dir(root: pathlib.Path, gen: pathlib.Path) -> None:
  """Stand-ins for headers a configure step writes.

  For every X.h.in / X.h.cmake / X.h.in.cmake without X.h: a copy with @VAR@ and ${VAR}
  replaced by 0 and #cmakedefine turned off (conservative: features stay undefined).
  Plus an empty config.h when none exists, placed last in the search path.
  """
  gen.mkdir(parents=True, exist_ok=True)
  for d, files in _walk(root):
    for f in files:
      for suffix in (".in", ".cmake", ".cmakein", ".in.cmake", ".generic"):
        if f.endswith(suffix) and os.path.splitext(f[:-len(suffix)])[1] in HEADER_EXTS:
          target_name = f[:-len(suffix)]
          if (d / target_name).exists():
            continue
          try:
            text = (d / f).read_text(errors="replace")
          except OSError:
            continue
          text = _CMAKEDEFINE01.sub(lambda m: f"#define {m.group(1)} 0", text)
          text = _CMAKEDEFINE.sub(lambda m: f"/* #undef {m.group(1)} */", text)
          text = re.sub(r"^[ \t]*@[A-Za-z_][A-Za-z0-9_]*@[ \t]*$", "", text, flags=re.M)
          # A type stand-in (`#define uint32_t @JSON_UINT32@`) must not become 0: the
          # system headers have the type.
          text = re.sub(r"^([ \t]*#[ \t]*define[ \t]+\w+_t[ \t]+[@$].*)$", r"/* \1 */",
                        text, flags=re.M)
          text = re.sub(r"@[A-Za-z_][A-Za-z0-9_]*@", _autoconf_value, text)
          text = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}", "0", text)
          # Mirror the relative location so "dir/x.h" includes resolve too.
          rel = (d / target_name).relative_to(root)
          for out in {gen / rel, gen / target_name}:
            out.parent.mkdir(parents=True, exist_ok=True)
            if not out.exists():
              out.write_text(text)
          break
  if not (gen / "config.h").exists():
    (gen / "config.h").write_text("/* stand-in for a configure-generated config.h */\n")


def include_dirs(root: pathlib.Path) -> list[str]:
  """-I/-iquote flags: every directory holding headers, and its ancestors up to the root.

  Order: the root, then directories named include, then the rest by depth/name.
  Directories with a header named like a system header get -iquote (see SYSTEM_HEADERS).
  """
  dirs = set()
  quote_only = set()
  for d, files in _walk(root):
    if any(f in SYSTEM_HEADERS for f in files) and d != root:
      quote_only.add(d)
    if any(os.path.splitext(f)[1] in HEADER_EXTS for f in files):
      p = d
      while True:
        dirs.add(p)
        if p == root or root not in p.parents:
          break
        p = p.parent
  dirs.add(root)
  def key(p: pathlib.Path):
    rel = p.relative_to(root)
    return (p != root, "include" not in rel.parts, len(rel.parts), str(rel))
  return [("-iquote" if p in quote_only else "-I") + str(p) for p in sorted(dirs, key=key)]


def driver_flags(unit: Unit, tc: toolchain_lib.Toolchain, opt: str, incs: list[str],
                 gen: pathlib.Path) -> list[str]:
  """Clang driver flags for `unit` at -`opt`: its language's, its package's, `incs`."""
  flags = [f"-{opt}", "-w", "-D_GNU_SOURCE"]
  if unit.language == "c++":
    flags.append("-std=c++17")
  else:
    # Old C code: keep what newer clang made errors as warnings (silenced by -w).
    flags += ["-Wno-error=implicit-function-declaration", "-Wno-error=int-conversion",
              "-Wno-error=incompatible-pointer-types", "-Wno-error=implicit-int"]
  flags += PACKAGE_DEFINES.get(unit.package, [])
  flags += list(incs)
  if unit.language == "c++":
    flags += [f"-isystem{d}" for d in GTEST_INCLUDES if os.path.isdir(d)]
  return flags
