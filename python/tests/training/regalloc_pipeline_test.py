"""The shared pipeline on the regalloc problems (tiny -O2 corpus): prepare, tracer trace,
behavioral cloning of the problem's network, tf-agents PPO iterations with validation,
held-out evaluation with per-function keys, and resume."""
import csv
import json
import pathlib

import numpy as np
import pytest

from mlgo import evaluation
from mlgo.policy import policy_io
from mlgo.training import dataset, pipeline, ppo, testing

DATA = pathlib.Path(__file__).resolve().parents[1] / "env" / "regalloc_programs"
PROBLEMS = ("regalloc_eviction", "regalloc_priority")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  d = tmp_path_factory.mktemp("tiny")
  return testing.prepared_tiny_corpus(d, sorted(DATA.glob("*.c")), heldout=("parse",),
                                      variants=2), d


def _configs(iterations, unseen=(), final="best", guarded=False):
  cfg = pipeline.PipelineConfig(time_budget=10_000, trace_modules=10, bc_epochs=30,
                                bc_time_budget=60, eval_reserve=0, jobs=2,
                                bc_heldout_fraction=0.0, unseen_suites=unseen,
                                final_policy=final, guarded_report=guarded)
  pcfg = ppo.PPOConfig(modules_per_iteration=3, num_iterations=iterations, jobs=2,
                       minibatch_rows=8, validate_every=1, validation_modules=4,
                       validation_metric="module_mean", score_weighting_power=0.5,
                       max_decisions_per_module=100, batch_advantage_normalization=True)
  return cfg, pcfg


@pytest.mark.parametrize("problem", PROBLEMS)
def test_pipeline(tiny, problem):
  corpus, d = tiny
  assert len(corpus.modules) == 6 and not corpus.failures
  assert all(m.llc_flags[0] == "-O2" for m in corpus.modules)
  out = d / problem
  # The tiny corpus itself stands in for unseen packages (a prepared corpus dir works
  # as a suite too); the real default is @unseen.
  cfg, pcfg = _configs(2, unseen=(str(corpus.path),), guarded=True)
  rep = pipeline.run(problem, corpus, out, cfg=cfg, ppo_config=pcfg)
  # The trace holds the tracer's labels of every kept decision.
  ds = dataset.Dataset(out / "trace")
  assert ds.problem == problem and ds.num_decisions > 50
  shard = next(ds.shards())
  assert len(shard["default_action"]) == len(shard["action"])
  assert all("::" in k for info in ds.modules.values() for k in info["scores"])
  bcm = rep["bc"]
  if problem == "regalloc_eviction":
    assert bcm["train_decisions"] > 50 and bcm["train_accuracy"] > 0.3
  else:
    assert bcm["train_order_agreement"] > 0.5 and np.isfinite(bcm["train_mean_abs_error"])
  assert rep["ppo_iterations"] == 2
  log = [json.loads(l) for l in (out / "ppo" / "log.jsonl").read_text().splitlines()]
  assert [r["iteration"] for r in log] == [1, 2]
  assert all(r["ok"] == 3 and 0 < r["decisions"] <= 300 and np.isfinite(r["reward_mean"])
             and np.isfinite(r["validation_change_pct"]) for r in log)
  assert rep["best_validation"]["iteration"] in (0, 1, 2)
  assert list((out / "ppo" / "tensorboard").iterdir())
  ev = rep["eval"]
  assert ev["modules"] == 2 and ev["keys"] >= 2 and ev["failed"] == 0 and ev["key"] == "function"
  assert ev["default"] > 0 and np.isfinite(ev["policy_score"]) and ev["decisions"] > 0
  assert ev["line"].startswith(f"modules=2 functions={ev['keys']} default_cost=")
  assert (out / "eval" / "per_key.csv").read_text().count("::") == ev["keys"]
  # Per-function geomean: functions without spill code on either side are left out.
  rows = list(csv.DictReader(open(out / "eval" / "per_key.csv")))
  logs = [np.log((float(r["policy"]) + 1) / (float(r["default"]) + 1)) for r in rows
          if float(r["default"]) > 0 or float(r["policy"]) > 0]
  assert ev["key_geomean_change_pct"] == pytest.approx(100 * (np.exp(np.mean(logs)) - 1))
  assert (out / "eval" / "changes.png").stat().st_size > 1000
  (unseen,) = rep["unseen"]
  assert unseen.startswith(f"{corpus.path.name}: change=") and "modules_worse_1pct=" in unseen
  assert (out / "unseen" / "generalization.md").exists()
  # Guarded compiles of the same policy: per function never worse than the default.
  assert [l.split(":")[0] for l in rep["guarded"]] == ["guarded heldout",
                                                      f"guarded {corpus.path.name}"]
  assert all("/0 " in l.split("keys_better/worse=")[1] for l in rep["guarded"])
  g = json.loads((out / "guarded" / "generalization.json").read_text())
  assert [r["suite"] for r in g["suites"]] == ["heldout", corpus.path.name]
  assert g["guarded"] and all(r["keys_regressed"] == 0 and r["change_pct"] <= 0
                              for r in g["suites"])
  # No function above its default, so no per-function ratio above 1.
  assert all(r["key_geomean_change_pct"] <= 1e-9 for r in g["suites"])
  # The guarded held-out evaluation is of the run's own corpus (its 2 held-out modules),
  # made in the same pass as the plain one above.
  gh = json.loads((out / "guarded" / "heldout" / "summary.json").read_text())
  assert gh["modules"] == ev["modules"] and gh["default"] == pytest.approx(ev["default"])
  assert gh["regressions"] == 0 and gh["policy_score"] <= min(ev["policy_score"], gh["default"])
  assert gh["guarded"]["mismatches"] == []
  pol = policy_io.load_policy(out / "policy")
  assert pol.problem == problem
  assert (out / "policy" / "saved_policy" / "saved_model.pb").exists()
  # Resume: the same command continues from the checkpoint (one more iteration), this
  # time keeping the ensemble of the three best validated iterations.
  cfg, pcfg3 = _configs(3, final="ensemble")
  rep2 = pipeline.run(problem, corpus, out, cfg=cfg, ppo_config=pcfg3)
  assert rep2["ppo_iterations"] == 3
  st = json.loads((out / "ppo" / "checkpoint" / "state.json").read_text())
  hist = st["validation_history"]
  assert sorted(hist, key=int) == ["0", "1", "2", "3"]
  fin = rep2["final_policy"]
  assert fin["kind"] == "ensemble" and len(fin["iterations"]) == 3
  assert sorted(hist.values())[:3] == fin["validation"]
  members = [policy_io.load_policy(out / "ppo" / "policies" / f"iter-{i:05d}")
             for i in fin["iterations"]]
  ens = policy_io.load_policy(out / "policy")
  assert ens.spec["architecture"]["hidden"] == [
      sum(m.spec["architecture"]["hidden"][j] for m in members) for j in range(2)]
  feats = {n: shard[f"f/{n}"][:50] for n in ens.input_names}
  key = "logits" if problem == "regalloc_eviction" else "loc"
  want = np.mean([m.dist_params_batch(feats)[key] for m in members], axis=0)
  np.testing.assert_allclose(ens.dist_params_batch(feats)[key], want, rtol=1e-4, atol=1e-4)


