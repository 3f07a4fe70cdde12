"""Measured execution: programs built with the default allocator vs with a policy.

  bazel run //tools:runtime_check -- --problem=regalloc_eviction --policy=DIR
      [--output=DIR] [--programs=lua,bzip2,lz4,xxhsum,libdeflate-gzip] [--jobs=2]
Builds lua, bzip2 and lz4 from Debian source packages twice, runs each under
cachegrind (cache + branch simulation), checks the outputs are identical, and prints
instructions, D1/LL misses, mispredictions and estimated cycles (formula in
mlgo/evaluation/runtime_check.py), default vs policy.
"""
import argparse
import json
import sys

from mlgo.util.cli import policy_path, user_path


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default="regalloc_eviction",
                  choices=["regalloc_eviction", "regalloc_priority"])
  ap.add_argument("--policy", required=True)
  ap.add_argument("--output", default="runtime_check")
  ap.add_argument("--programs", default="", help="comma-separated subset of lua,bzip2,lz4,xxhsum,libdeflate-gzip "
                  "(the last two from @unseen packages)")
  ap.add_argument("--jobs", type=int, default=2)
  a = ap.parse_args(argv)
  from mlgo.evaluation import runtime_check  # pylint: disable=import-outside-toplevel
  p = policy_path(a.policy)
  out = user_path(a.output)
  rows = runtime_check.run(a.problem, p, out,
                           programs=[x for x in a.programs.split(",") if x] or None,
                           jobs=a.jobs)
  (out / "runtime_check.json").write_text(json.dumps(rows, indent=1) + "\n")
  print(runtime_check.format_table(rows))
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
