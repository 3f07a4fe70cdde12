"""The PPO batch on real compiles of a tiny corpus: the regression penalty (decisions of
keys more than 1% worse than the default lose exactly penalty x excess, the rest keep
their reward), the sampling pool, and how compiles reach the workers (one set of workers
a run, biggest module first, results in the sampled order) and which iteration policies
get a SavedModel."""
import copy
import os
import pathlib

import numpy as np
import pytest

from mlgo.env import work
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


def test_sampling_pool_follows_skip_decisionless(tmp_path):
  """True drops a module once any compile found no decisions in it; "trace" keeps the
  pool the default trace gave (a PPO compile's count does not change it); False samples
  every training module; anything else is refused."""
  corpus = testing.make_tiny_corpus(tmp_path / "c", PROGRAMS[:4])
  cfg = ppo.PPOConfig(modules_per_iteration=2, trace_modules=8, jobs=2, seed=0)
  t = ppo.Trainer(corpus, tmp_path / "run", config=cfg)
  names = sorted(m.name for m in t.train_modules)
  assert sorted(t.state["trace_decisions"]) == names   # every module traced here
  assert sorted(m.name for m in t.sampling_pool()) == names
  t.state["decisions"][names[0]] = 0       # what a PPO compile records for such a module
  assert sorted(m.name for m in t.sampling_pool()) == names[1:]
  t.cfg.skip_decisionless = "trace"
  assert sorted(m.name for m in t.sampling_pool()) == names
  t.state["trace_decisions"][names[1]] = 0
  assert sorted(m.name for m in t.sampling_pool()) == [names[0]] + names[2:]
  t.cfg.skip_decisionless = False
  assert sorted(m.name for m in t.sampling_pool()) == names
  t.cfg.skip_decisionless = "yes"
  with pytest.raises(ValueError, match="skip_decisionless"):
    t.sampling_pool()


def test_max_module_bytes_leaves_big_modules_out(tmp_path):
  """Modules whose bitcode is bigger than the cap are neither sampled nor validated; a
  cap no module fits is an error naming it."""
  corpus = testing.make_tiny_corpus(tmp_path / "c", PROGRAMS[:4])
  cfg = ppo.PPOConfig(modules_per_iteration=2, trace_modules=8, jobs=2, seed=0,
                      validation_modules=8)
  t = ppo.Trainer(corpus, tmp_path / "run", config=cfg)
  size = {m.name: os.path.getsize(m.bc_path) for m in t.train_modules}
  biggest = max(size, key=size.get)
  assert sorted(size.values())[-2] < size[biggest]   # one module alone is the biggest
  t.cfg.max_module_bytes = sorted(size.values())[-2]
  assert sorted(m.name for m in t.sampling_pool()) == sorted(set(size) - {biggest})
  t.cfg.skip_decisionless = False
  assert biggest not in {m.name for m in t.sampling_pool()}
  assert sorted(m.name for m in t.validation_set()) == sorted(set(size) - {biggest})
  t.cfg.max_module_bytes = min(size.values()) - 1
  with pytest.raises(ValueError, match="max_module_bytes"):
    t.sampling_pool()


def test_one_set_of_workers_serves_the_whole_run(tmp_path):
  """Collects and validations of a run share the compile workers started by the first
  step (the same processes); a step that fails part-way stops them, and run() stops
  them when it returns."""
  corpus = testing.make_tiny_corpus(tmp_path / "c", PROGRAMS[:4])
  cfg = ppo.PPOConfig(modules_per_iteration=2, trace_modules=8, jobs=2, seed=0,
                      validate_every=1, validation_modules=2, num_epochs=1)
  t = ppo.Trainer(corpus, tmp_path / "run", config=cfg)
  assert t._workers is None   # pylint: disable=protected-access
  t.iteration()   # a collect and a validation
  pids = [w.proc.pid for w in t._workers._workers]   # pylint: disable=protected-access
  assert len(pids) == 2 and all(w.proc.is_alive() for w in t._workers._workers)  # pylint: disable=protected-access
  rec = t.iteration()
  assert rec["ok"] == 2 and "validation_change_pct" in rec
  assert [w.proc.pid for w in t._workers._workers] == pids   # pylint: disable=protected-access
  procs = list(t._workers._workers)   # pylint: disable=protected-access
  with pytest.raises(RuntimeError, match="mid-step"):
    with t._pool_for_a_step():   # pylint: disable=protected-access
      raise RuntimeError("mid-step")
  assert t._workers is None and not any(p.proc.is_alive() for p in procs)  # pylint: disable=protected-access
  t.run(num_iterations=3)
  assert t.state["iteration"] == 3 and t._workers is None   # pylint: disable=protected-access


def test_collect_starts_big_modules_first_and_keeps_the_sampled_order(tmp_path):
  """Compiles are handed out biggest bitcode first; the batch comes back in the order the
  modules were sampled in, not in the order they were started or finished."""
  corpus = testing.make_tiny_corpus(tmp_path / "c", PROGRAMS, variants=2)
  cfg = ppo.PPOConfig(modules_per_iteration=8, trace_modules=8, jobs=2, seed=1)
  t = ppo.Trainer(corpus, tmp_path / "run", config=cfg)
  mods = sorted(t.train_modules, key=lambda m: m.name)
  sizes = [os.path.getsize(m.bc_path) for m in mods]
  order = work.largest_first(mods)
  assert sorted(order) == list(range(len(mods)))
  assert [sizes[i] for i in order] == sorted(sizes, reverse=True)
  assert order != list(range(len(mods)))   # so the test says something about the order
  batch, stats = t.collect(mods, t.current_weights())
  assert stats["failed"] == 0
  assert [r.module_name for r in batch] == [m.name for m in mods]
  t.close()


def test_only_iterations_that_can_be_kept_get_a_saved_model(tmp_path):
  """With validation, a SavedModel is written for the iterations the validation judges
  (one of them becomes best_policy), not for the others; every iteration keeps its
  policy.json + weights.npz."""
  corpus = testing.make_tiny_corpus(tmp_path / "c", PROGRAMS[:4])
  cfg = ppo.PPOConfig(modules_per_iteration=2, trace_modules=8, jobs=2, seed=0,
                      validate_every=2, validation_modules=2, num_epochs=1)
  t = ppo.Trainer(corpus, tmp_path / "run", config=cfg)
  t.run(num_iterations=3)
  pols = tmp_path / "run" / "policies"
  for it, judged in ((0, True), (1, False), (2, True), (3, False)):
    d = pols / f"iter-{it:05d}"
    assert (d / "policy.json").is_file() and (d / "weights.npz").is_file(), d
    assert (d / "saved_policy" / "saved_model.pb").is_file() == judged, d
  best = t.state["best_validation"]["iteration"]
  assert best in (0, 2)
  assert (tmp_path / "run" / "best_policy" / "saved_policy" / "saved_model.pb").is_file()
