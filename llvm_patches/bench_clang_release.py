"""Compile time of the release prefix (//llvm_patches:clang_release) against stock clang-22.

    bazel run //llvm_patches:bench_clang_release -- [--modules=40] [--repeats=3]
        [--corpus=DIR | --packages=bzip2,tinyxml2] [--measure=cpu|instructions] [--jobs=N]
        [--compiler=NAME=PATH/TO/clang ...] [--routes=stock,release]

On N modules of a corpus (--corpus; --packages: a temporary -Oz corpus of those Debian
source packages; default: the default -Oz corpus if built, else bzip2 + tinyxml2, the
14-module set of the README's figures), sums per module, for each route:
  --measure=cpu           the best-of-R CPU time (user + sys of the compiler process);
  --measure=instructions  the instructions the compiler executes, counted by valgrind
                          (callgrind, no cache simulation): deterministic, so it shows a
                          1% difference that CPU time on a shared machine hides (tens of times slower).
The routes:
  stock        clang-22 -Oz (Debian's libLLVM, default heuristic)
  prefix       PREFIX/bin/clang -Oz (relinked libLLVM, default heuristic)
  release      PREFIX/bin/clang -Oz -mllvm -enable-ml-inliner=release (compiled-in model)
  plugin       clang-22 -Oz -fpass-plugin=inline_advisor.so (same model, plugin route)
  NAME         PATH -Oz -mllvm -enable-ml-inliner=release, for each --compiler (e.g. the
               source route's build/bin/clang)
and prints each as a ratio to stock (--routes: only these, e.g. stock,release, which
halves a callgrind run). The goal for `release` is <= 1.01x. Each route's total comes
with its per-module median and range, how many modules are above the goal, and its ratio
per package; --per_module=CSV also writes the per-module ratios as a plot (CSV -> .png).
"""
import argparse
import concurrent.futures
import os
import pathlib
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from mlgo.corpus import build as corpus_build
from mlgo.corpus import load_corpus
from mlgo.util.toolchain import toolchain


def _runfile(rel: str) -> pathlib.Path:
  for base in (pathlib.Path.cwd(), pathlib.Path(__file__).resolve().parents[1]):
    if (base / rel).exists():
      return (base / rel).resolve()
  sys.exit(f"bench_clang_release: {rel} not found (run through bazel run)")


def cpu_seconds(argv) -> float:
  """user + sys CPU seconds of one process (and its children)."""
  pid = os.fork()
  if pid == 0:
    try:
      devnull = os.open(os.devnull, os.O_WRONLY)
      os.dup2(devnull, 1)
      os.dup2(devnull, 2)
      os.execv(argv[0], [str(a) for a in argv])
    finally:
      os._exit(127)
  _, status, ru = os.wait4(pid, 0)
  if os.waitstatus_to_exitcode(status) != 0:
    raise RuntimeError(f"failed: {' '.join(map(str, argv))}")
  return ru.ru_utime + ru.ru_stime


def instructions(argv, out_file: pathlib.Path) -> float:
  """Instructions one compile executes, from callgrind's summary line."""
  cmd = ["valgrind", "--tool=callgrind", "--cache-sim=no", "--branch-sim=no",
         f"--callgrind-out-file={out_file}"] + [str(a) for a in argv]
  r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
  if r.returncode != 0:
    raise RuntimeError(f"failed under valgrind ({r.returncode}): {' '.join(map(str, argv))}\n"
                       + r.stderr[-2000:])
  for line in out_file.read_text(errors="replace").splitlines():
    if line.startswith(("summary:", "totals:")):
      return float(line.split()[1])
  raise RuntimeError(f"{out_file}: no summary line in callgrind's output")


GOAL = 1.01  # the release route's compile-time goal, as a ratio to stock


