"""Behavioral cloning of the default heuristic from a default trace (warm start for PPO).

  bazel run //tools:train_bc -- --trace=DIR --output=POLICY_DIR
Prints accuracy on decisions of held-out modules; writes a policy dir (+ bc_metrics.json).
"""
import argparse
import sys

from mlgo.util.cli import user_path


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--trace", required=True,
                  help="dataset dir from generate_default_trace (comma-separated: several, "
                       "read as one; e.g. a teacher's trace and its student's)")
  ap.add_argument("--output", required=True, help="policy dir to write")
  ap.add_argument("--epochs", type=int, default=4)
  ap.add_argument("--batch_size", type=int, default=256)
  ap.add_argument("--learning_rate", type=float, default=1e-3)
  ap.add_argument("--hidden", default="", help="hidden layer sizes (default: the problem's)")
  ap.add_argument("--heldout_fraction", type=float, default=0.1)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--label_smoothing", type=float, default=0.1,
                  help="keeps some probability on the non-default action (PPO explores)")
  ap.add_argument("--explore_eps", type=float, default=0.0,
                  help="if > 0: margin-dependent exploration instead of label smoothing "
                       "(inlining: eps * exp(-|cost_estimate - threshold| / tau))")
  ap.add_argument("--explore_tau", type=float, default=10.0)
  ap.add_argument("--teacher", help="policy dir whose greedy decisions are the labels "
                                    "instead of the trace's default actions")
  ap.add_argument("--encoding", default="quantile", choices=["quantile", "slog"],
                  help="feature encoding: quantile (3 floats a feature) or slog (1: the "
                       "scaled log; cheaper to evaluate in a release compiler)")
  ap.add_argument("--log_scale", action="store_true",
                  help="encode the problem's log_scale_features (eviction: frequencies and "
                       "weights divided by the function's largest) with log instead of slog")
  a = ap.parse_args(argv)
  from mlgo.training import bc  # pylint: disable=import-outside-toplevel
  traces = [user_path(t) for t in a.trace.split(",") if t]
  m = bc.train_bc(traces if len(traces) > 1 else traces[0], user_path(a.output),
                  hidden=[int(x) for x in a.hidden.split(",") if x] or None, epochs=a.epochs,
                  batch_size=a.batch_size, learning_rate=a.learning_rate,
                  heldout_fraction=a.heldout_fraction, seed=a.seed,
                  label_smoothing=a.label_smoothing, explore_eps=a.explore_eps,
                  explore_tau=a.explore_tau,
                  teacher=user_path(a.teacher) if a.teacher else None,
                  encoding=a.encoding, log_scale=a.log_scale)
  if "heldout_accuracy" in m:
    print(f"heldout_accuracy={m['heldout_accuracy']:.4f} train_accuracy={m['train_accuracy']:.4f}")
  else:
    print(f"heldout_order_agreement={m['heldout_order_agreement']:.4f} "
          f"train_order_agreement={m['train_order_agreement']:.4f}")
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
