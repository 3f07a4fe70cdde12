"""One training run end to end, for any problem: corpus -> default trace -> behavioral
cloning warm start -> PPO (tf-agents) -> held-out evaluation, for a fixed number of PPO
iterations (reproducible) or within a time budget.

Every step is the shared one (mlgo.training.trace, bc, ppo; mlgo.evaluation); llc-only
problems first prepare the corpus (mlgo.env.prepared: optimized once, cached under
MLGO_HOME). Each step is cached or resumable under the output directory:

    output/
      trace/          default trace of a sample of training modules (dataset format)
      bc_policy/      warm start (bc_metrics.json: agreement with the default on modules
                      of the training split that BC held out)
      ppo/            PPO run: policy/, policies/, best_policy/, checkpoint/,
                      tensorboard/, log.jsonl
      policy/         the final policy (best greedy validation, or an ensemble or average
                      of the best few: final_policy; with saved_policy/)
      eval/           held-out evaluation: per_key.csv, changes.png, summary.json
      unseen/         the same on packages never trained on (generalization.md, .png)
      operative_config.gin
Running the same command again reuses finished steps and resumes PPO where it stopped.
"""
import io
import json
import pathlib
import shutil
import sys
import time

import gin
import numpy as np

from mlgo.policy import derived, policy_io
from mlgo import problems as problems_lib
from mlgo.env import work
from mlgo.training import bc, dataset, ppo, selection, trace as trace_lib


@gin.configurable
class PipelineConfig:
  """Sizes and budgets of the steps (PPO's own are PPOConfig).

  time_budget: seconds for the whole run; PPO gets what trace and BC leave, minus
    eval_reserve for the held-out evaluation.
  ppo_iterations: if > 0, PPO runs exactly this many iterations and the time budget does
    not cut it. Every step is seeded and PPO is deterministic (batches in submission
    order, seeded sampling, the RNG state in the checkpoint), so the same seed and count
    give the same policy, bit for bit, however fast or loaded the machine is, and after
    a kill and resume. With 0, PPO runs as long as the budget allows: the count, and so
    the policy, then depends on the machine's speed and load.
  trace_modules: training modules traced for normalization and the warm start, at most
    max_trace_decisions decisions kept per module.
  bc_heldout_fraction: training modules (by name hash) whose decisions BC never trains
    on; its agreement on them is reported.
  unseen_suites: after the held-out split, evaluate on these too (mlgo.evaluation.
    generalization suites: "@unseen" = packages never used for training or selection,
    built once and cached); their lines are printed before the held-out summary. The
    first run builds the corpus (about two minutes); () skips it. unseen_reserve
    seconds of the budget are kept for it.
  final_policy: what the run keeps when PPO validated its policies: "best" (the best
    greedy validation), "ensemble" (one wider network averaging the outputs of the
    final_top_k best validated iterations; derived.ensemble_policies) or "average"
    (their weight average).
  architecture_options: keyword options of the problem's network, given to BC's fresh
    spec (PPO trains what BC starts), e.g. {"cost_mask": True} for eviction.
  log_scale: BC's fresh spec encodes the problem's log_scale_features with log instead
    of slog (mlgo.policy.normalization; eviction's frequency and weight features).
  guarded_report: (regalloc) also evaluate guarded compiles of the final policy on the
    run's held-out split and unseen_suites (mlgo.env.guarded: per function the better of
    the default and the policy); their lines start with "guarded". The plain
    evaluations come from the same compiles; guarded_reserve seconds of the budget are
    kept for the guard's extra (third) compiles.
  """

  def __init__(self, time_budget: float = 840.0, trace_modules: int = 160,
               max_trace_decisions: int = 400, bc_epochs: int = 40,
               bc_time_budget: float = 100.0, bc_learning_rate: float = 1e-3,
               bc_label_smoothing: float = 0.0, bc_heldout_fraction: float = 0.2,
               eval_reserve: float = 100.0, jobs: int = 2, seed: int = 0, hidden=None,
               unseen_suites=("@unseen",), unseen_reserve: float = 150.0,
               final_policy: str = "best", final_top_k: int = 3,
               architecture_options=None, guarded_report: bool = False,
               guarded_reserve: float = 45.0, ppo_iterations: int = 0,
               log_scale: bool = False):
    if final_policy not in ("best", "ensemble", "average"):
      raise ValueError(f"PipelineConfig.final_policy {final_policy!r}: expected best, "
                       "ensemble or average")
    self.__dict__.update({k: v for k, v in locals().items() if k != "self"})


