"""End to end on a tiny corpus: prepare, trace, BC, two PPO iterations, evaluate."""
import json

import numpy as np
import pytest

from mlgo.regalloc import evaluate, llc_run, pipeline, ppo, prepare
from mlgo.training import policy_io
from mlgo.training.testing import make_tiny_corpus

DATA = __import__("pathlib").Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  d = tmp_path_factory.mktemp("tiny")
  corpus = make_tiny_corpus(d / "corpus", sorted(DATA.glob("*.c")), opt="O2",
                            heldout=("parse",), variants=2)
  return corpus, d


@pytest.mark.parametrize("problem", llc_run.PROBLEMS)
def test_pipeline(tiny, problem):
  corpus, d = tiny
  out = d / problem
  cfg = pipeline.PipelineConfig(time_budget=10_000, trace_modules=10, heldout_trace_modules=4,
                                bc_epochs=30, bc_time_budget=60, eval_reserve=0, jobs=2)
  pcfg = ppo.RegallocPPOConfig(modules_per_iteration=3, num_iterations=2, jobs=2)
  rep = pipeline.run(problem, corpus, out, cfg=cfg, ppo_config=pcfg,
                     prepared_root=d / "prepared")
  # Trace, warm start, PPO and evaluation outputs exist and hold sane values.
  assert list((out / "trace").glob("*.npz"))
  bc = json.loads((out / "bc.json").read_text())
  if problem == llc_run.EVICTION:
    assert bc["train"]["decisions"] > 100
    assert bc["train"]["agreement"] > 0.4
    assert 0.0 <= bc["heldout"]["agreement"] <= 1.0
  else:
    assert bc["train"]["order_agreement"] > 0.5
    assert np.isfinite(bc["train"]["mean_abs_log2_error"])
  assert rep["ppo_iterations"] == 2
  log = [json.loads(l) for l in (out / "ppo" / "log.jsonl").read_text().splitlines()]
  assert [r["iteration"] for r in log] == [1, 2]
  assert all(r["ok"] == 3 and r["decisions"] > 0 and np.isfinite(r["reward_mean"])
             for r in log)
  assert list((out / "ppo" / "tensorboard").iterdir())
  ev = rep["eval"]
  assert ev["modules"] == 2 and ev["functions"] == 2 and ev["failed"] == 0
  assert ev["default_cost"] > 0 and np.isfinite(ev["policy_cost"]) and ev["policy_cost"] > 0
  assert abs(ev["change"]) < 1.0
  assert ev["line"].startswith("modules=2 functions=2 default_cost=")
  assert (out / "eval" / "functions.csv").read_text().count("\n") == 3
  assert (out / "eval" / "functions.png").stat().st_size > 1000
  # The final policy loads and decides; the SavedModel is there for LLVM tooling.
  pol = policy_io.load_policy(out / "policy")
  assert pol.problem == problem
  assert (out / "policy" / "saved_policy" / "saved_model.pb").exists()
  # Resume: the same command continues from the checkpoint (one more iteration).
  pcfg3 = ppo.RegallocPPOConfig(modules_per_iteration=3, num_iterations=3, jobs=2)
  rep2 = pipeline.run(problem, corpus, out, cfg=cfg, ppo_config=pcfg3,
                      prepared_root=d / "prepared")
  assert rep2["ppo_iterations"] == 3


def test_default_policy_evaluates_to_zero_change(tiny):
  corpus, d = tiny
  prep = prepare.prepare(corpus, out_root=d / "prepared")
  s = evaluate.evaluate(prep, llc_run.EVICTION, "default", None, split="all")
  assert s["change"] == 0.0 and s["regressions"] == 0 and s["modules"] == 6
