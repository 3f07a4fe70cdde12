"""Merges policies into one policy dir.

--mode=weights (default): the weight average of a run's saved iteration policies (same
spec). --mode=ensemble: one wider network whose output is the mean of the members'
outputs (same features; any widths; members that fitted their own normalizations, such
as seeds of one command, each keep theirs), which every consumer of a policy dir
(evaluate, export, AOT, the release compiler) reads like any other policy.

  bazel run //tools:average_policies -- --run=RUN_DIR --first=131 --last=160 --output=DIR
  bazel run //tools:average_policies -- --mode=ensemble --output=DIR POLICY_DIR POLICY_DIR ...
"""
import argparse
import sys

from mlgo.util.cli import user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--run", help="a train_* output dir (uses RUN/policies/iter-NNNNN)")
  ap.add_argument("--first", type=int)
  ap.add_argument("--last", type=int)
  ap.add_argument("--output", required=True)
  ap.add_argument("--mode", choices=("weights", "ensemble"), default="weights")
  ap.add_argument("policies", nargs="*")
  a = ap.parse_args(argv)
  dirs = [user_path(p) for p in a.policies]
  if a.run:
    if a.first is None or a.last is None or a.first > a.last:
      raise SystemExit("--run needs --first <= --last")
    run = user_path(a.run)
    dirs += [run / "policies" / f"iter-{i:05d}" for i in range(a.first, a.last + 1)]
  missing = [str(d) for d in dirs if not (d / "policy.json").exists()]
  if missing:
    raise SystemExit(f"not policy dirs: {', '.join(missing[:5])}")
  from mlgo.policy import derived  # pylint: disable=import-outside-toplevel
  try:
    if a.mode == "ensemble":
      derived.ensemble_policies(dirs, user_path(a.output))
    else:
      derived.average_policies(dirs, user_path(a.output))
  except ValueError as e:
    raise SystemExit(str(e)) from e
  verb = "ensembled" if a.mode == "ensemble" else "averaged"
  print(f"{verb} {len(dirs)} policies into {user_path(a.output)}")
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