def _sample(mods, n, seed):
  if len(mods) <= n:
    return list(mods)
  rng = np.random.default_rng(seed)
  return [mods[i] for i in sorted(rng.choice(len(mods), n, replace=False))]


def _merge_best(state: dict, ppo_dir, cfg, report: dict, say):
  """The final_top_k best validated iterations merged (cfg.final_policy) into
  ppo_dir/final_policy; None (keep the single best) when fewer than two are at hand."""
  its = selection.best_iterations(state.get("validation_history", {}), cfg.final_top_k,
                                  state.get("hot_refused", ()))
  its = [i for i in its if (ppo_dir / "policies" / f"iter-{i:05d}" / "policy.json").exists()]
  if len(its) < 2:
    say(f"final policy: fewer than two validated iterations at hand for an "
        f"{cfg.final_policy}; keeping the best one")
    return None
  merge = (derived.ensemble_policies if cfg.final_policy == "ensemble"
           else derived.average_policies)
  dst = ppo_dir / "final_policy"
  merge([ppo_dir / "policies" / f"iter-{i:05d}" for i in its], dst, saved_model=False)
  hist = state["validation_history"]
  report["final_policy"] = {"kind": cfg.final_policy, "iterations": its,
                            "validation": [hist[str(i)] for i in its]}
  say(f"final policy: the {cfg.final_policy} of iterations "
      f"{', '.join(str(i) for i in its)} (the best {len(its)} validations)")
  return dst


