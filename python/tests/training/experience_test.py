"""The regression penalty in the PPO batch, on real compiles of a tiny corpus: decisions
of keys more than 1% worse than the default lose exactly penalty x excess, the rest keep
their reward."""
import copy
import pathlib

import numpy as np
import pytest

from mlgo.training import ppo, testing

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


REGALLOC_PROGRAMS = sorted(
    (pathlib.Path(__file__).resolve().parents[1] / "env" / "regalloc_programs").glob("*.c"))


@pytest.mark.parametrize("mode", ["missing", "own"])
def test_unscored_default_baseline(tmp_path, mode):
  """A function the default's compile left without a score (no spill code there): under
  "missing" the policy's spill code in it is a loss against the missing score (0);
  under "own" its first score is its baseline, so its first reward is 0."""
  from mlgo.env import prepared  # pylint: disable=import-outside-toplevel
  corpus = prepared.prepare(
      testing.make_tiny_corpus(tmp_path / "c", REGALLOC_PROGRAMS, opt="O2", variants=1),
      out_root=tmp_path / "prepared")
  cfg = ppo.PPOConfig(modules_per_iteration=8, trace_modules=8, jobs=2, seed=3,
                      unscored_default_baseline=mode)
  t = ppo.Trainer(corpus, tmp_path / "run", problem_name="regalloc_eviction", config=cfg)
  w = t.current_weights()
  batch, _ = t.collect(sorted(t.train_modules, key=lambda m: m.name), w)
  p = t.problem
  # The function with the most decisions and a nonzero score in the policy's compile
  # stands for one the default compiled without spill code: its default score is removed.
  cands = []
  for res in batch:
    sc = p.scores(res.module_name, res.reward)
    for tr in res.trajectories:
      k = p.trajectory_key(res.module_name, tr)
      if sc.get(k, 0) > 0 and len(tr.actions) and k in t.state["default_scores"]:
        cands.append((len(tr.actions), k, sc[k]))
  assert cands, "no function with decisions and spill code in the tiny corpus"
  _, key, score = max(cands)
  del t.state["default_scores"][key]
  del t.state["baselines"][key]
  exp, _, _ = t.make_experience(batch, w)
  # Decisions are laid out per trajectory in batch order; find this key's slice.
  start = 0
  for res in batch:
    sc = p.scores(res.module_name, res.reward)
    for tr in res.trajectories:
      k = p.trajectory_key(res.module_name, tr)
      if k not in sc or not len(tr.actions):
        continue
      if k == key:
        got = exp["rewards"][start:start + len(tr.actions)]
      start += len(tr.actions)
  assert start == len(exp["rewards"])
  if mode == "own":
    np.testing.assert_array_equal(got, 0.0)
    assert t.state["baselines"][key] == pytest.approx(score)
    assert key not in t.state["default_scores"]
  else:
    np.testing.assert_allclose(got, p.reward_value(score, 0.0), rtol=1e-6)
    assert p.reward_value(score, 0.0) < 0
    assert t.state["default_scores"][key] == 0.0
