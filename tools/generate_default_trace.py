"""Compile a corpus' training split with the default heuristic and store the trajectories.

  bazel run //tools:generate_default_trace -- --corpus=DIR --problem=inlining --output=DIR \
      [--sampling_rate=R] [--jobs=N]
Appendable: modules already in --output are skipped, so an interrupted run can resume.
Problems whose channel does not send the default's decision (regalloc) trace the
prepared corpus with the tracer plugin (cc/regalloc_trace). --policy=DIR traces that
policy's own compiles instead (the states to distill it from: train_bc --teacher=DIR).
"""
import argparse
import sys

from mlgo.util.cli import user_path
from mlgo import workers


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--corpus", required=True,
                  help="corpus dir (mlgo-utils format) or @default/@extra/@unseen")
  ap.add_argument("--problem", default="inlining")
  ap.add_argument("--output", required=True, help="dataset dir (created or appended to)")
  ap.add_argument("--sampling_rate", type=float, default=1.0,
                  help="fraction of training modules to compile")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--timeout", type=float, default=300.0, help="per-compile timeout (s)")
  ap.add_argument("--split", default="train", choices=["train", "heldout", "all"])
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--max_decisions_per_module", type=int, default=0,
                  help="keep a seeded sample of at most this many decisions per module")
  ap.add_argument("--policy", help="policy dir in the loop instead of the default")
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  from mlgo.training import trace  # pylint: disable=import-outside-toplevel
  corpus_dir = corpus.corpus_arg(a.corpus, get_problem(a.problem).corpus_opt)
  stats = trace.generate_default_trace(corpus_dir, a.problem, user_path(a.output),
                                       sampling_rate=a.sampling_rate, jobs=a.jobs,
                                       timeout=a.timeout, seed=a.seed, split=a.split,
                                       max_decisions_per_module=a.max_decisions_per_module,
                                       policy_dir=user_path(a.policy) if a.policy else None)
  return 0 if stats["modules"] > 0 or stats["failed"] == 0 else 1


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
