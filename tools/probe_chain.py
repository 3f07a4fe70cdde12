"""A whole inliner training as one resumable command: clone the default (or start from a
policy), then rounds of rollout probes and fine-tuning, with a CPU-hour ledger.

  bazel run //tools:probe_chain -- --output=DIR [--corpus=DIR] [--start=POLICY]
      [--ppo_iterations=N] [--rounds=6] [--cpu_hours=H] [--max_probes=16]
      [--flips_per_compile=4] [--flip_compiles=C] [--callee_groups=G]
      [--anchors=current|best]
      [--weighting=module|module_or_bytes|SCHEDULE] [--tail_average=K]
      [--tune_seeds=N] [--tune_guard] [--tune_guard_margin=POINTS]
      [--tune_select=agreement|held_bytes|held_capped]
      [--defer=margin=0.4,outside=2,nonzero=FEATURE,below=FEATURE=N] [--trace_sampling=0.25]
A --start policy of a narrower problem (e.g. inlining_ir2vec for --problem=
inlining_ir2vec_ctx) is widened first: zero weights on the new inputs, so it decides as
before, with their normalization from a behavioral clone the chain makes. With --defer the
start leaves those decisions to clang (defer_policy's deferrals), and so does every round.
Each round probes the current policy on the training split (several flips a compile,
each credited by its own functions' measured sizes: mlgo.training.multi_flip) and
fine-tunes it on the last two rounds' probes. The policy kept (DIR/policy) has the lowest
training-split total among those with at most 3% of modules more than 1% bigger; no
held-out module is compiled. DIR/chain.json holds every stage's wall time and CPU-hours,
DIR/chain.png the training-split total against CPU-hours. Rerunning the same command
continues where it stopped (more --rounds or a larger --cpu_hours extend a chain).
"""
import argparse
import signal
import sys

