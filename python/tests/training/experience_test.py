"""The regression penalty in the PPO batch, on real compiles of a tiny corpus: decisions
of keys more than 1% worse than the default lose exactly penalty x excess, the rest keep
their reward."""
import copy
import pathlib

import numpy as np
import pytest

from mlgo.training import experience, ppo, testing

PROGRAMS = sorted((pathlib.Path(__file__).parent / "programs").glob("*.c*"))


def test_regression_penalty(tmp_path):
  corpus = testing.make_tiny_corpus(tmp_path / "c", PROGRAMS, variants=2)
  cfg = ppo.PPOConfig(modules_per_iteration=8, trace_modules=8, jobs=2, seed=3,
                      baseline="moving_average")
  t = ppo.Trainer(corpus, tmp_path / "run", config=cfg)
  w = t.current_weights()
  # A sampling policy far from the default: some modules get bigger.
  w = {k: v + np.random.default_rng(0).normal(0, 0.5, v.shape).astype(v.dtype)
       for k, v in w.items()}
  batch, _ = t.collect(sorted(t.train_modules, key=lambda m: m.name), w)
  state, rng = copy.deepcopy(t.state), copy.deepcopy(t.rng)
  exp0, _, _ = t.make_experience(batch, w)
  t.state, t.rng = copy.deepcopy(state), copy.deepcopy(rng)
  t.cfg.regression_penalty = 2.0
  exp1, _, _ = t.make_experience(batch, w)
  d = exp0["rewards"] - exp1["rewards"]
  assert d.shape == exp0["rewards"].shape and (d >= -1e-6).all()
  # Expected per key: 2 x ((policy + delta) / (default + delta) - 1.01), if positive.
  p = t.problem
  expect = []
  for res in batch:
    sc = p.scores(res.module_name, res.reward)
    for tr in res.trajectories:
      k = p.trajectory_key(res.module_name, tr)
      d0 = state["default_scores"].get(k)
      if d0 is None or k not in sc or len(tr.actions) == 0:
        continue
      ex = (sc[k] + p.reward_delta) / (d0 + p.reward_delta) - 1.01
      expect += [2.0 * ex if ex > 0 else 0.0] * len(tr.actions)
  np.testing.assert_allclose(d, expect, rtol=1e-5, atol=1e-6)
  assert (d > 0).any() and (d == 0).any()   # both kinds were in the batch


def test_baseline_ignores_missing_keeps_rewarding_a_cleared_function():
  # Regalloc: function f had spill cost 10 (its default); this compile cleared it (no
  # SpillReloadCopies remark: the missing score, 0); g went from 4 to 5.
  import types
  from mlgo.policy import policy_io
  from mlgo.problems import get_problem
  problem = get_problem("regalloc_eviction")
  rng = np.random.default_rng(0)
  feats = testing.fake_eviction_features(6, rng)
  spec, w, _ = testing.fitted_spec("regalloc_eviction", feats)
  encoder = policy_io.Policy(spec, {})
  part = lambda sl: {k: v[sl] for k, v in feats.items()}
  traj = lambda name, sl: types.SimpleNamespace(
      context=name, features=part(sl), actions=np.full(sl.stop - sl.start, 32, np.int64))
  res = types.SimpleNamespace(module_name="m", reward={"functions": {"f": 0.0, "g": 5.0}},
                              trajectories=[traj("f", slice(0, 4)), traj("g", slice(4, 6))])
  rewards, baselines = {}, {}
  for ignore in (False, True):
    cfg = ppo.PPOConfig(baseline_ignores_missing=ignore)
    st = {"baselines": {"m::f": 10.0, "m::g": 4.0},
          "default_scores": {"m::f": 10.0, "m::g": 4.0}, "default_modules": ["m"]}
    out = []
    for _ in range(2):   # the second compile is judged against the updated baselines
      exp, _, _ = experience.make_experience(problem, cfg, st, encoder, spec,
                                             np.random.default_rng(1), [res], w)
      out.append(exp["rewards"])
    rewards[ignore], baselines[ignore] = out, st["baselines"]
  # First compile: both judge against the default's costs.
  np.testing.assert_allclose(rewards[False][0], rewards[True][0])
  np.testing.assert_allclose(rewards[True][0][:4], 1 - 1 / 11, rtol=1e-6)
  # Every compile moves the baseline: f's falls toward 0 (0.8 x 10), and so does its reward.
  assert baselines[False]["m::f"] == pytest.approx(0.8 ** 2 * 10)
  np.testing.assert_allclose(rewards[False][1][:4], 1 - 1 / 9, rtol=1e-6)
  # With the option, f's baseline stays at the cost it had; g's moves either way.
  assert baselines[True]["m::f"] == 10.0
  np.testing.assert_allclose(rewards[True][1][:4], 1 - 1 / 11, rtol=1e-6)
  for ignore in (False, True):
    assert baselines[ignore]["m::g"] == pytest.approx(0.8 * (0.8 * 4 + 0.2 * 5) + 0.2 * 5)
