"""IR2Native credit in PPO (PPOConfig.credit / credit_model / credit_weight) on real
compiles of a tiny corpus: each decision's reward moves by exactly -credit_weight x its
credited size change / the module's default size, and a one-iteration training run
through the command line and configs/inlining_ir2native.gin gets credit for every
compile."""
import copy
import json
import os
import subprocess
import sys

import numpy as np

from mlgo.training import ppo

import i2ntestlib as lib


def test_credit_moves_each_decisions_reward(tmp_path):
  corpus = lib.shared_corpus()
  cfg = ppo.PPOConfig(modules_per_iteration=2, trace_modules=2, jobs=2, seed=1,
                      samples_per_module=1, baseline="moving_average", credit="ir2native",
                      credit_model=lib.shared_model_dir(), credit_weight=0.0)
  t = ppo.Trainer(corpus.path, tmp_path / "run", problem_name="inlining_ir2vec", config=cfg)
  assert t.annotator is not None
  w = t.current_weights()
  batch, stats = t.collect(sorted(t.train_modules, key=lambda m: m.name), w)
  assert stats["failed"] == 0 and len(batch) == 2
  for res in batch:
    assert "error" not in res.annotations, res.annotations
    assert [len(d) for d in res.annotations["decision_delta"]] == [
        len(tr.actions) for tr in res.trajectories]
  state, rng = copy.deepcopy(t.state), copy.deepcopy(t.rng)
  exp0, _, sizes0 = t.make_experience(batch, w)
  assert sizes0["credit_missing"] == 0
  t.state, t.rng = copy.deepcopy(state), copy.deepcopy(rng)
  t.cfg.credit_weight = 2.0
  exp1, _, sizes1 = t.make_experience(batch, w)
  assert sizes1["credit_missing"] == 0
  p = t.problem
  expect = []
  for res in batch:
    for ti, tr in enumerate(res.trajectories):
      k = p.trajectory_key(res.module_name, tr)
      d0 = state["default_scores"][k]
      delta = np.asarray(res.annotations["decision_delta"][ti], np.float64)
      expect.append(2.0 * delta / (d0 + p.reward_delta))
  expect = np.concatenate(expect)
  diff = exp0["rewards"] - exp1["rewards"]
  assert diff.shape == expect.shape and len(diff) > 50
  np.testing.assert_allclose(diff, expect, rtol=1e-4, atol=1e-6)
  assert (diff != 0).any()
  np.testing.assert_array_equal(exp0["actions"], exp1["actions"])

  # A compile whose annotations could not be made: the module's reward alone, counted.
  broken = copy.copy(batch[0])
  broken.annotations = {"error": "StreamMismatch: ..."}
  t.state, t.rng = copy.deepcopy(state), copy.deepcopy(rng)
  exp2, _, sizes2 = t.make_experience([broken, batch[1]], w)
  assert sizes2["credit_missing"] == 1
  n0 = len(batch[0].trajectories[0].actions)
  np.testing.assert_allclose(exp2["rewards"][:n0], exp0["rewards"][:n0])
  np.testing.assert_allclose(exp2["rewards"][n0:], exp1["rewards"][n0:], rtol=1e-6)


def test_one_training_iteration_from_the_command_line(tmp_path):
  corpus = lib.shared_corpus()
  out = tmp_path / "run"
  cmd = [sys.executable, "-m", "mlgo.training.cli", "--problem=inlining_ir2vec",
         f"--corpus={corpus.path}", f"--output={out}", "--iterations=1",
         "--gin_files=configs/inlining_ir2native.gin",
         f"--gin_bindings=PPOConfig.credit_model=\"{lib.shared_model_dir()}\"",
         "--gin_bindings=PPOConfig.modules_per_iteration=2",
         "--gin_bindings=PPOConfig.samples_per_module=2",
         "--gin_bindings=PPOConfig.trace_modules=2",
         "--gin_bindings=PPOConfig.num_epochs=1",
         "--gin_bindings=PPOConfig.validate_every=0",
         "--gin_bindings=PPOConfig.jobs=2"]
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stderr[-3000:]
  (rec,) = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
  assert rec["iteration"] == 1 and rec["failed"] == 0 and rec["ok"] == 4
  assert rec["credit_missing"] == 0
  assert rec["decisions"] > 50
  assert "validation_change_pct" not in rec
  operative = (out / "operative_config.gin").read_text()
  assert "PPOConfig.credit = 'ir2native'" in operative
  assert lib.shared_model_dir() in operative
  assert (out / "policies" / "iter-00001" / "policy.json").exists()