from mlgo.util.cli import user_path


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--output", required=True, help="chain dir (resumable)")
  ap.add_argument("--corpus", help="corpus dir (default: the default corpus)")
  ap.add_argument("--problem", default="inlining_ir2vec",
                  choices=["inlining", "inlining_ir2vec", "inlining_ctx", "inlining_ir2vec_ctx"],
                  help="inlining_ir2vec (default) also sees instruction mixes (LLVM 22); "
                       "the _ctx variants also the context plugin's call-site features")
  ap.add_argument("--start", help="start policy dir (default: a behavioral clone of the "
                  "default heuristic, made by the chain)")
  ap.add_argument("--ppo_iterations", type=int, default=0,
                  help="PPO iterations from the start before the probe rounds (0: none)")
  ap.add_argument("--ppo_gin", default="configs/inlining.gin",
                  help="the PPO stage's gin file (PPOConfig.jobs is --jobs)")
  ap.add_argument("--rounds", type=int, default=6, help="probe rounds, at most")
  ap.add_argument("--cpu_hours", type=float,
                  help="budget: no round starts that would end past it, with the "
                       "evaluation of the policy it makes (~a quarter of a round)")
  ap.add_argument("--jobs", type=int, default=2, help="parallel compiles")
  ap.add_argument("--max_probes", type=int, default=16, help="probes per module a round")
  ap.add_argument("--flips_per_compile", type=int, default=4)
  ap.add_argument("--flip_compiles", type=int, default=0,
                  help="> 0: that many flip compiles a large module, each packed with up to "
                  "--flips_per_compile flips, instead of --max_probes (probe_decisions)")
  ap.add_argument("--callee_groups", type=int, default=0,
                  help="> 0: up to that many more compiles a module, each answering every "
                  "call to one callee the other way at once (probe_decisions)")
  ap.add_argument("--credit", default="function_size", choices=["function_size", "ir2native"],
                  help="function_size: flips compiled with remarks, needed for "
                  "--flips_per_compile > 1; ir2native (no model given): plain single flips")
  ap.add_argument("--random_fraction", type=float, default=0.25)
  ap.add_argument("--next_policy", default="tuned", choices=["tuned", "average"],
                  help="the next round probes the tuned policy, or its weight average "
                  "with the probed one")
  ap.add_argument("--average_weight", default="0.5",
                  help="--next_policy=average: the tuned policy's share of the average "
                  "(0.5: half way from the probed policy; 1: the tuned one); a list such "
                  "as 1,1,0.5 is a schedule, one a round, the last repeating")
  ap.add_argument("--probe_rounds_kept", type=int, default=2,
                  help="fine-tuning reads this many latest rounds' probes")
  ap.add_argument("--keep_stalled_probes", action="store_true",
                  help="--probe_rounds_kept counts policies: the probes of rounds that "
                  "probed the same weights (a guarded round kept its policy) all stay in")
  ap.add_argument("--regression_penalty", type=float, default=0.0,
                  help="fine-tuning: bytes past 1.01 x the default's size weigh 1 + this")
  ap.add_argument("--anchors", default="current", choices=["current", "best"],
                  help="fine-tuning's anchor states: the probed policy's own decisions "
                  "(current), or each module's from the round whose policy compiled it "
                  "smallest, with that round's decisions (best)")
  ap.add_argument("--weighting", default="module",
                  help="fine-tuning's probe weights: the change relative to the module "
                  "(module), or the larger of that and the bytes changed (module_or_bytes: "
                  "large modules are not left at the floor); a schedule such as "
                  "module_or_bytes*6,module is one a round, the last repeating")
  ap.add_argument("--tail_average", type=int, default=0,
                  help="> 1: the weight average of the last this many rounds' policies is "
                  "a candidate too (evaluated on the training split, counted)")
  ap.add_argument("--tune_seeds", type=int, default=1,
                  help="> 1: fine-tune each round with this many seeds and go on with the "
                  "tuning that agrees best with the held-out modules' probe labels")
  ap.add_argument("--tune_guard", action="store_true",
                  help="when no tuning beats the probed policy on that measure, the round "
                  "goes on with the probed policy")
  ap.add_argument("--tune_guard_margin", type=float, default=0.0,
                  help="with --tune_guard and a held select: the best tuning also goes on "
                  "when it is within this many points of the smallest held figure the "
                  "chain has had")
  ap.add_argument("--tune_select", choices=("agreement", "held_bytes", "held_capped"),
                  default="agreement",
                  help="what picks a round's tuning: the held-out probe agreement (free), or "
                  "held_bytes: each tuning compiled greedily on the modules fine-tuning "
                  "holds out, the smallest total goes on (counted in the round); "
                  "held_capped: the same, no module weighing more than 5%% of their bytes")
  ap.add_argument("--defer", default="",
                  help="a deferral from the start on, in defer_policy's terms, comma-"
                  "separated (e.g. margin=0.4,outside=2,nonzero=last_call_to_static_bonus,"
                  "below=edge_count=32): clang makes those decisions in every round, "
                  "probes never flip them, and each round's policy keeps the deferral")
  ap.add_argument("--trace_sampling", type=float, default=0.25,
                  help="the share of training modules whose default trace makes the clone; "
                  "it also sets the range --defer's outside= measures against (1: the "
                  "whole training split)")
  ap.add_argument("--max_regressed_pct", type=float, default=3.0,
                  help="selection: most %% of training modules >1%% bigger a kept policy has")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--timeout", type=float, default=300.0, help="seconds per compile")
  a = ap.parse_args(argv)
  from mlgo import corpus  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  from mlgo.training import probe_chain  # pylint: disable=import-outside-toplevel
  cfg = probe_chain.ChainConfig(
      corpus=str(corpus.corpus_arg(a.corpus, get_problem(a.problem).corpus_opt)),
      output=str(user_path(a.output)), problem=a.problem,
      start=str(user_path(a.start)) if a.start else None, rounds=a.rounds,
      ppo_iterations=a.ppo_iterations, ppo_gin=a.ppo_gin,
      cpu_hours=a.cpu_hours, jobs=a.jobs, max_probes=a.max_probes,
      flips_per_compile=a.flips_per_compile, flip_compiles=a.flip_compiles,
      callee_groups=a.callee_groups, credit=a.credit,
      random_fraction=a.random_fraction, next_policy=a.next_policy,
      average_weight=a.average_weight,
      probe_rounds_kept=a.probe_rounds_kept, keep_stalled_probes=a.keep_stalled_probes,
      regression_penalty=a.regression_penalty,
      anchors=a.anchors, weighting=a.weighting, tail_average=a.tail_average,
      tune_seeds=a.tune_seeds, tune_guard=a.tune_guard, tune_select=a.tune_select,
      tune_guard_margin=a.tune_guard_margin,
      max_regressed_pct=a.max_regressed_pct, defer=a.defer, trace_sampling=a.trace_sampling,
      seed=a.seed, timeout=a.timeout)
  try:
    cfg.check()  # settings that cannot run: one line, nothing made
  except ValueError as e:
    print(f"probe_chain: error: {e}", file=sys.stderr)
    return 1
  # SIGTERM (a pause) unwinds like Ctrl-C, so the cut stage's time reaches the ledger.
  signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
  probe_chain.run(cfg)   # an error mid-chain keeps its traceback; the chain resumes
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