def summarize(rows):
  """rows: (module, route, value) with a "stock" row for every module. Per route other
  than stock: {"total", "median", "min", "max", "above_goal", "modules",
  "packages": {package: (stock sum, ratio)}}. A total can hide where the cost lands
  (one package can carry it), so the per-module spread and per-package ratios go with it.
  """
  by_module = {}
  for module, route, value in rows:
    by_module.setdefault(module, {})[route] = value
  missing = sorted(m for m, v in by_module.items() if "stock" not in v)
  if missing:
    raise ValueError(f"no stock figure for {missing[:3]}")
  out = {}
  for route in sorted({r for _, r, _ in rows} - {"stock"}):
    mods = [m for m, v in by_module.items() if route in v]
    ratios = sorted(by_module[m][route] / by_module[m]["stock"] for m in mods)
    packages = {}
    for m in mods:
      package = m.split("/")[0]
      s, r = packages.get(package, (0.0, 0.0))
      packages[package] = (s + by_module[m]["stock"], r + by_module[m][route])
    out[route] = {
        "total": sum(by_module[m][route] for m in mods) / sum(by_module[m]["stock"] for m in mods),
        "median": statistics.median(ratios), "min": ratios[0], "max": ratios[-1],
        "modules": len(ratios),
        "above_goal": sum(r > GOAL for r in ratios),
        "packages": {k: (s, r / s) for k, (s, r) in sorted(packages.items())},
    }
  return out


