"""A copy of an inlining policy that takes clang's own decision where it is unsure.

  bazel run //tools:defer_policy -- --policy=models/inlining_oz_ir2vec --margin=0.4 \
      [--outside=2] [--nonzero=last_call_to_static_bonus] [--below=edge_count=32] --output=DIR

Where the policy's two probabilities (inline / not) are closer than --margin, the
compiler's default decision is taken instead. With --outside=F, so it is where some input
lies outside the range the policy's normalization saw in training, by more than a factor
F in 1 + |x| (e.g. F=2: a callee more than about twice the largest one seen). Evaluate,
training tools and the exported plugin (tools/export_policy: the model takes
`inlining_default` as an input, which the plugin feeds) all decide the same way.
With --nonzero=NAME (repeatable), so it is wherever that scalar input is not 0; e.g.
last_call_to_static_bonus leaves the sole call of a static function to clang.
With --below=NAME=VALUE (repeatable), so it is wherever that scalar input is under VALUE;
e.g. edge_count=32 leaves modules with fewer than 32 calls to defined functions to clang
(there one departure is a large share of a small object, and there is little to win).
--margin=0 without --outside, --nonzero or --below removes a deferral.
"""
import argparse
import sys

from mlgo.util.cli import policy_path, user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--policy", required=True)
  ap.add_argument("--margin", type=float, default=0.0,
                  help="defer where the two probabilities are closer than this")
  ap.add_argument("--outside", type=float, default=0.0,
                  help="defer where an input is beyond the training range by this factor "
                       "(>= 1; 0: off)")
  ap.add_argument("--nonzero", action="append", default=[], metavar="FEATURE",
                  help="defer where this scalar input is not 0 (repeatable)")
  ap.add_argument("--below", action="append", default=[], metavar="FEATURE=VALUE",
                  help="defer where this scalar input is under VALUE (repeatable)")
  ap.add_argument("--output", required=True)
  a = ap.parse_args(argv)
  from mlgo.policy import derived  # pylint: disable=import-outside-toplevel
  below = {}
  for item in a.below:
    try:
      name, value = derived.parse_below_item(item)
    except ValueError as e:
      ap.error(f"--{e}")
    below[name] = value
  src = policy_path(a.policy)
  try:
    pol = derived.with_deferral(src, user_path(a.output), a.margin, outside=a.outside,
                                  nonzero=a.nonzero, below=below)
  except (ValueError, FileNotFoundError) as e:
    print(f"defer_policy: error: {e}", file=sys.stderr)
    return 1
  print(f"wrote {user_path(a.output)} ({pol.problem}, defer margin {a.margin}"
        + (f", outside x{a.outside}" if a.outside else "")
        + "".join(f", nonzero {n}" for n in a.nonzero)
        + "".join(f", below {n} < {v:g}" for n, v in below.items()) + ")")
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
