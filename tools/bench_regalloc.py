"""Benchmark: policy-in-the-loop llc time over plain llc time (regalloc problems).

  bazel run //tools:bench_regalloc -- [--problem=regalloc_eviction] [--corpus=DIR]
      [--policy=DIR] [--modules=30]
Without --corpus the default corpus at -O2 is used (prepared once); without --policy an
untrained network of the same architecture answers.
"""
import argparse
import json
import sys

from mlgo.util.cli import user_path


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default="regalloc_eviction",
                  choices=["regalloc_eviction", "regalloc_priority"])
  ap.add_argument("--corpus")
  ap.add_argument("--policy")
  ap.add_argument("--modules", type=int, default=30)
  a = ap.parse_args(argv)
  from mlgo.regalloc import bench, cli, networks, prepare  # pylint: disable=import-outside-toplevel,unused-import
  corpus_dir = user_path(a.corpus) if a.corpus else cli.default_corpus_o2()
  prep = prepare.prepare(corpus_dir)
  r = bench.bench(prep, a.problem, user_path(a.policy) if a.policy else None, a.modules)
  print(json.dumps(r, indent=1))
  print(f"{a.problem}: {r['modules']} modules, plain llc {r['plain_seconds']:.2f}s, policy in "
        f"the loop {r['policy_seconds']:.2f}s, ratio {r['ratio']:.3f}, {r['decisions']} "
        f"decisions, {r['overhead_us_per_decision']:.0f} us overhead per decision")
  return 0


if __name__ == "__main__":
  sys.exit(main())
