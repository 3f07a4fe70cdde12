"""`train_regalloc`: corpus -> prepared corpus -> default trace -> BC warm start -> PPO ->
held-out evaluation, each step cached or resumable under the output directory.

    output/
      trace/ trace_heldout/     default trace (train sample / held-out sample)
      bc_policy/  bc.json       warm start and its agreement with the default
      ppo/                      PPO run: policy/, policies/, checkpoint/, tensorboard/,
                                log.jsonl
      policy -> the final policy dir (a copy of ppo/policy, with saved_policy/)
      eval/                     functions.csv, functions.png, summary.json
      operative_config.gin
Running the same command again reuses finished steps and resumes PPO where it stopped.
"""
import json
import pathlib
import shutil
import sys
import time

import gin
import numpy as np

from mlgo.regalloc import evaluate as eval_lib, llc_run, model as model_lib, ppo, prepare
from mlgo.regalloc import trace as trace_lib
from mlgo.training import policy_io


@gin.configurable
class PipelineConfig:
  """Sizes and budgets of the pipeline's steps (the PPO ones are RegallocPPOConfig)."""

  def __init__(self, time_budget: float = 840.0, trace_modules: int = 160,
               heldout_trace_modules: int = 40, max_trace_decisions: int = 400,
               bc_epochs: int = 40, bc_time_budget: float = 100.0,
               bc_learning_rate: float = 1e-3, eval_reserve: float = 100.0,
               jobs: int = 2, seed: int = 0, hidden=None):
    self.__dict__.update({k: v for k, v in locals().items() if k != "self"})


def _sample(mods, n, seed):
  if len(mods) <= n:
    return list(mods)
  rng = np.random.default_rng(seed)
  return [mods[i] for i in sorted(rng.choice(len(mods), n, replace=False))]


