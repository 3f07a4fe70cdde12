"""Best-of-N self-imitation: the per-function choice, the collection on a real tiny -O2
corpus (stock llc, the tracer plugin, the shipped eviction policy), the warm-started
clone, and the tool's rounds and resume."""
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from mlgo.env import core, work
from mlgo.policy import policy_io
from mlgo.problems import get_problem
from mlgo.training import bc, dataset, self_imitation, testing
from mlgo.util import cli

DATA = pathlib.Path(__file__).resolve().parents[1] / "env" / "regalloc_programs"
PROBLEM = "regalloc_eviction"


def test_choose_per_key_prefers_default_and_applies_margin():
  cands = {"default": {"f": 10.0, "g": 5.0, "h": 3.0},
           "greedy": {"f": 8.0, "g": 5.0},         # h absent: no spill code, cost 0
           "sample1": {"f": 6.0, "g": 4.9, "h": 3.0, "k": 2.0}}
  got = self_imitation.choose_per_key(cands, missing_score=0.0)
  assert got["f"] == ("sample1", 6.0, 10.0)
  assert got["g"] == ("sample1", 4.9, 5.0)
  assert got["h"] == ("greedy", 0.0, 3.0)        # the missing score counts as a cost
  assert got["k"] == ("default", 0.0, 0.0)       # a tie keeps the default
  # A 10% margin on (cost + 1): g's 4.9 against 5.0 is not enough, f's 6 against 10 is.
  got = self_imitation.choose_per_key(cands, missing_score=0.0, margin=0.1)
  assert got["g"][0] == "default" and got["f"][0] == "sample1"
  # The greedy compile wins a tie against a sample: the earlier candidate.
  got = self_imitation.choose_per_key({"default": {"f": 3.0}, "greedy": {"f": 1.0},
                                       "sample1": {"f": 1.0}}, 0.0)
  assert got["f"][0] == "greedy"


class _Traj:
  def __init__(self, context, n, action):
    self.context = context
    self.features = {}
    self.actions = np.full(n, action)
    self.default_actions = None


class _Result:
  def __init__(self, costs, trajs):
    self.reward = {"functions": costs}
    self.trajectories = trajs


def _scores_from_functions(monkeypatch):
  """The eviction problem, scoring the fakes above by their per-function costs."""
  problem = get_problem(PROBLEM)
  monkeypatch.setattr(type(problem), "scores",
                      lambda self, m, reward: {f"{m}::{k}": v
                                               for k, v in reward["functions"].items()})
  return problem


def test_choose_module_takes_each_function_from_its_winner(monkeypatch):
  problem = _scores_from_functions(monkeypatch)
  names = self_imitation.candidate_names(1)
  results = {
      "default": _Result({"f": 10.0, "g": 2.0}, [_Traj("f", 3, 0), _Traj("g", 2, 0),
                                                 _Traj("quiet", 1, 0)]),
      "greedy": _Result({"f": 12.0, "g": 1.0}, [_Traj("f", 3, 1), _Traj("g", 4, 1),
                                                _Traj("quiet", 1, 1)]),
      "sample1": _Result({"f": 7.0, "g": 3.0}, [_Traj("f", 5, 2), _Traj("g", 2, 2),
                                                _Traj("quiet", 1, 2)]),
  }
  stats = {"totals": {n: 0.0 for n in names + ["best"]}, "wins": {n: 0 for n in names}}
  chosen, info = self_imitation._choose_module(  # pylint: disable=protected-access
      problem, "m", names, results, 0.0, stats)
  by_fn = {t.context: int(t.actions[0]) for t in chosen}
  # f from the sample, g from the greedy compile, the function without spill code in
  # any compile from the default.
  assert by_fn == {"f": 2, "g": 1, "quiet": 0}
  assert [len(t.actions) for t in chosen if t.context == "f"] == [5]
  assert info["best_total"] == 8.0 and info["totals"] == {"default": 12.0, "greedy": 13.0,
                                                            "sample1": 10.0}
  assert info["fallback"] == "default"
  assert info["won_elsewhere"] == {"m::f": "sample1", "m::g": "greedy"}
  assert stats["wins"] == {"default": 0, "greedy": 1, "sample1": 1}


