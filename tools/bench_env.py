"""Policy-in-the-loop compile time over plain compile time, decisions per second.

  bazel run //tools:bench_env -- [--modules=20] [--repeats=3] [--corpus=DIR]
      [--problems=inlining,regalloc_eviction] [--llvm_version=22]

A small random-weight numpy MLP (2x64 hidden) answers every decision. Goals: at most
1.10x for inlining and 1.25x for eviction.
"""
import argparse
import sys
import tempfile

from mlgo.env import bench
from mlgo.util import cli, toolchain

GOALS = {"inlining": 1.10, "regalloc_eviction": 1.25, "regalloc_priority": 1.25}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--modules", type=int, default=20, help="0 = all")
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--corpus", help="corpus dir (default: the default corpus if built)")
  ap.add_argument("--problems", default="inlining,regalloc_eviction")
  ap.add_argument("--llvm_version", type=int, default=toolchain.DEFAULT_LLVM_VERSION)
  args = ap.parse_args(argv)
  desc, mods = bench.pick_modules(args.modules, args.llvm_version,
                                  cli.user_path(args.corpus) if args.corpus else None)
  print(f"modules: {desc}; LLVM {args.llvm_version}; best of {args.repeats}")
  status = 0
  with tempfile.TemporaryDirectory(prefix="mlgo-bench-env-") as tmp:
    for p in args.problems.split(","):
      r = bench.bench_problem(p, mods, llvm_version=args.llvm_version, repeats=args.repeats,
                              workdir=tmp)
      print(r.report())
      goal = GOALS.get(p)
      if goal:
        verdict = "meets" if r.mlp_ratio <= goal else "MISSES"
        print(f"  goal <= {goal:.2f}x: {verdict}")
  return status


if __name__ == "__main__":
  sys.exit(main())
