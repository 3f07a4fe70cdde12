"""A policy on code it was not trained on: held-out split, @extra and @unseen packages.

  bazel run //tools:generalization_report -- --problem=inlining --policy=models/inlining_oz \
      [--suites=heldout,@extra,@unseen] [--output=DIR] [--workers=ray ...]

A suite is `heldout` (the default corpus' held-out split), `@SET` (a package set's
corpus, built once and cached: @extra, @unseen) or a corpus directory (e.g. one written
by mlgo-utils' make_corpus). Prints one line per suite (total change, median module,
modules more than 1% worse, packages worse than +0.5%); writes per-suite evaluations,
generalization.md, generalization.json and generalization.png under --output.
"""
import argparse
import sys

from mlgo import workers
from mlgo.util.cli import policy_path, user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default="inlining")
  ap.add_argument("--policy", required=True, help="policy dir, or 'default'")
  ap.add_argument("--suites", default="heldout,@extra,@unseen")
  ap.add_argument("--output", default="generalization")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--timeout", type=float, default=300.0)
  ap.add_argument("--guarded", action="store_true",
                  help="regalloc: score guarded compiles (per function the better of the "
                       "default and the policy, mlgo/env/guarded.py), not the policy's own")
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  from mlgo.evaluation import generalization  # pylint: disable=import-outside-toplevel
  policy = a.policy
  if policy != "default":
    policy = policy_path(policy)
  suites = [s if s == "heldout" or s.startswith("@") else str(user_path(s))
            for s in a.suites.split(",") if s]
  rep = generalization.run(a.problem, policy, user_path(a.output), suites, jobs=a.jobs,
                           timeout=a.timeout, guarded=a.guarded)
  print(f"wrote {user_path(a.output) / 'generalization.md'}")
  return 0 if rep["suites"] else 1


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
