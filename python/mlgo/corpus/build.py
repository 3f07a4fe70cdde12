"""Building a corpus from Debian source packages (make_corpus, default_corpus).

Per package: the Debian source package is fetched and unpacked (sources.py), then every
C/C++ translation unit is compiled to pre-optimization bitcode with `-O<lvl> -Xclang
-disable-llvm-passes -emit-llvm -c` and the flags source_tree.py guesses from the tree
(no build system runs). Units that still fail are listed with their first error line in
skipped.txt and counted, never dropped silently.

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
import time

from mlgo.corpus import format as fmt
from mlgo.corpus import writer as corpus_writer
from mlgo.corpus.source_tree import (PACKAGE_HEADERS, Unit, driver_flags, find_units,
                                     generate_config_dir, include_dirs)
from mlgo.corpus.sources import BuildError, DEFAULT_PACKAGES, PACKAGE_SETS, _run, fetch_source
from mlgo.util import cli
from mlgo.util import progress as progress_lib
from mlgo.util import toolchain as toolchain_lib

COMPILE_TIMEOUT = 180


@dataclasses.dataclass
class UnitResult:
  unit: Unit
  ok: bool
  error: str = ""  # first error line
  cc1: list | None = None
  bc: str | None = None


PARTIAL_MARKER = ".mlgo_partial"


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


def _first_error(stderr: str) -> str:
  lines = [l.strip() for l in stderr.splitlines() if l.strip()]
  for l in lines:
    if re.search(r"\berror:", l):
      return l[:300]
  return (lines[0][:300] if lines else "failed without a message")


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
  flags = driver_flags(unit, tc, opt, incs, gen)
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
  writer = corpus_writer.CorpusWriter(out, llvm_version=llvm_version, opt_level=opt,
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
    generate_config_dir(root, gen)
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
  w = corpus_writer.CorpusWriter(out, llvm_version=c.llvm_version, opt_level=c.opt_level,
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


def default_corpus_dir(llvm_version: int | None = None, opt: str = "Oz",
                       package_set: str = "default") -> pathlib.Path:
  v = int(llvm_version or toolchain_lib.DEFAULT_LLVM_VERSION)
  return cli.mlgo_home() / "corpora" / f"{package_set}-llvm{v}-{opt.lstrip('-')}"


@contextlib.contextmanager
def _lock(path: pathlib.Path):
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, "w") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def _finished(d: pathlib.Path, packages) -> bool:
  """A finished corpus of these packages: ours (the marker), or one that make_corpus
  (e.g. tools/make_corpus --output=<this dir>) completed for the same package list,
  which is not thrown away and rebuilt."""
  if (d / COMPLETE_MARKER).exists():
    return True
  if (d / PARTIAL_MARKER).exists() or not (d / fmt.DESCRIPTION).exists():
    return False
  try:
    stats = json.loads((d / "build_stats.json").read_text())
    built = set(stats["packages"]) | set(stats["failed_packages"])
  except (OSError, ValueError, KeyError, TypeError):
    return False
  return built == set(packages)


def default_corpus(llvm_version: int | None = None, opt: str = "Oz", jobs: int = 2,
                   stream=None, package_set: str = "default") -> pathlib.Path:
  """The corpus of a package set (sources.PACKAGE_SETS: default, extra, unseen) at
  -O`opt`, built on first use into MLGO_HOME/corpora (a partial build is redone)."""
  if package_set not in PACKAGE_SETS:
    raise BuildError(f"unknown package set {package_set!r}; known: {', '.join(PACKAGE_SETS)}")
  d = default_corpus_dir(llvm_version, opt, package_set)
  if _finished(d, PACKAGE_SETS[package_set]):
    return d
  with _lock(d.parent / f".{d.name}.lock"):
    if _finished(d, PACKAGE_SETS[package_set]):  # another process finished it meanwhile
      return d
    stream = stream or sys.stderr
    print(f"mlgo: building the {package_set} corpus into {d} (once; a few minutes)",
          file=stream, flush=True)
    if d.exists():  # a partial build (ours by location): start over
      shutil.rmtree(d)
    stats = make_corpus(d, PACKAGE_SETS[package_set], opt=opt, jobs=jobs,
                        llvm_version=llvm_version, stream=stream)
    print(format_stats(stats), file=stream, flush=True)
    if stats["modules"] == 0:
      raise BuildError(f"{d}: {package_set} corpus build produced no modules; see "
                       f"{d / 'skipped.txt'}")
    (d / COMPLETE_MARKER).write_text(json.dumps(stats) + "\n")
  return d
