"""A copy of an inlining policy that takes clang's own decision where it is unsure.

  bazel run //tools:defer_policy -- --policy=models/inlining_oz_ir2vec --margin=0.4 \
      --output=DIR

Where the policy's two probabilities (inline / not) are closer than --margin, the
compiler's default decision is taken instead. Evaluate, training tools and the exported
plugin (tools/export_policy: the model takes `inlining_default` as an input, which the
plugin feeds) all decide the same way. --margin=0 removes a deferral.
"""
import argparse
import sys

from mlgo.util.cli import policy_path, user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--policy", required=True)
  ap.add_argument("--margin", type=float, required=True)
  ap.add_argument("--output", required=True)
  a = ap.parse_args(argv)
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  src = policy_path(a.policy)
  pol = policy_io.with_deferral(src, user_path(a.output), a.margin)
  print(f"wrote {user_path(a.output)} ({pol.problem}, defer margin {a.margin})")
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
