"""Copies rollout probes with more features, for a policy that sees more than the probed one.

  bazel run //tools:widen_probes -- --probes=DIR --output=DIR [--problem=inlining_ir2vec]
      [--corpus=DIR] [--policy=DIR] [--jobs=N]
Probes taken with a 38-feature policy store only those features. This re-runs each
module's greedy compile of the probed policy (--policy, default: the one recorded in the
probe dir) under a problem whose compiler sends more (IR2Vec instruction mixes), and
writes the same probes with every feature, so //tools:train_on_probes can train a policy
of that problem on them. Probes whose state is not found again are counted and skipped.
"""
import argparse
import sys

from mlgo.util.cli import user_path
from mlgo import workers


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--probes", required=True, help="probe dir to widen")
  ap.add_argument("--output", required=True, help="probe dir to write (resumable)")
  ap.add_argument("--problem", default="inlining_ir2vec")
  ap.add_argument("--corpus", help="the corpus probed (default: the default corpus)")
  ap.add_argument("--policy", help="the probed policy (default: as recorded)")
  ap.add_argument("--jobs", type=int, help="parallel compiles (default: cores)")
  ap.add_argument("--timeout", type=float, default=300.0, help="seconds per compile")
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.training import probe_widening  # pylint: disable=import-outside-toplevel
  s = probe_widening.widen_probes(user_path(a.probes), corpus.corpus_arg(a.corpus),
                                  a.problem, user_path(a.output),
                                  policy_dir=user_path(a.policy) if a.policy else None,
                                  jobs=a.jobs, timeout=a.timeout)
  return 0 if s["modules"] or not s["failed"] else 1


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
