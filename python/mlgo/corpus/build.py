"""Building a corpus from Debian source packages (make_corpus, default_corpus).

Per package: `apt-get source --download-only` into a cache directory (re-runs reuse the
download), `dpkg-source -x`, then every C/C++ translation unit is compiled to
pre-optimization bitcode with `-O<lvl> -Xclang -disable-llvm-passes -emit-llvm -c`. No
build system runs: include directories are guessed from the tree (every directory with
headers and its ancestors, plus a directory of generated stand-ins for config headers
that a configure step would have written). Units that still fail are listed with their
first error line in skipped.txt and counted, never dropped silently.

The cc1 flags recorded in NAME.cmd are the ones the driver uses for `clang -O<lvl> -c`
of the same file (from `-###`), so `CorpusModule.compile_argv` reproduces that compile.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from mlgo.corpus import format as fmt
from mlgo.util import cli
from mlgo.util import progress as progress_lib
from mlgo.util import toolchain as toolchain_lib

C_PACKAGES = ("bzip2", "brotli", "cjson", "jansson", "libyaml", "lua5.4", "lz4", "zlib",
              "mbedtls", "libsodium", "pcre2")
CXX_PACKAGES = ("tinyxml2", "libjsoncpp", "fmtlib", "yaml-cpp", "snappy", "leveldb")
DEFAULT_PACKAGES = C_PACKAGES + CXX_PACKAGES
# More packages, disjoint from the default set, that build without a configure step. The
# inlining model's probe rounds use their training split to widen what it has seen
# (models/inlining_oz/TRAINING.md); any other corpus stays unseen code for evaluation.
EXTRA_PACKAGES = ("re2", "double-conversion", "woff2", "tinyxml", "taglib", "expat",
                  "giflib", "lzo2", "libpng1.6", "zopfli")
PACKAGE_SETS = {"default": DEFAULT_PACKAGES, "extra": EXTRA_PACKAGES}

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
    "libyaml": ["-DYAML_VERSION_MAJOR=0", "-DYAML_VERSION_MINOR=2", "-DYAML_VERSION_PATCH=5",
                '-DYAML_VERSION_STRING="0.2.5"'],
}
# Headers a Debian build generates before compiling (contents as on amd64).
PACKAGE_HEADERS = {
    "lua5.4": {"lua5.4-deb-multiarch.h": '#define DEB_HOST_MULTIARCH "x86_64-linux-gnu"\n'},
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
COMPILE_TIMEOUT = 180


class BuildError(RuntimeError):
  pass


@dataclasses.dataclass
class Unit:
  package: str
  root: pathlib.Path  # package source root
  rel: str  # source path relative to root
  language: str

  @property
  def name(self) -> str:
    return f"{self.package}/{self.rel}"


@dataclasses.dataclass
class UnitResult:
  unit: Unit
  ok: bool
  error: str = ""  # first error line
  cc1: list | None = None
  bc: str | None = None


PARTIAL_MARKER = ".mlgo_partial"


def expand_packages(spec: str) -> list[str]:
  """'a,b,@extra' -> package names; '@NAME' stands for PACKAGE_SETS[NAME]. Duplicates
  are dropped (first one wins) so a package is never compiled twice."""
  out = []
  for item in (x.strip() for x in spec.split(",")):
    if not item:
      continue
    if item.startswith("@"):
      if item[1:] not in PACKAGE_SETS:
        raise BuildError(f"unknown package set {item!r}; known: "
                         f"{', '.join('@' + k for k in PACKAGE_SETS)}")
      names = PACKAGE_SETS[item[1:]]
    else:
      names = (item,)
    out += [n for n in names if n not in out]
  if not out:
    raise BuildError(f"no packages in {spec!r}")
  return out


def _prepare_output(out: pathlib.Path) -> None:
  """Empties `out` for a new corpus, refusing to delete a directory that is not one."""
  if out.exists():
    if not out.is_dir():
      raise BuildError(f"{out}: exists and is not a directory")
    ours = (out / fmt.DESCRIPTION).exists() or (out / PARTIAL_MARKER).exists()
    if any(out.iterdir()) and not ours:
      raise BuildError(f"{out}: not empty and not a corpus; refusing to replace it "
                       f"(choose a new --output directory)")
    shutil.rmtree(out)
  out.mkdir(parents=True)
  (out / PARTIAL_MARKER).write_text("being built by mlgo make_corpus\n")


def _run(cmd, cwd=None, timeout=600) -> subprocess.CompletedProcess:
  return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                        errors="replace")


def _codename() -> str:
  try:
    for line in pathlib.Path("/etc/os-release").read_text().splitlines():
      if line.startswith("VERSION_CODENAME="):
        return line.split("=", 1)[1].strip().strip('"')
  except OSError:
    pass
  return "bookworm"


def fetch_source(package: str, cache: pathlib.Path) -> pathlib.Path:
  """Downloads (once) and unpacks (once) a Debian source package; returns its root."""
  pdir = cache / package
  pdir.mkdir(parents=True, exist_ok=True)
  src = pdir / "src"
  done = pdir / ".unpacked"
  if done.exists() and src.is_dir():
    return src
  dscs = sorted(pdir.glob("*.dsc"))
  if not dscs or not (pdir / ".downloaded").exists():
    errors = []
    # A security update missing from the mirror makes the newest version unfetchable;
    # the release's own version is the fallback.
    for spec in (package, f"{package}/{_codename()}"):
      r = _run(["apt-get", "source", "--download-only", spec], cwd=pdir)
      if r.returncode == 0:
        break
      errors.append((r.stderr.strip().splitlines() or ["apt-get source failed"])[-1])
    else:
      hint = ""
      if any("no source" in e.lower() or "deb-src" in e.lower() for e in errors):
        hint = " (is a deb-src entry configured? ./setup.sh adds one)"
      raise BuildError(f"{package}: apt-get source failed: {errors[0]}{hint}")
    (pdir / ".downloaded").write_text("ok\n")
    dscs = sorted(pdir.glob("*.dsc"))
  if not dscs:
    raise BuildError(f"{package}: no .dsc after apt-get source in {pdir}")
  # Newest version when several were downloaded (mtime order: last fetched wins).
  dsc = max(dscs, key=lambda p: p.stat().st_mtime)
  if src.exists():
    shutil.rmtree(src)
  r = _run(["dpkg-source", "--no-check", "-x", dsc.name, "src"], cwd=pdir)
  if r.returncode != 0:
    # Files from different versions can mix in the cache: retry from a clean download.
    raise BuildError(f"{package}: dpkg-source -x {dsc.name} failed: "
                     f"{(r.stderr.strip().splitlines() or ['?'])[-1]}")
  done.write_text(dsc.name + "\n")
  return src


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


def _generate_config_dir(root: pathlib.Path, gen: pathlib.Path) -> None:
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


def _first_error(stderr: str) -> str:
  lines = [l.strip() for l in stderr.splitlines() if l.strip()]
  for l in lines:
    if re.search(r"\berror:", l):
      return l[:300]
  return (lines[0][:300] if lines else "failed without a message")


def _driver_flags(unit: Unit, tc: toolchain_lib.Toolchain, opt: str, incs: list[str],
                  gen: pathlib.Path) -> list[str]:
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


def cc1_of(driver: str, flags: list[str], src: str, cwd: str) -> list[str]:
  """The cc1 flags (from -cc1 on) the driver runs for `driver flags -c src`, minus the
  input and output (like the .llvmcmd that -fembed-bitcode records)."""
  r = _run([driver, "-###"] + flags + ["-c", src, "-o", "/dev/null"], cwd=cwd, timeout=60)
  for line in r.stderr.splitlines():
    if '"-cc1"' in line:
      argv = shlex.split(line)
      return fmt.clean_cc1_flags(argv[argv.index("-cc1"):])
  raise BuildError(_first_error(r.stderr))


def compile_unit(unit: Unit, tc, opt: str, incs, gen, out_bc: str) -> UnitResult:
  driver = tc.clangxx if unit.language == "c++" else tc.clang
  flags = _driver_flags(unit, tc, opt, incs, gen)
  cwd = str(unit.root)
  try:
    r = _run([driver] + flags + ["-Xclang", "-disable-llvm-passes", "-emit-llvm", "-c",
                                 unit.rel, "-o", out_bc], cwd=cwd, timeout=COMPILE_TIMEOUT)
    if r.returncode != 0:
      return UnitResult(unit, False, _first_error(r.stderr))
    nm = _run([tc.bin_dir + "/llvm-nm", "--defined-only", "-P", out_bc], timeout=60)
    if nm.returncode == 0 and not any(
        len(l.split()) > 1 and l.split()[1] in "TtWw" for l in nm.stdout.splitlines()):
      return UnitResult(unit, False, "no function definitions (empty after preprocessing)")
    cc1 = cc1_of(driver, flags, unit.rel, cwd)
    # Keep the action: like extract_ir's .cmd, the flags describe an object compile.
    if "-emit-obj" not in cc1:
      cc1.insert(1, "-emit-obj")
    return UnitResult(unit, True, cc1=cc1, bc=out_bc)
  except subprocess.TimeoutExpired:
    return UnitResult(unit, False, f"timed out after {COMPILE_TIMEOUT}s")
  except (BuildError, OSError) as e:
    return UnitResult(unit, False, str(e).splitlines()[0] if str(e) else type(e).__name__)


def make_corpus(output: str | os.PathLike, packages=DEFAULT_PACKAGES, opt: str = "Oz",
                jobs: int = 2, llvm_version: int | None = None,
                cache: str | os.PathLike | None = None, stream=None,
                limit_per_package: int | None = None) -> dict:
  """Builds a corpus at `output` (replacing what is there). Returns build statistics."""
  stream = stream or sys.stderr
  t0 = time.monotonic()
  llvm_version = int(llvm_version or toolchain_lib.DEFAULT_LLVM_VERSION)
  tc = toolchain_lib.toolchain(llvm_version)
  opt = opt.lstrip("-")
  if opt not in ("O0", "O1", "O2", "O3", "Os", "Oz"):
    raise BuildError(f"unknown optimization level -{opt} (use Oz, Os, O1, O2 or O3)")
  cache = pathlib.Path(cache) if cache else cli.mlgo_home() / "sources"
  out = pathlib.Path(output)
  _prepare_output(out)
  writer = fmt.CorpusWriter(out, llvm_version=llvm_version, opt_level=opt,
                            clang_version=toolchain_lib.clang_version_string(llvm_version))
  stats = {"packages": {}, "failed_packages": {}}
  units: list[Unit] = []
  setup: dict[str, tuple] = {}
  for pkg in packages:
    print(f"make_corpus: fetching {pkg}", file=stream, flush=True)
    try:
      root = fetch_source(pkg, cache)
    except (BuildError, OSError, subprocess.TimeoutExpired) as e:
      stats["failed_packages"][pkg] = str(e).splitlines()[0]
      print(f"make_corpus: skipping package {pkg}: {e}", file=stream, flush=True)
      continue
    gen = out / ".gen" / pkg
    _generate_config_dir(root, gen)
    for hname, text in PACKAGE_HEADERS.get(pkg, {}).items():
      (gen / hname).write_text(text)
    # Generated headers after the tree's own (so a real config.h wins over the stand-in).
    setup[pkg] = (include_dirs(root) + include_dirs(gen), gen)
    found = find_units(pkg, root)
    if limit_per_package:
      found = found[:limit_per_package]
    units += found
    stats["packages"][pkg] = {"units": len(found), "modules": 0, "skipped": 0,
                              "c": 0, "c++": 0}
  tmp = out / ".tmp"
  tmp.mkdir()
  results: list[UnitResult] = []
  prog = progress_lib.Progress(f"make_corpus -{opt}", len(units), stream=stream)
  with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
    futs = []
    for i, u in enumerate(units):
      incs, gen = setup[u.package]
      futs.append(pool.submit(compile_unit, u, tc, opt, incs, gen, str(tmp / f"{i}.bc")))
    for fut in concurrent.futures.as_completed(futs):
      res = fut.result()
      results.append(res)
      prog.update(1, 0 if res.ok else 1, extra=res.unit.package)
  prog.close()
  results.sort(key=lambda r: r.unit.name)
  skipped_lines = []
  for r in results:
    s = stats["packages"][r.unit.package]
    if r.ok:
      writer.add(r.unit.name, r.bc, r.cc1, package=r.unit.package, language=r.unit.language,
                 source=r.unit.rel, move=True)
      s["modules"] += 1
      s[r.unit.language] += 1
    else:
      s["skipped"] += 1
      skipped_lines.append(f"{r.unit.package}\t{r.unit.rel}\t{r.error}")
  shutil.rmtree(tmp, ignore_errors=True)
  shutil.rmtree(out / ".gen", ignore_errors=True)
  with open(out / "skipped.txt", "w") as f:
    f.write("# package\tsource\tfirst error line (units that did not compile)\n")
    for pkg, err in stats["failed_packages"].items():
      f.write(f"{pkg}\t*\tpackage unavailable: {err}\n")
    f.write("".join(l + "\n" for l in skipped_lines))
  stats["modules"] = len(writer)
  stats["skipped"] = len(skipped_lines)
  stats["c++_modules"] = sum(p["c++"] for p in stats["packages"].values())
  stats["packages_with_modules"] = sum(1 for p in stats["packages"].values() if p["modules"])
  stats["seconds"] = round(time.monotonic() - t0, 1)
  writer.extra_meta["build"] = {"packages": stats["packages"],
                                "failed_packages": stats["failed_packages"],
                                "tool": "mlgo make_corpus"}
  writer.finish()
  with open(out / "build_stats.json", "w") as f:
    json.dump(stats, f, indent=2)
  (out / PARTIAL_MARKER).unlink()
  return stats


def format_stats(stats: dict) -> str:
  lines = [f"{'package':<12} {'units':>6} {'modules':>8} {'C++':>5} {'skipped':>8}"]
  for pkg, s in stats["packages"].items():
    lines.append(f"{pkg:<12} {s['units']:>6} {s['modules']:>8} {s['c++']:>5} "
                 f"{s['skipped']:>8}")
  for pkg, err in stats["failed_packages"].items():
    lines.append(f"{pkg:<12} unavailable: {err}")
  lines.append(f"total: {stats['modules']} modules from {stats['packages_with_modules']} "
               f"packages ({stats['c++_modules']} C++), {stats['skipped']} units skipped, "
               f"{stats['seconds']:.0f}s")
  return "\n".join(lines)


def import_corpus(src: str | os.PathLike, output: str | os.PathLike,
                  llvm_version: int | None = None) -> dict:
  """Copies a corpus made by mlgo-utils (or ours) to `output`, adding our metadata
  (inferred language/package/split, LLVM version, opt level). Unusable modules are
  listed in skipped.txt."""
  c = fmt.load_corpus(src)
  if llvm_version and int(llvm_version) != c.llvm_version and \
      c.provenance.get("llvm_version") != "default (unknown)":
    print(f"make_corpus: note: {src} bitcode says LLVM {c.llvm_version}", file=sys.stderr)
  out = pathlib.Path(output)
  if out.resolve() == pathlib.Path(src).resolve():
    raise BuildError(f"{out}: --import source and --output are the same directory")
  _prepare_output(out)
  w = fmt.CorpusWriter(out, llvm_version=c.llvm_version, opt_level=c.opt_level,
                       clang_version=c.clang_version,
                       extra_meta={"imported_from": str(pathlib.Path(src).resolve())})
  for m in c.modules:
    w.add(m.name, m.bc_path, m.cc1_flags, package=m.package, language=m.language,
          split=m.split, source=m.source, kind=m.kind)
  w.finish()
  with open(out / "skipped.txt", "w") as f:
    f.write("# module\tproblem\n")
    for p in c.problems:
      f.write(f"{p.name}\t{p.message}\n")
  (out / PARTIAL_MARKER).unlink()
  return {"modules": len(c.modules), "skipped": len(c.problems),
          "c++_modules": sum(m.language == "c++" for m in c.modules),
          "packages_with_modules": len({m.package for m in c.modules})}


# ---------------------------------------------------------------------------------------
# The default corpus, built once per (LLVM version, opt level).

COMPLETE_MARKER = ".mlgo_complete"


def default_corpus_dir(llvm_version: int | None = None, opt: str = "Oz") -> pathlib.Path:
  v = int(llvm_version or toolchain_lib.DEFAULT_LLVM_VERSION)
  return cli.mlgo_home() / "corpora" / f"default-llvm{v}-{opt.lstrip('-')}"


@contextlib.contextmanager
def _lock(path: pathlib.Path):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def default_corpus(llvm_version: int | None = None, opt: str = "Oz", jobs: int = 2,
                   stream=None) -> pathlib.Path:
  """The default corpus' directory, built on first use (a partial build is redone)."""
  d = default_corpus_dir(llvm_version, opt)
  if (d / COMPLETE_MARKER).exists():
    return d
  with _lock(d.parent / f".{d.name}.lock"):
    if (d / COMPLETE_MARKER).exists():  # another process finished it meanwhile
      return d
    stream = stream or sys.stderr
    print(f"mlgo: building the default corpus into {d} (once; a few minutes)", file=stream,
          flush=True)
    if d.exists():  # a partial build (ours by location): start over
      shutil.rmtree(d)
    stats = make_corpus(d, DEFAULT_PACKAGES, opt=opt, jobs=jobs, llvm_version=llvm_version,
                        stream=stream)
    print(format_stats(stats), file=stream, flush=True)
    if stats["modules"] == 0:
      raise BuildError(f"{d}: default corpus build produced no modules; see "
                       f"{d / 'skipped.txt'}")
    (d / COMPLETE_MARKER).write_text(json.dumps(stats) + "\n")
  return d
