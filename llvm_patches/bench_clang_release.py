"""Compile time of the release prefix (//llvm_patches:clang_release) against stock clang-22.

    bazel run //llvm_patches:bench_clang_release -- [--modules=40] [--repeats=3] [--corpus=DIR]

On N modules of a corpus (default: the default -Oz corpus if built, else bzip2 + tinyxml2
compiled into a temporary corpus), sums per module the best-of-R CPU time (user + sys of
the compiler process) of:
  stock        clang-22 -Oz (Debian's libLLVM, default heuristic)
  prefix       PREFIX/bin/clang -Oz (relinked libLLVM, default heuristic)
  release      PREFIX/bin/clang -Oz -mllvm -enable-ml-inliner=release (compiled-in model)
  plugin       clang-22 -Oz -fpass-plugin=inline_advisor.so (same model, plugin route)
and prints each as a ratio to stock. The goal for `release` is <= 1.01x.
"""
import argparse
import os
import pathlib
import pwd
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


def _home() -> pathlib.Path:
  return pathlib.Path(os.environ.get("MLGO_HOME") or
                      pathlib.Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "mlgo")


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--modules", type=int, default=40)
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--corpus", default="")
  args = ap.parse_args(argv)
  prefix = _runfile("llvm_patches/clang_release")
  plugin = _runfile("cc/inline_plugin/plugin_inlining_oz.so")
  tc = toolchain(22)
  tmp = pathlib.Path(tempfile.mkdtemp(prefix="mlgo-bench-release-"))
  corpus_dir = pathlib.Path(args.corpus) if args.corpus else _home() / "corpora" / "default-llvm22-Oz"
  if not (corpus_dir / "corpus_description.json").exists():
    corpus_dir = tmp / "corpus"
    corpus_build.make_corpus(corpus_dir, ["bzip2", "tinyxml2"], opt="Oz", jobs=2,
                             llvm_version=22, cache=_home() / "sources")
  mods = load_corpus(corpus_dir).modules
  step = max(1, len(mods) // args.modules)
  mods = mods[::step][:args.modules]
  routes = {
      "stock": (tc.clang, []),
      "prefix": (str(prefix / "bin/clang"), []),
      "release": (str(prefix / "bin/clang"), ["-mllvm", "-enable-ml-inliner=release"]),
      "plugin": (tc.clang, [f"-fpass-plugin={plugin}"]),
  }
  totals = dict.fromkeys(routes, 0.0)
  start = time.time()
  for i, m in enumerate(mods):
    for name, (clang, extra) in routes.items():
      out = tmp / f"{name}.o"
      # Interleaved repeats, best of R: the least disturbed run of each route.
      totals[name] += min(cpu_seconds(m.compile_argv(clang, out, extra))
                          for _ in range(args.repeats))
    print(f"\r{i + 1}/{len(mods)} modules", end="", file=sys.stderr, flush=True)
  print(file=sys.stderr)
  print(f"corpus={corpus_dir} modules={len(mods)} repeats={args.repeats} "
        f"wall={time.time() - start:.0f}s")
  for name, t in totals.items():
    print(f"{name:8s} cpu={t:8.2f}s  ratio_to_stock={t / totals['stock']:.4f}")


if __name__ == "__main__":
  main()
