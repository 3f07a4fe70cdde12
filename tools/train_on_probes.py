"""Fine-tunes a policy on rollout probes (from //tools:probe_decisions).

  bazel run //tools:train_on_probes -- --policy=DIR --probes=DIR[,DIR...] --output=DIR
Pushes the policy towards the better action of every probe whose flip changed the
module's size (weighted by the change) while keeping its own decisions elsewhere.
Prints agreement with the probe labels on held-out modules before and after.
"""
import argparse
import sys

from mlgo.util.cli import user_path
from mlgo import workers


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--policy", required=True, help="the probed policy dir")
  ap.add_argument("--probes", required=True, help="probe dir(s), comma-separated")
  ap.add_argument("--output", required=True, help="policy dir to write")
  ap.add_argument("--epochs", type=int, default=30)
  ap.add_argument("--learning_rate", type=float, default=3e-4)
  ap.add_argument("--probe_weight", type=float, default=1.0,
                  help="weight of the probe loss against the anchor (keep) loss")
  ap.add_argument("--weight_unit", type=float, default=0.001,
                  help="relative size change that counts as weight 1")
  ap.add_argument("--weight_cap", type=float, default=4.0)
  ap.add_argument("--anchor_targets", default="greedy", choices=["greedy", "distribution"],
                  help="what keeps the policy in place on anchor states: its greedy "
                  "decisions as hard labels, or its whole action distribution (moves "
                  "only where the probes say so)")
  ap.add_argument("--weighting", default="module",
                  choices=["module", "key", "module_or_bytes"],
                  help="a probe's weight: its change relative to the module's score, or "
                  "to its own key's (eviction: the function's cost), or the larger of the "
                  "module's and its change in bytes (16 bytes weigh 1): large modules' "
                  "flips are not left at the floor")
  ap.add_argument("--regression_penalty", type=float, default=0.0,
                  help="bytes past 1.01 x the default's size weigh 1 + this in a probe's "
                  "weight (needs --default_sizes)")
  ap.add_argument("--default_sizes", help="an evaluate output's per_key.csv covering the "
                  "probed modules (its default column), for --regression_penalty")
  ap.add_argument("--seed", type=int, default=0)
  workers.add_flags(ap)
  a = ap.parse_args(argv)
  workers.apply_flags(a)
  from mlgo.training import probe_chain, probe_tuning  # pylint: disable=import-outside-toplevel
  defaults = probe_chain.module_scores(user_path(a.default_sizes)) if a.default_sizes else None
  m = probe_tuning.train_on_probes(user_path(a.policy),
                                   [user_path(p) for p in a.probes.split(",") if p],
                                   user_path(a.output), epochs=a.epochs,
                                   learning_rate=a.learning_rate,
                                   probe_weight=a.probe_weight,
                                   weight_unit=a.weight_unit, weight_cap=a.weight_cap,
                                   seed=a.seed, anchor_targets=a.anchor_targets,
                                   weighting=a.weighting,
                                   regression_penalty=a.regression_penalty,
                                   default_sizes=defaults)
  print(f"heldout_probe_agreement={m['after']['heldout_probe'][0]:.4f} "
        f"(before {m['before']['heldout_probe'][0]:.4f})")
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