def plot_ratios(rows, png: pathlib.Path):
  """Each module's ratio to stock per route, sorted, with the goal line: where the excess
  sits (a few modules or all of them)."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  stock = {m: v for m, r, v in rows if r == "stock"}
  fig, ax = plt.subplots(figsize=(8, 4))
  for route in sorted({r for _, r, _ in rows} - {"stock"}):
    ratios = sorted(v / stock[m] for m, r, v in rows if r == route)
    ax.plot(range(1, len(ratios) + 1), ratios, marker=".", label=route)
  ax.axhline(GOAL, color="red", linestyle="--", linewidth=1, label=f"goal {GOAL}x")
  ax.axhline(1.0, color="grey", linewidth=0.5)
  ax.set_xlabel("modules, sorted by ratio")
  ax.set_ylabel("compile cost / stock clang-22 -Oz")
  ax.legend()
  fig.tight_layout()
  fig.savefig(png, dpi=100)
  plt.close(fig)


def _home() -> pathlib.Path:
  return pathlib.Path(os.environ.get("MLGO_HOME") or
                      pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "mlgo")


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--modules", type=int, default=40)
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--corpus", default="", help="a corpus dir (corpus_description.json)")
  ap.add_argument("--packages", default="",
                  help="comma-separated Debian source packages to build a temporary corpus of")
  ap.add_argument("--measure", choices=["cpu", "instructions"], default="cpu")
  ap.add_argument("--jobs", type=int, default=1,
                  help="parallel compiles with --measure=instructions (counts do not depend "
                       "on load; CPU times do, so --measure=cpu always runs one at a time)")
  ap.add_argument("--compiler", action="append", default=[], metavar="NAME=CLANG",
                  help="another release-mode clang to time, e.g. the source route's")
  ap.add_argument("--per_module", default="",
                  help="also write each module's figures to this CSV (module, route, value) "
                       "and a plot of the per-module ratios beside it (.png)")
  ap.add_argument("--routes", default="",
                  help="comma-separated routes to measure (default: all; stock and every "
                       "--compiler are always measured)")
  args = ap.parse_args(argv)
  others = {}
  for spec in args.compiler:
    name, sep, path = spec.partition("=")
    if not sep or not os.access(path, os.X_OK):
      sys.exit(f"bench_clang_release: --compiler={spec}: want NAME=/path/to/clang (executable)")
    others[name] = (path, ["-mllvm", "-enable-ml-inliner=release"])
  prefix = _runfile("llvm_patches/clang_release")
  plugin = _runfile("cc/inline_plugin/plugin_inlining_oz_small.so")
  tc = toolchain(22)
  packages = [p for p in args.packages.split(",") if p]
  if args.corpus and packages:
    sys.exit("bench_clang_release: give --corpus or --packages, not both")
  corpus_dir = pathlib.Path(args.corpus) if args.corpus else _home() / "corpora" / "default-llvm22-Oz"
  if args.corpus and not (corpus_dir / "corpus_description.json").exists():
    sys.exit(f"bench_clang_release: --corpus={args.corpus}: no corpus_description.json there")
  tmp = pathlib.Path(tempfile.mkdtemp(prefix="mlgo-bench-release-"))
  if packages or not (corpus_dir / "corpus_description.json").exists():
    corpus_dir = tmp / "corpus"
    try:
      corpus_build.make_corpus(corpus_dir, packages or ["bzip2", "tinyxml2"], opt="Oz",
                               jobs=2, llvm_version=22, cache=_home() / "sources")
    except BaseException:
      shutil.rmtree(tmp, ignore_errors=True)
      raise
  mods = load_corpus(corpus_dir).modules
  if not mods:
    shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(f"bench_clang_release: {corpus_dir}: no modules to compile"
             + (f" (none of {args.packages} could be built)" if packages else ""))
  step = max(1, len(mods) // args.modules)
  mods = mods[::step][:args.modules]
  routes = {
      "stock": (tc.clang, []),
      "prefix": (str(prefix / "bin/clang"), []),
      "release": (str(prefix / "bin/clang"), ["-mllvm", "-enable-ml-inliner=release"]),
      "plugin": (tc.clang, [f"-fpass-plugin={plugin}"]),
  }
  routes.update(others)
  if args.routes:
    # A --compiler is always measured: naming one and leaving it out of --routes would
    # spend a long callgrind run on the others without the figure that was asked for.
    wanted = {"stock", *(r for r in args.routes.split(",") if r), *others}
    unknown = sorted(wanted - set(routes))
    if unknown:
      shutil.rmtree(tmp, ignore_errors=True)
      sys.exit(f"bench_clang_release: --routes: unknown {unknown} (have {sorted(routes)})")
    routes = {k: v for k, v in routes.items() if k in wanted}
  if args.measure == "instructions":
    measure, repeats, unit = (lambda a, o: instructions(a, o.with_suffix(".cg"))), 1, "Minstr"
  else:
    measure, repeats, unit = (lambda a, o: cpu_seconds(a)), args.repeats, "cpu_s"
  jobs = args.jobs if args.measure == "instructions" else 1

  def one_module(i, m):
    got = {}
    for name, (clang, extra) in routes.items():
      out = tmp / f"{i}.{name}.o"
      # Interleaved repeats, best of R: the least disturbed run of each route.
      got[name] = min(measure(m.compile_argv(clang, out, extra), out) for _ in range(repeats))
    return got

  rows = []
  try:
    totals = dict.fromkeys(routes, 0.0)
    start = time.time()
    with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as ex:
      futures = {ex.submit(one_module, i, m): m for i, m in enumerate(mods)}
      for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
        for name, v in fut.result().items():
          totals[name] += v
          rows.append((futures[fut].name, name, v))
        print(f"\r{done}/{len(mods)} modules", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    print(f"corpus={corpus_dir} modules={len(mods)} measure={args.measure} repeats={repeats} "
          f"wall={time.time() - start:.0f}s")
    scale = 1e-6 if args.measure == "instructions" else 1.0
    for name, t in totals.items():
      print(f"{name:8s} {unit}={t * scale:10.2f}  ratio_to_stock={t / totals['stock']:.4f}")
    for name, st in summarize(rows).items():
      print(f"{name:8s} per module: median {st['median']:.4f}x, {st['min']:.3f}x to "
            f"{st['max']:.3f}x, {st['above_goal']} of {st['modules']} above {GOAL}x")
      print(f"{name:8s} per package: " + ", ".join(
          f"{k} {r:.4f}x" for k, (_, r) in st["packages"].items()))
    if args.per_module:
      with open(args.per_module, "w") as f:
        f.write("module,route,value\n")
        for r in sorted(rows):
          f.write(f"{r[0]},{r[1]},{r[2]:.0f}\n")
      png = pathlib.Path(args.per_module).with_suffix(".png")
      plot_ratios(rows, png)
      print(f"per-module figures: {args.per_module} (plot: {png})")
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
  main()