def test_fixed_iteration_count_gives_the_same_policy_after_a_resume(tiny, tmp_path):
  """PipelineConfig.ppo_iterations: the time budget does not cut PPO, and two runs of the
  same seed and count give the same policy bit for bit, one of them killed (here: ended)
  after its first iteration and resumed by the same command."""
  corpus, _ = tiny

  def run(out, iterations):
    cfg, pcfg = _configs(1000)
    cfg.ppo_iterations = iterations
    cfg.time_budget = 1.0  # long spent before PPO starts: a time-based run would stop
    return pipeline.run("regalloc_eviction", corpus, out, cfg=cfg, ppo_config=pcfg)

  straight = run(tmp_path / "a", 3)
  assert straight["ppo_iterations"] == 3
  first = run(tmp_path / "b", 1)
  assert first["ppo_iterations"] == 1
  resumed = run(tmp_path / "b", 3)
  assert resumed["ppo_iterations"] == 3
  assert resumed["best_validation"] == straight["best_validation"]
  wa = np.load(tmp_path / "a" / "policy" / "weights.npz")
  wb = np.load(tmp_path / "b" / "policy" / "weights.npz")
  assert sorted(wa.files) == sorted(wb.files)
  for k in wa.files:
    np.testing.assert_array_equal(wa[k], wb[k], err_msg=k)
  # ... and so the same held-out figure; the policy did train (it moved from BC's).
  assert resumed["eval"]["policy_score"] == straight["eval"]["policy_score"]
  bc_w = np.load(tmp_path / "a" / "bc_policy" / "weights.npz")
  last = np.load(tmp_path / "a" / "ppo" / "policy" / "weights.npz")
  assert any(not np.array_equal(bc_w[k], last[k]) for k in last.files)


def test_default_policy_evaluates_to_zero_change(tiny, tmp_path):
  corpus, _ = tiny
  s = evaluation.evaluate("regalloc_eviction", corpus, "default", tmp_path, split="all",
                          use_cache=False)
  assert s["change_pct"] == 0.0 and s["regressions"] == 0 and s["modules"] == 6
  total = sum(sum(m.baseline.values()) for m in corpus.modules)
  assert s["default"] == pytest.approx(total)


def test_pipeline_with_the_performance_model_reward(tiny, monkeypatch):
  """regalloc_eviction_perf: the same pipeline, scores from the learned block cost model
  (llc's address map + models/perf_model); its policy stays an eviction policy."""
  from mlgo import env  # pylint: disable=import-outside-toplevel
  from mlgo.training import testing  # pylint: disable=import-outside-toplevel
  monkeypatch.setenv("MLGO_PERF_MODEL", testing.data_path("models/perf_model/cost_model.json"))
  corpus, d = tiny
  out = d / "perf"
  cfg, pcfg = _configs(1)
  rep = pipeline.run("regalloc_eviction_perf", corpus, out, cfg=cfg, ppo_config=pcfg)
  ds = dataset.Dataset(out / "trace")
  # The trace's scores (default in charge) are the model's cycles per call, the same as
  # a plain default compile's: not the prepared corpus' remark costs.
  name, info = next((n, i) for n, i in ds.modules.items() if i.get("scores"))
  m = corpus.by_name()[name]
  ref = env.compile_module(m, "regalloc_eviction_perf", env.CompilerDefault())
  assert ref.ok
  want = {f"{name}::{fn}": v for fn, v in ref.reward["functions"].items()}
  assert info["scores"] == pytest.approx(want)
  assert want != {f"{name}::{fn}": v for fn, v in m.baseline.items()}
  assert rep["ppo_iterations"] == 1 and rep["eval"]["key"] == "function"
  pol = policy_io.load_policy(out / "policy")
  assert pol.problem == "regalloc_eviction"
  assert pol.spec["trained_for"] == "regalloc_eviction_perf"
  # The same policy is scored by the remarks reward on request.
  s = evaluation.evaluate("regalloc_eviction", corpus, out / "policy", d / "perf_static",
                          split="heldout", use_cache=False)
  assert s["problem"] == "regalloc_eviction" and s["modules"] == 2
