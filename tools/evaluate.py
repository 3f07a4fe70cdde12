"""Compare a policy with the default heuristic on a corpus split.

  bazel run //tools:evaluate -- --problem=inlining --corpus=DIR --policy=DIR|default \
      [--split=heldout|train|all] --output=DIR
Writes per_key.csv, summary.json and changes.png; prints per-package and per-language
tables; the last line is the summary (see mlgo/evaluation/evaluate.py). A regression is
a module (function, for regalloc) more than 1% worse than the default.
"""
import argparse
import sys

from mlgo.util.cli import add_candidate_flags, candidate_dirs, policy_path, user_path
from mlgo import workers


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", default="inlining")
  ap.add_argument("--corpus", help="corpus dir (default: the default corpus; at -O2 for "
                  "the regalloc problems, prepared once for llc)")
  ap.add_argument("--policy", required=True, help="policy dir, or 'default'")
  ap.add_argument("--split", default="heldout", choices=["heldout", "train", "all"])
  ap.add_argument("--output", default="evaluation", help="output dir")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--timeout", type=float, default=300.0)
  ap.add_argument("--guarded", action="store_true",
                  help="regalloc: score guarded compiles (per function the better of the "
                       "default and the policy, mlgo/env/guarded.py), not the policy's own")
  add_candidate_flags(ap)
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  candidates = candidate_dirs(ap, a, a.guarded)
  workers.apply_flags(a)
  from mlgo import evaluation  # pylint: disable=import-outside-toplevel
  policy = a.policy
  if policy != "default":
    policy = policy_path(policy)
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  corpus_dir = corpus.corpus_arg(a.corpus, get_problem(a.problem).corpus_opt)
  evaluation.evaluate(a.problem, corpus_dir, policy, user_path(a.output), split=a.split,
                      jobs=a.jobs, timeout=a.timeout, guarded=a.guarded,
                      candidates=candidates, samples=a.samples,
                      no_more_spill_code=a.no_more_spill_code)
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