def test_without_the_default_as_candidate_the_policy_keeps_its_strategy(monkeypatch):
  problem = _scores_from_functions(monkeypatch)
  names = self_imitation.candidate_names(1)
  results = {
      "default": _Result({"f": 1.0, "g": 2.0, "h": 4.0}, [_Traj("f", 2, 0), _Traj("g", 2, 0),
                                                          _Traj("h", 2, 0)]),
      "greedy": _Result({"f": 12.0, "g": 3.0}, [_Traj("f", 2, 1), _Traj("g", 2, 1),
                                                _Traj("h", 2, 1)]),
      "sample1": _Result({"f": 7.0, "g": 3.0}, [_Traj("f", 2, 2), _Traj("g", 2, 2),
                                                _Traj("h", 2, 2)]),
  }
  stats = {"totals": {n: 0.0 for n in names + ["best"]}, "wins": {n: 0 for n in names}}
  chosen, info = self_imitation._choose_module(  # pylint: disable=protected-access
      problem, "m", names, results, 0.0, stats, default_candidate=False)
  # f: the sample beats the greedy compile (the default, cheaper still, is not a
  # candidate); g: a tie stays greedy; h: no spill code in either policy compile.
  assert {t.context: int(t.actions[0]) for t in chosen} == {"f": 2, "g": 1, "h": 1}
  assert info["fallback"] == "greedy" and info["won_elsewhere"] == {"m::f": "sample1"}
  assert info["best_total"] == 10.0 and info["totals"]["default"] == 7.0
  assert stats["wins"]["default"] == 0