def run(problem_name: str, corpus_dir, output, *, warmstart=None,
        cfg: PipelineConfig | None = None, ppo_config: ppo.PPOConfig | None = None,
        stream=sys.stderr) -> dict:
  t_start = time.monotonic()
  cfg = cfg or PipelineConfig()
  pcfg = ppo_config or ppo.PPOConfig()
  out = pathlib.Path(output)
  out.mkdir(parents=True, exist_ok=True)
  problem = problems_lib.get_problem(problem_name)

  def say(msg):
    print(f"[{time.monotonic() - t_start:.0f}s] {msg}", file=stream, flush=True)

  # 1. the corpus (prepared once for llc-only problems)
  corpus = work.corpus_for(corpus_dir, problem, jobs=cfg.jobs, stream=stream)
  train, held = corpus.split("train"), corpus.split("heldout")
  if not train:
    raise SystemExit(f"{corpus_dir}: no usable training modules")
  say(f"corpus: {len(corpus.modules)} modules ({len(train)} train, {len(held)} held out)"
      f" in {corpus.path}")

  # 2. default trace of a training sample (of the modules PPO may sample: within
  # PPOConfig.max_module_bytes)
  sample = [m.name for m in _sample(selection.within_size(train, pcfg), cfg.trace_modules,
                                    cfg.seed)]
  trace_lib.generate_default_trace(corpus, problem_name, out / "trace", modules=sample,
                                   jobs=cfg.jobs, seed=cfg.seed,
                                   max_decisions_per_module=cfg.max_trace_decisions,
                                   timeout=pcfg.compile_timeout, pool_kind=pcfg.pool,
                                   stream=stream)
  ds = dataset.Dataset(out / "trace")
  if ds.num_decisions == 0:
    raise SystemExit("the default trace has no decisions: nothing to learn from")
  say(f"trace: {ds.num_decisions} decisions from "
      f"{sum(1 for i in ds.modules.values() if i.get('decisions'))} modules")

  # 3. warm start
  report = {}
  bc_dir = out / "bc_policy"
  if warmstart:
    start = pathlib.Path(warmstart)
  else:
    start = bc_dir
    if not (bc_dir / "bc_metrics.json").exists():
      # With a fixed PPO count the run must not depend on time anywhere: BC runs its
      # epochs whatever they take.
      bc.train_bc(out / "trace", bc_dir, hidden=cfg.hidden, epochs=cfg.bc_epochs,
                  learning_rate=cfg.bc_learning_rate, label_smoothing=cfg.bc_label_smoothing,
                  heldout_fraction=cfg.bc_heldout_fraction, seed=cfg.seed,
                  architecture_options=cfg.architecture_options, log_scale=cfg.log_scale,
                  time_budget=None if cfg.ppo_iterations > 0 else cfg.bc_time_budget,
                  stream=stream)
    report["bc"] = json.loads((bc_dir / "bc_metrics.json").read_text())

  # 4. PPO: a fixed count, or the rest of the budget (keeping time for the evaluation)
  trainer = ppo.Trainer(corpus, out / "ppo", problem_name=problem_name, warmstart=start,
                        trace=out / "trace", config=pcfg, stream=stream)
  budget = (cfg.time_budget - (time.monotonic() - t_start) - cfg.eval_reserve
            - (cfg.unseen_reserve if cfg.unseen_suites else 0.0)
            - (cfg.guarded_reserve if cfg.guarded_report else 0.0))
  n_big = len(trainer.train_modules) - len(selection.within_size(trainer.train_modules, pcfg))
  modules = f"{len(trainer.train_modules)} training modules" + (
      f" ({n_big} above PPOConfig.max_module_bytes={pcfg.max_module_bytes} left out)"
      if n_big else "")
  if cfg.ppo_iterations > 0:
    say(f"PPO: {modules}, {cfg.ppo_iterations} iterations (iteration "
        f"{trainer.state['iteration']} so far)")
    trainer.run(num_iterations=cfg.ppo_iterations)
  else:
    say(f"PPO: {modules}, about {max(0, budget):.0f}s (iteration "
        f"{trainer.state['iteration']} so far)")
    if budget > 0:
      trainer.run(time_budget=budget)
  src = out / "ppo" / "policy"
  best = trainer.state.get("best_validation")
  if best is not None and (out / "ppo" / "best_policy" / "policy.json").exists():
    src = out / "ppo" / "best_policy"
    report["best_validation"] = best
    say(f"final policy: the best greedy validation one (iteration {best['iteration']}, "
        f"{best['change_pct']:+.2f}% {pcfg.validation_metric} on {trainer.validation_where})")
    if cfg.final_policy != "best":
      src = _merge_best(trainer.state, out / "ppo", cfg, report, say) or src
  pol = policy_io.load_policy(src)
  spec = {k: v for k, v in pol.spec.items()
          if k not in derived.MEMBER_PROVENANCE}
  tmp = out / "policy.tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  policy_io.write_policy_dir(tmp, spec, pol.arch.w, saved_model=True)
  shutil.rmtree(out / "policy", ignore_errors=True)
  tmp.rename(out / "policy")
  report["ppo_iterations"] = trainer.state["iteration"]
  report["cpu_seconds"] = trainer.state["totals"]["cpu_seconds"]

  # 5. held-out evaluation, and the unseen suites. With guarded_report each is one pass
  # of guarded compiles, which compile the policy on its own anyway: the plain
  # evaluation comes from the same compiles (plain_output), the guarded one beside it.
  from mlgo import evaluation  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import generalization  # pylint: disable=import-outside-toplevel
  guarded = bool(cfg.guarded_report)
  guarded_rows = []
  if held:
    kw = dict(split="heldout", jobs=cfg.jobs, timeout=pcfg.compile_timeout,
              pool_kind=pcfg.pool)
    if guarded:
      s = evaluation.evaluate(problem_name, corpus, out / "policy", out / "guarded" / "heldout",
                              guarded=True, plain_output=out / "eval", plain_stream=stream,
                              stream=io.StringIO(), **kw)
      report["eval"] = s.pop("plain")
      guarded_rows.append(generalization.suite_row("heldout", s))
    else:
      report["eval"] = evaluation.evaluate(problem_name, corpus, out / "policy", out / "eval",
                                           stream=stream, **kw)
  else:
    say("no held-out modules: skipping the evaluation")
  if cfg.unseen_suites:
    rep = generalization.run(problem_name, out / "policy",
                             out / ("guarded" if guarded else "unseen"),
                             list(cfg.unseen_suites), jobs=cfg.jobs,
                             timeout=pcfg.compile_timeout, pool_kind=pcfg.pool,
                             stream=io.StringIO() if guarded else stream, guarded=guarded,
                             plain_output=out / "unseen" if guarded else None,
                             plain_stream=stream)
    plain = rep.get("plain", rep)
    report["unseen"] = [generalization.format_line(r) for r in plain["suites"]]
    if guarded:
      guarded_rows += rep["suites"]
  if guarded:
    # One guarded report for held out and the unseen suites (out/guarded/generalization.md).
    generalization.write_report(problem_name, out / "policy", True, guarded_rows,
                                out / "guarded")
    report["guarded"] = ["guarded " + generalization.format_line(r) for r in guarded_rows]
    for line in report["guarded"]:
      say(line)
  report["seconds"] = time.monotonic() - t_start
  (out / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
  return report
