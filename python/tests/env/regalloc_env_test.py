"""Eviction never sends an unmasked column whatever the policy says; priority runs
complete; rewards come from the allocator's remarks."""
import os

import numpy as np
import pytest

from mlgo import env, problems
from mlgo.problems import regalloc

import envtestlib as lib


class Adversary:
  """Answers columns that are invalid: out of range, negative, or masked out."""

  def __init__(self):
    self.n = 0
    self.masks = []

  def act(self, obs):
    self.n += 1
    mask = obs["mask"].reshape(-1)
    self.masks.append(mask.copy())
    invalid = np.flatnonzero(mask == 0)
    choices = [99, -1, 10**12] + ([int(invalid[0])] if invalid.size else [])
    return np.int64(choices[self.n % len(choices)])


@pytest.mark.parametrize("version", [22, 19])
def test_eviction_corrects_every_invalid_answer(version):
  pol = Adversary()
  res = env.compile_module(lib.llc_module("pressure.c", version), "regalloc_eviction", pol,
                           llvm_version=version)
  assert res.ok, res.reason
  assert res.decisions > 0 and res.corrections == res.decisions == pol.n
  for t in res.trajectories:
    masks = t.features["mask"].reshape(len(t), -1)
    for a, m in zip(t.actions, masks):
      assert 0 <= a < 33 and m[a] == 1
  assert set(res.reward["functions"]) >= {"churn", "blend", "across_calls"}


def test_eviction_default_equivalent_and_random_need_no_corrections():
  m = lib.llc_module("pressure.c", 22)
  for pol in (env.DefaultPolicy(), env.RandomPolicy(5)):
    res = env.compile_module(m, "regalloc_eviction", pol)
    assert res.ok, res.reason
    assert res.decisions > 0 and res.corrections == 0
    assert res.trajectories[0].default_actions is None
    feats = res.trajectories[0].features
    assert feats["mask"].shape[1:] == (1, 33) and feats["progress"].shape[1:] == (1,)
    assert feats["mask"].dtype == np.int64 and feats["liverange_size"].dtype == np.float32


def test_eviction_reward_matches_remarks_and_policy_matters():
  m = lib.llc_module("pressure.c", 22)
  d = env.compile_module(m, "regalloc_eviction", env.DefaultPolicy())
  r = env.compile_module(m, "regalloc_eviction", env.RandomPolicy(1))
  assert d.ok and r.ok
  assert d.reward["total"] == pytest.approx(sum(d.reward["functions"].values()))
  assert d.reward["total"] > 0
  assert d.reward["functions"] != r.reward["functions"]


@pytest.mark.parametrize("version", [22, 19])
def test_priority_runs_complete(version):
  m = lib.llc_module("pressure.c", version)
  for pol in (env.DefaultPolicy(), env.RandomPolicy(2), env.MLPPolicy("regalloc_priority")):
    res = env.compile_module(m, "regalloc_priority", pol, llvm_version=version)
    assert res.ok, res.reason
    assert res.decisions > 100
    t = res.trajectories[0]
    assert t.actions.dtype == np.float32
    assert np.isfinite(t.actions).all() and (t.actions >= 0).all()
    assert set(t.features) == {"li_size", "stage", "weight"}
  d = env.compile_module(m, "regalloc_priority", env.DefaultPolicy(), llvm_version=version)
  t = d.trajectories[0]
  np.testing.assert_array_equal(t.actions, t.features["li_size"].ravel().astype(np.float32))


def test_priority_invalid_answers_are_corrected():
  class Bad:
    def act(self, obs):
      return np.float32(np.nan)
  res = env.compile_module(lib.llc_module("small_pressure.c", 22), "regalloc_priority", Bad())
  assert res.ok and res.corrections == res.decisions > 0


def test_regalloc_from_corpus_style_module():
  """A pre-optimization module (cc1 flags) is optimized, then run through llc."""
  m = lib.inlining_module("pressure.c", 22)
  res = env.compile_module(m, "regalloc_eviction", env.DefaultPolicy())
  assert res.ok, res.reason
  assert "churn" in res.reward["functions"]


def test_mlp_eviction_policy_is_corrected_not_crashing():
  res = env.compile_module(lib.llc_module("pressure.c", 22), "regalloc_eviction",
                           env.MLPPolicy("regalloc_eviction", seed=3))
  assert res.ok and res.decisions > 0
  for t in res.trajectories:
    masks = t.features["mask"].reshape(len(t), -1)
    assert all(m[a] == 1 for a, m in zip(t.actions, masks))


@pytest.mark.parametrize("version", [22, 19])
def test_remarks_reward_compiles_write_no_object_and_score_the_same(version, tmp_path,
                                                                     monkeypatch):
  """A remarks reward reads no object, so llc writes none (-filetype=null); the same
  compile that keeps its object (output_path) gives the same decisions and reward."""
  argvs = []
  real = env.core.Process

  def spy(argv, *a, **k):
    argvs.append(list(argv))
    return real(argv, *a, **k)
  monkeypatch.setattr(env.core, "Process", spy)
  m = lib.llc_module("pressure.c", version)
  rng_a, rng_b = np.random.default_rng(5), np.random.default_rng(5)

  class Random:
    def __init__(self, rng):
      self.rng = rng

    def act(self, obs):
      return regalloc.eviction_random(obs, self.rng)
  plain = env.compile_module(m, "regalloc_eviction", Random(rng_a), llvm_version=version)
  kept = env.compile_module(m, "regalloc_eviction", Random(rng_b), llvm_version=version,
                            output_path=str(tmp_path / "kept.o"))
  assert plain.ok and kept.ok, (plain.reason, kept.reason)
  assert "-filetype=null" in argvs[0] and argvs[0][argvs[0].index("-o") + 1] == os.devnull
  assert "-filetype=obj" in argvs[1] and (tmp_path / "kept.o").stat().st_size > 0
  assert plain.decisions == kept.decisions > 0
  assert [t.actions.tolist() for t in plain.trajectories] == [
      t.actions.tolist() for t in kept.trajectories]
  assert plain.reward == kept.reward and sum(plain.reward["functions"].values()) > 0
  # A reward that reads the object (the performance model's) still gets one.
  assert problems.get_problem("regalloc_eviction_perf").reward_needs_object
