"""Distills a policy into another network, by default a smaller one on the "slog" feature
encoding, which a release compiler evaluates several times faster.

  bazel run //tools:distill_policy -- --teacher=models/inlining_oz --output=SMALL \
      [--corpus=@default] [--hidden=32,32] [--encoding=slog] [--rounds=2] [--jobs=N]
Round 0 traces the teacher's own compiles of the training split, each later round the
previous student's; every student learns the teacher's decisions on all traces so far.
Resumable (rerun the same command). Then evaluate the student like any policy
(`generalization_report`) and export it (`export_policy`).
"""
import argparse
import sys

from mlgo.util.cli import user_path


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--teacher", required=True, help="policy dir to distill")
  ap.add_argument("--output", required=True, help="the student's policy dir")
  ap.add_argument("--corpus", default=None,
                  help="corpus dir or @default/@extra/@unseen (default: the default corpus "
                       "at the problem's optimization level); its training split is used")
  ap.add_argument("--work_dir", default=None, help="traces and earlier students "
                  "(default: OUTPUT.distill)")
  ap.add_argument("--encoding", default="slog", choices=["quantile", "slog"])
  ap.add_argument("--hidden", default="32,32", help="the student's hidden layer sizes")
  ap.add_argument("--rounds", type=int, default=2)
  ap.add_argument("--epochs", type=int, default=30)
  ap.add_argument("--batch_size", type=int, default=512)
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--seed", type=int, default=0)
  a = ap.parse_args(argv)
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  from mlgo.training import distill  # pylint: disable=import-outside-toplevel
  teacher = user_path(a.teacher)
  try:
    problem = get_problem(policy_io.load_policy(teacher).problem)
  except (FileNotFoundError, ValueError) as e:
    sys.exit(f"distill_policy: --teacher: {e}")
  s = distill.distill(teacher, corpus.corpus_arg(a.corpus, problem.corpus_opt),
                      user_path(a.output), user_path(a.work_dir) if a.work_dir else None,
                      encoding=a.encoding, hidden=[int(x) for x in a.hidden.split(",") if x],
                      rounds=a.rounds, epochs=a.epochs, batch_size=a.batch_size, jobs=a.jobs,
                      seed=a.seed)
  last = s["rounds"][-1]
  print(f"student={user_path(a.output)} rounds={len(s['rounds'])} "
        f"train_agreement={last['train_agreement']} heldout_agreement="
        f"{last['heldout_agreement']} seconds={s['seconds']:.0f}")
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