def run(problem: str, corpus_dir, output, *, warmstart=None, cfg: PipelineConfig | None = None,
        ppo_config=None, prepared_root=None, stream=sys.stderr) -> dict:
  t_start = time.monotonic()
  cfg = cfg or PipelineConfig()
  out = pathlib.Path(output)
  out.mkdir(parents=True, exist_ok=True)
  if problem not in llc_run.PROBLEMS:
    raise SystemExit(f"unknown problem {problem!r}; choose one of {', '.join(llc_run.PROBLEMS)}")

  def elapsed():
    return time.monotonic() - t_start

  # 1. prepared corpus (cached in mlgo_home)
  prep = prepare.prepare(corpus_dir, jobs=cfg.jobs, out_root=prepared_root, stream=stream)
  train = [m for m in prep.split("train")]
  held = prep.split("heldout")
  if not train:
    raise SystemExit(f"{corpus_dir}: no usable training modules after preparation")
  print(f"[{elapsed():.0f}s] prepared corpus: {len(prep.modules)} modules "
        f"({len(train)} train, {len(held)} held out, {len(prep.failures)} failed) in "
        f"{prep.path}", file=stream, flush=True)

  # 2. default trace (train sample + held-out sample for the agreement figure)
  tr_mods = _sample(train, cfg.trace_modules, cfg.seed)
  trace_lib.generate(prep, problem, out / "trace", tr_mods, jobs=cfg.jobs,
                     max_decisions=cfg.max_trace_decisions, seed=cfg.seed, stream=stream)
  ho_mods = _sample(held, cfg.heldout_trace_modules, cfg.seed + 1)
  if ho_mods:
    trace_lib.generate(prep, problem, out / "trace_heldout", ho_mods, jobs=cfg.jobs,
                       max_decisions=cfg.max_trace_decisions, seed=cfg.seed + 1, stream=stream)
  feats, default, _ = trace_lib.load(out / "trace")
  if len(default) == 0:
    raise SystemExit("the default trace has no decisions: nothing to learn from")
  # Train only on modules where the trace saw decisions.
  traced = {p.stem for p in (out / "trace").glob("*.npz")}
  with_decisions = set()
  for p in (out / "trace").glob("*.npz"):
    with np.load(p) as z:
      if len(z["default"]):
        with_decisions.add(p.stem)
  ppo_mods = [m for m in train if trace_lib._safe(m.name) in with_decisions or
              trace_lib._safe(m.name) not in traced]
  print(f"[{elapsed():.0f}s] trace: {len(default)} decisions from {len(with_decisions)} "
        f"modules", file=stream, flush=True)

  # 3. warm start
  report = {}
  bc_dir = out / "bc_policy"
  if warmstart:
    pol = policy_io.load_policy(warmstart)
    if pol.problem != problem:
      raise SystemExit(f"{warmstart}: policy is for {pol.problem}, not {problem}")
    spec, weights = pol.spec, pol.arch.w
  elif (bc_dir / "policy.json").exists():
    pol = policy_io.load_policy(bc_dir)
    spec, weights = pol.spec, pol.arch.w
    if (out / "bc.json").exists():
      report["bc"] = json.loads((out / "bc.json").read_text())
  else:
    spec = model_lib.make_spec(problem, feats, hidden=cfg.hidden, seed=cfg.seed)
    weights = model_lib.train_bc(problem, spec, feats, default, epochs=cfg.bc_epochs,
                                 time_budget=cfg.bc_time_budget,
                                 learning_rate=cfg.bc_learning_rate, seed=cfg.seed,
                                 stream=stream)
    bc = {"train": model_lib.agreement(problem, spec, weights, feats, default)}
    hf, hd, _ = trace_lib.load(out / "trace_heldout")
    if len(hd):
      bc["heldout"] = model_lib.agreement(problem, spec, weights, hf, hd)
    policy_io.write_policy_dir(bc_dir, spec, weights, saved_model=False)
    (out / "bc.json").write_text(json.dumps(bc, indent=1) + "\n")
    report["bc"] = bc
  if "bc" in report:
    print(f"[{elapsed():.0f}s] behavioral cloning: {json.dumps(report['bc'])}", file=stream,
          flush=True)

  # 4. PPO for the rest of the budget (keeping time for the evaluation)
  pcfg = ppo_config or ppo.RegallocPPOConfig()
  trainer = ppo.Trainer(prep, problem, out / "ppo", spec=spec, weights=weights,
                        train_modules=ppo_mods, config=pcfg, stream=stream)
  budget = cfg.time_budget - elapsed() - cfg.eval_reserve
  print(f"[{elapsed():.0f}s] PPO: {len(ppo_mods)} training modules, about {max(0, budget):.0f}s "
        f"of training (iteration {trainer.state['iteration']} so far)", file=stream, flush=True)
  if budget > 0:
    trainer.run(time_budget=budget)
  final = out / "policy"
  src = out / "ppo" / "policy"
  best = trainer.state.get("best_validation")
  if best is not None and (out / "ppo" / "best_policy" / "policy.json").exists():
    src = out / "ppo" / "best_policy"
    print(f"[{elapsed():.0f}s] final policy: the best validation one (iteration "
          f"{best['iteration']}, {best['change'] * 100:+.2f}% on training modules)",
          file=stream, flush=True)
    report["best_validation"] = best
  pol = policy_io.load_policy(src)
  tmp = out / "policy.tmp"
  shutil.rmtree(tmp, ignore_errors=True)
  policy_io.write_policy_dir(tmp, pol.spec, pol.arch.w, saved_model=True)
  shutil.rmtree(final, ignore_errors=True)
  tmp.rename(final)
  report["ppo_iterations"] = trainer.state["iteration"]
  report["cpu_seconds"] = trainer.state["totals"]["cpu_seconds"]

  # 5. held-out evaluation
  if not held:
    print("no held-out modules: skipping the evaluation", file=stream)
    return report
  summary = eval_lib.evaluate(prep, problem, final, out / "eval", split="heldout",
                              jobs=cfg.jobs, stream=stream)
  (out / "eval" / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
  report["eval"] = summary
  report["seconds"] = elapsed()
  print(f"[{elapsed():.0f}s] policy: {final}; per-function CSV: {summary['csv']}; plot: "
        f"{summary['png']}", file=stream, flush=True)
  return report
