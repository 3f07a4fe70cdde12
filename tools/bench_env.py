"""Policy-in-the-loop compile time over plain compile time, decisions per second.

  bazel run //tools:bench_env -- [--modules=20] [--repeats=3] [--corpus=DIR]
      [--problems=inlining,regalloc_eviction] [--llvm_version=22]

Two small numpy MLPs (2x64 hidden) answer every decision: one with random weights, and
the shipped trained model of the problem (models/inlining_oz, models/regalloc_eviction;
--trained=none skips it). The random one takes decisions no trained policy would (for
inlining it inlines far more, so clang then does more work); the trained one is the
realistic case of training and release. Goals: at most 1.10x for inlining and 1.25x for
eviction.
"""
import argparse
import sys
import tempfile

from mlgo.env import bench
from mlgo.util import cli, toolchain

GOALS = {"inlining": 1.10, "regalloc_eviction": 1.25, "regalloc_priority": 1.25}
SHIPPED = {"inlining": "models/inlining_oz", "regalloc_eviction": "models/regalloc_eviction"}


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--modules", type=int, default=20, help="0 = all")
  ap.add_argument("--repeats", type=int, default=3)
  ap.add_argument("--corpus", help="corpus dir (default: the default corpus if built)")
  ap.add_argument("--problems", default="inlining,regalloc_eviction")
  ap.add_argument("--llvm_version", type=int, default=toolchain.DEFAULT_LLVM_VERSION)
  ap.add_argument("--trained", default="shipped",
                  help="shipped | none | PROBLEM=POLICY_DIR[,PROBLEM=POLICY_DIR]")
  args = ap.parse_args(argv)
  trained = _trained_dirs(args.trained)
  desc, mods = bench.pick_modules(args.modules, args.llvm_version,
                                  cli.user_path(args.corpus) if args.corpus else None)
  print(f"modules: {desc}; LLVM {args.llvm_version}; best of {args.repeats}")
  status = 0
  with tempfile.TemporaryDirectory(prefix="mlgo-bench-env-") as tmp:
    for p in args.problems.split(","):
      pol = None
      if p in trained:
        from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
        pol = policy_io.load_policy(str(trained[p]))
      r = bench.bench_problem(p, mods, llvm_version=args.llvm_version, repeats=args.repeats,
                              workdir=tmp, trained_policy=pol,
                              trained_name=str(trained.get(p, "")))
      print(r.report())
      goal = GOALS.get(p)
      if goal:
        for what, ratio in (("random MLP", r.mlp_ratio), ("trained MLP", r.trained_ratio)):
          if ratio == ratio:   # not NaN
            verdict = "meets" if ratio <= goal else "MISSES"
            print(f"  goal <= {goal:.2f}x, {what} deciding: {ratio:.3f}x {verdict}")
  return status


def _trained_dirs(spec: str) -> dict:
  if spec == "none":
    return {}
  if spec == "shipped":
    root = cli.repo_root()
    return {p: root / d for p, d in SHIPPED.items() if (root / d / "policy.json").exists()}
  out = {}
  for item in spec.split(","):
    prob, _, d = item.partition("=")
    if not d:
      raise SystemExit(f"--trained: expected PROBLEM=POLICY_DIR, got {item!r}")
    out[prob] = cli.user_path(d)
  return out


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
