"""Per-machine-basic-block profiles of real programs (the data of a performance model).

  bazel run //tools:profile_blocks -- --output=DIR [--problem=regalloc_eviction \
      --policy=models/regalloc_eviction] [--programs=lua,bzip2]

Builds the runtime_check programs from Debian sources (default allocator, and the policy
if given), runs each on its workload under valgrind's callgrind, and writes one row per
executed block: machine-code features (instructions, bytes, loads, stores, stack spills
and reloads, calls, branches), executions, measured events and estimated cycles
(DIR/<program>/<variant>/blocks.jsonl, DIR/summary.json). Resumable.
"""
import argparse
import sys

from mlgo.util.cli import policy_path, user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--output", required=True)
  ap.add_argument("--problem", default="regalloc_eviction")
  ap.add_argument("--policy", default=None)
  ap.add_argument("--programs", default="")
  ap.add_argument("--jobs", type=int, default=2)
  a = ap.parse_args(argv)
  from mlgo.evaluation import block_profiles  # pylint: disable=import-outside-toplevel
  s = block_profiles.collect(a.problem, user_path(a.output),
                             policy_dir=policy_path(a.policy) if a.policy else None,
                             programs=[p for p in a.programs.split(",") if p], jobs=a.jobs)
  print(f"wrote {len(s)} block profiles under {user_path(a.output)}")
  return 0 if s else 1


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