def test_tempered_weights_divide_the_logits():
  policy = policy_io.load_policy(testing.shipped_policy(PROBLEM))
  feats = testing.fake_eviction_features(64, np.random.default_rng(0))
  x = policy.encode_batch(feats)
  cold = type(policy.arch)(policy.spec["architecture"],
                           self_imitation.tempered_weights(policy.arch.w, 0.5))
  a, b = policy.arch.dist_params(x)["logits"], cold.dist_params(x)["logits"]
  valid = a > -1e8
  assert valid.any() and (~valid).any()
  np.testing.assert_allclose(b[valid], 2.0 * a[valid], rtol=1e-4, atol=1e-4)
  np.testing.assert_array_equal(b[~valid], a[~valid])     # masked columns stay masked
  with pytest.raises(ValueError, match="temperature"):
    self_imitation.tempered_weights(policy.arch.w, 0.0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  d = tmp_path_factory.mktemp("tiny")
  return testing.prepared_tiny_corpus(d, sorted(DATA.glob("*.c")), heldout=("parse",),
                                      variants=2), d


def test_collect_on_real_compiles_is_never_worse_than_any_candidate(tiny, tmp_path):
  corpus, _ = tiny
  policy = testing.shipped_policy(PROBLEM)
  out = tmp_path / "data"
  stats = self_imitation.collect(corpus, PROBLEM, policy, out, samples=2, split="all",
                                 max_decisions_per_module=0)
  assert stats["modules"] == len(corpus.modules) == 6 and stats["failed"] == 0
  ds = dataset.Dataset(out)
  assert ds.index["self_imitation"]["samples"] == 2
  for name, info in ds.modules.items():
    assert info["ok"] and set(info["totals"]) == {"default", "greedy", "sample1", "sample2"}
    assert info["best_total"] <= min(info["totals"].values()) + 1e-9
  tot = stats["totals"]
  assert tot["best"] <= min(tot[n] for n in ("default", "greedy", "sample1", "sample2"))
  # The default's functions keep the tracer's labels: compile one module with the
  # tracer and compare the decisions of every function the default won.
  module = corpus.modules[0]
  traced = core.compile_module(module, get_problem(PROBLEM), None, trace=True)
  want = {t.context: np.asarray(t.actions) for t in traced.trajectories}
  won_elsewhere = {k.split("::", 1)[1] for k in ds.modules[module.name]["won_elsewhere"]}
  got = {}
  for shard in ds.shards():
    for ti, (m, ctx) in enumerate(zip(shard["traj_module"], shard["traj_context"])):
      if m == module.name:
        got[str(ctx)] = shard["action"][shard["traj"] == ti]
  assert set(got) == set(want)
  for ctx, acts in got.items():
    if ctx not in won_elsewhere:
      np.testing.assert_array_equal(acts, want[ctx])
  # Resumable: a second call finds every module done and compiles nothing.
  again = self_imitation.collect(corpus, PROBLEM, policy, out, samples=2, split="all",
                                 max_decisions_per_module=0)
  assert again["modules"] == 0 and again["failed"] == 0
  # Another recipe in the same directory is refused, not mixed in.
  with pytest.raises(ValueError, match="collected with"):
    self_imitation.collect(corpus, PROBLEM, policy, out, samples=3, split="all")


def test_warm_started_clone_starts_from_the_policy(tiny, tmp_path):
  corpus, _ = tiny
  policy = testing.shipped_policy(PROBLEM)
  data = tmp_path / "data"
  self_imitation.collect(corpus, PROBLEM, policy, data, samples=1, split="all")
  bc.train_bc(data, tmp_path / "same", epochs=0, init_policy=policy)
  a, b = policy_io.load_policy(policy), policy_io.load_policy(tmp_path / "same")
  assert a.spec["normalization"] == b.spec["normalization"]
  for k, v in a.arch.w.items():
    np.testing.assert_allclose(b.arch.w[k], v, rtol=0, atol=1e-7)
  m = bc.train_bc(data, tmp_path / "tuned", epochs=2, init_policy=policy)
  assert m["init_policy"] == str(policy) and m["train_decisions"] > 0
  c = policy_io.load_policy(tmp_path / "tuned")
  assert any(not np.allclose(c.arch.w[k], v) for k, v in a.arch.w.items())
  with pytest.raises(ValueError, match="a policy for inlining"):
    bc.train_bc(data, tmp_path / "x", epochs=0, init_policy=testing.shipped_policy(
        "inlining_oz"))


def test_tool_runs_rounds_and_resumes(tiny, tmp_path):
  corpus, _ = tiny
  tool = cli.built_file("tools/self_imitate")
  if tool is None:
    pytest.fail("tools/self_imitate is not built (a data dependency of this test)")
  cmd = [str(tool), f"--policy={testing.shipped_policy(PROBLEM)}", f"--output={tmp_path}/run",
         f"--corpus={corpus.path}", "--split=all", "--samples=1", "--rounds=2",
         "--bc_epochs=1"]
  r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
  assert r.returncode == 0, r.stderr[-3000:]
  r2 = tmp_path / "run" / "round2"
  assert (r2 / "policy" / "policy.json").exists()
  assert json.loads((r2 / "policy" / "bc_metrics.json").read_text())["init_policy"] == \
      str(tmp_path / "run" / "round1" / "policy")
  before = (r2 / "policy" / "weights.npz").read_bytes()
  r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
  assert r.returncode == 0 and "round 2: done before" in r.stderr
  assert (r2 / "policy" / "weights.npz").read_bytes() == before
  bad = subprocess.run(cmd[:-3] + ["--rounds=0"], capture_output=True, text=True)
  assert bad.returncode == 2 and "--rounds" in bad.stderr


class _Replay:
  """Answers the stored decisions of one compile, in order."""

  def __init__(self, actions):
    self.actions, self.i = [int(a) for a in actions], 0

  def act(self, observation):
    self.i += 1
    return np.int64(self.actions[self.i - 1])


def test_search_collection_stores_the_searched_compile(tmp_path):
  programs = pathlib.Path(__file__).resolve().parent / "programs"
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", sorted(programs.glob("*.c*")))
  policy = testing.shipped_policy("inlining_oz")
  out = tmp_path / "data"
  stats = self_imitation.collect_search(corpus, "inlining", policy, out, budget=6,
                                        split="all")
  ds = dataset.Dataset(out)
  assert stats["modules"] == len(ds.modules) == 4 and stats["failed"] == 0
  assert stats["size"] <= stats["start_size"] and stats["compiles"] <= 4 * 6
  assert sum(info["decisions"] > 0 for info in ds.modules.values()) >= 3
  stored = {}
  for shard in ds.shards():
    for ti, m in enumerate(shard["traj_module"]):
      stored[str(m)] = shard["action"][shard["traj"] == ti]
  problem = get_problem("inlining")
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  mods = {m.name: m for m in corpus_lib.load_corpus(corpus).modules}
  for name, info in ds.modules.items():
    assert info["ok"] and info["size"] <= info["start_size"]
    assert info["improved"] == (info["size"] < info["start_size"])
    if info["decisions"] == 0:
      continue
    # Anchors on: every module stores its searched compile, and replaying the stored
    # decisions gives the searched size, byte for byte.
    assert len(stored[name]) == info["decisions"]
    r = core.compile_module(mods[name], problem, _Replay(stored[name]))
    assert r.ok and sum(problem.score_fn(r.reward).values()) == info["size"]
  # BC imitates the stored decisions, not the default's answers the channel also sent
  # (which the trajectories keep as default_action): a 0-epoch clone of the policy scores
  # its agreement with the stored decisions.
  assert ds.index["labels"] == "action"
  shards = list(ds.shards())
  acts = np.concatenate([sh["action"] for sh in shards])
  dflt = np.concatenate([sh["default_action"] for sh in shards])
  assert (acts != dflt).any()
  pol = policy_io.load_policy(policy)
  agree = np.mean(np.concatenate([
      np.asarray(pol.decide_batch({n: sh["f/" + n] for n in pol.input_names})).reshape(-1)
      for sh in shards]) == acts)
  m = bc.train_bc(out, tmp_path / "clone", epochs=0, init_policy=policy,
                  heldout_fraction=0.0)
  assert m["train_accuracy"] == pytest.approx(agree)
  again = self_imitation.collect_search(corpus, "inlining", policy, out, budget=6,
                                        split="all")
  assert again["modules"] == 0
  with pytest.raises(ValueError, match="collected with"):
    self_imitation.collect_search(corpus, "inlining", policy, out, budget=8, split="all")
  with pytest.raises(ValueError, match="collected with"):   # a time cap is part of the recipe
    self_imitation.collect_search(corpus, "inlining", policy, out, budget=6, split="all",
                                  max_seconds=30.0)
  with pytest.raises(ValueError, match="collected with"):   # so is a byte cap
    self_imitation.collect_search(corpus, "inlining", policy, out, budget=6, split="all",
                                  max_bytes=1e7)
  with pytest.raises(ValueError, match="per-function problems"):
    self_imitation.collect_search(corpus, "regalloc_eviction",
                                  testing.shipped_policy(PROBLEM), tmp_path / "x")


def test_floor_collection_searches_the_modules_the_policy_grows(tmp_path):
  """floor_default: besides the sample (here none), every module the policy makes bigger
  than clang (by evaluate's own compiles) is searched, from clang's compile; what is
  stored replays to that size, never above clang's; the option is part of the recipe."""
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation.evaluate import compile_pair  # pylint: disable=import-outside-toplevel
  programs = pathlib.Path(__file__).resolve().parent / "programs"
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", sorted(programs.glob("*.c*")))
  policy = testing.inline_more_policy(tmp_path / "more")
  mods = {m.name: m for m in corpus_lib.load_corpus(corpus).modules}
  ref = work.policy_ref(str(policy))
  grown = []
  for name, m in mods.items():
    d, p = compile_pair(m, "inlining", ref, 22, 120.0)
    if sum(p["scores"].values()) > sum(d["scores"].values()):
      grown.append(name)
  assert 0 < len(grown) < len(mods)
  out = tmp_path / "data"
  stats = self_imitation.collect_search(corpus, "inlining", policy, out, budget=3,
                                        split="all", sampling_rate=1e-9,
                                        floor_default=0.0)
  ds = dataset.Dataset(out)
  assert stats["grown_added"] == stats["from_default"] == len(grown)
  assert sorted(ds.modules) == sorted(grown)
  stored = {}
  for shard in ds.shards():
    for ti, m in enumerate(shard["traj_module"]):
      stored[str(m)] = shard["action"][shard["traj"] == ti]
  problem = get_problem("inlining")
  for name, info in ds.modules.items():
    assert info["start"] == "default" and info["improved"]
    assert info["size"] <= info["default_size"] < info["start_size"]
    r = core.compile_module(mods[name], problem, _Replay(stored[name]))
    assert r.ok and sum(problem.score_fn(r.reward).values()) == info["size"]
  for other in (None, 0.01):   # the floor is part of the recipe
    with pytest.raises(ValueError, match="collected with"):
      self_imitation.collect_search(corpus, "inlining", policy, out, budget=3, split="all",
                                    sampling_rate=1e-9, floor_default=other)
  with pytest.raises(ValueError, match="growth fraction"):
    self_imitation.collect_search(corpus, "inlining", policy, tmp_path / "neg", budget=3,
                                  split="all", floor_default=-0.1)


def test_clone_leaves_out_the_decisions_the_policy_deferred(tmp_path):
  """BC from a deferring policy with skip_deferred: the decisions it handed to clang whose
  label is clang's answer are not imitated (the network never made them); the rest are."""
  programs = pathlib.Path(__file__).resolve().parent / "programs"
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", sorted(programs.glob("*.c*")))
  policy = testing.shipped_policy("inlining_oz_ir2vec_defer")
  out = tmp_path / "data"
  self_imitation.collect_search(corpus, "inlining", policy, out, budget=2, split="all")
  pol = policy_io.load_policy(policy)
  shards = list(dataset.Dataset(out).shards())
  feats = {n: np.concatenate([sh["f/" + n] for sh in shards]) for n in pol.input_names}
  acts = np.concatenate([sh["action"] for sh in shards]).reshape(-1)
  dflt = np.concatenate([sh["default_action"] for sh in shards]).reshape(-1)
  deferred = pol.deferred_batch(feats)
  left_out = int((deferred & (acts == dflt)).sum())
  assert 0 < left_out < len(acts)
  m = bc.train_bc(out, tmp_path / "clone", epochs=0, init_policy=policy,
                  heldout_fraction=0.0, skip_deferred=True)
  assert m["left_out_deferred"] == left_out
  assert m["train_decisions"] == len(acts) - left_out
  full = bc.train_bc(out, tmp_path / "clone_all", epochs=0, init_policy=policy,
                     heldout_fraction=0.0)
  assert full["left_out_deferred"] == 0 and full["train_decisions"] == len(acts)
  with pytest.raises(ValueError, match="defers to the compiler"):
    bc.train_bc(out, tmp_path / "x", epochs=0, skip_deferred=True)


if __name__ == "__main__":
  sys.exit(pytest.main([__file__, "-v"]))
