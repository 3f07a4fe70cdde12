"""Callee probes (mlgo.training.callee_groups): every call to one callee flipped in one
compile, on hand-made inputs and on real clang-22 compiles of a small C module with the
shipped inlining policy. Every callee flip's recorded change is the measured change of a
compile made with LLVM's -force-attribute; a flip that gained is stored as probes at the
greedy compile's calls to that callee, sharing the change; fine-tuning reads them with the
flipped answer as label."""
import pathlib

import numpy as np
import pytest

from mlgo import corpus as corpus_lib
from mlgo import env, problems
from mlgo.credit import function_size
from mlgo.policy import policy_io
from mlgo.training import callee_groups, multi_flip, probe_chain, probe_tuning, rollouts
from mlgo.training import testing

# Small helpers with many callers; the shipped -Oz policy keeps some (checked below).
PROGRAM = pathlib.Path(__file__).parent / "callee_programs" / "buffers.c"


def test_candidates_need_min_own_sites_and_take_the_majority():
  callees = ["h", "h", "h", "g", "g", "g", "g", "k", "k", "k", "", "", "", "m", "m", "m",
             "d", "d", "d", "d", "d"]
  actions = np.array([1, 1, 1, 0, 0, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1])
  eligible = np.ones(len(callees), bool)
  eligible[8] = False      # one of k's calls is deferred: 2 of its own left, too few
  eligible[[16, 17]] = False   # d: 3 of 5 its own, under 3/4
  got = callee_groups.candidates(callees, actions, eligible)
  assert [(c.callee, c.major, c.flip.tolist(), c.own.tolist()) for c in got] == \
      [("g", 0, [3, 4, 6], [3, 4, 6]), ("h", 1, [0, 1, 2], [0, 1, 2])]
  # m: 2 of 3 inlined, fewer than 3; with min_sites=2 it is in, k not (2 of its 3 calls
  # its own, under 3/4); with a lower share k and d are in too, their deferred calls
  # flipped but not probes.
  assert [c.callee for c in callee_groups.candidates(callees, actions, eligible, 2)] == \
      ["g", "h", "m"]
  assert [c.callee for c in callee_groups.candidates(callees, actions, eligible, 2, 0.5)] \
      == ["d", "g", "h", "k", "m"]
  d = [c for c in callee_groups.candidates(callees, actions, eligible, 3, 0.5)
       if c.callee == "d"][0]
  assert d.flip.tolist() == [16, 17, 18, 19, 20] and d.own.tolist() == [18, 19, 20]
  # A tie goes to inline (the case single flips miss), only those calls flip.
  tie = callee_groups.candidates(["t"] * 6, np.array([1, 0, 1, 0, 1, 0]), np.ones(6, bool))
  assert [(c.callee, c.major, c.flip.tolist()) for c in tie] == [("t", 1, [0, 2, 4])]
  # More names than decisions (a trajectory without actions): only the decisions count.
  assert callee_groups.candidates(["x"] * 5, np.array([1, 1]), np.ones(2, bool)) == []


def _group(name, major, flip, own=None):
  flip = np.asarray(flip, np.int64)
  return callee_groups.Group(name, major, flip, flip if own is None else np.asarray(own))


def test_choose_draws_inlined_callees_first_by_own_calls():
  cands = [_group("a", 1, range(3)), _group("b", 1, range(30)), _group("c", 0, range(90)),
           _group("e", 1, range(3))]
  assert callee_groups.choose(cands, 0, np.random.default_rng(0)) == []
  assert callee_groups.choose([], 2, np.random.default_rng(0)) == []
  assert [c.callee for c in callee_groups.choose(cands, 5, np.random.default_rng(0))] == \
      ["a", "b", "e", "c"]
  # Three inlined callees: a kept one (c, however many calls) only after them.
  assert all(c.major == 1 for s in range(50)
             for c in callee_groups.choose(cands, 3, np.random.default_rng(s)))
  assert callee_groups.choose(cands[2:3], 2, np.random.default_rng(0))[0].callee == "c"
  firsts = [callee_groups.choose(cands, 1, np.random.default_rng(s))[0].callee
            for s in range(200)]
  assert firsts.count("b") > 150 and {"a", "e"} & set(firsts) and "c" not in firsts


def test_force_flags_and_bad_names():
  assert callee_groups.force_flags("f", 1) == ["-mllvm", "-force-attribute=f:noinline"]
  assert callee_groups.force_flags("_ZN1A1fEv", 0) == \
      ["-mllvm", "-force-attribute=_ZN1A1fEv:alwaysinline"]
  for bad in ("", "a:b", "a,b"):
    with pytest.raises(ValueError, match="cannot force"):
      callee_groups.force_flags(bad, 1)


def test_records_share_each_change_among_its_calls():
  rows = np.arange(20, dtype=np.float64).reshape(10, 2)
  actions = np.array([1, 1, 0, 1, 0, 0, 0, 1, 1, 1])
  # h: four calls flipped, three of them the policy's own (9 was deferred).
  measured = [(_group("h", 1, [0, 1, 3, 9], [0, 1, 3]), -40.0), (_group("g", 0, [4, 5]), 8.0)]
  r = callee_groups.records(measured, rows, actions, 1 - actions, np.linspace(-1, 1, 10),
                            1000.0, lambda p: 100.0 + p)
  assert r["positions"].tolist() == [0, 1, 3, 4, 5]
  assert r["probe_sizes"].tolist() == [990.0, 990.0, 990.0, 1004.0, 1004.0]
  assert r["probe_group"].tolist() == [1, 1, 1, 2, 2]
  assert r["probe_key_scores"].tolist() == [90.0, 91.0, 93.0, 108.0, 109.0]
  np.testing.assert_array_equal(r["probe_features"], rows[[0, 1, 3, 4, 5]])
  assert r["probe_attributed"].all() and not r["mismatch"].any()
  assert r["probe_alternatives"].tolist() == [0, 0, 0, 1, 1]
  empty = callee_groups.records([], rows, actions, 1 - actions, np.zeros(10), 1.0, float)
  assert all(len(v) == 0 for v in empty.values())


def test_a_gaining_callee_flip_overrules_single_flips_that_disagree():
  pos = np.array([0, 1, 2, 3, 5])
  single = np.array([4.0, -2.0, np.nan, 6.0, 3.0])
  gained = [(_group("h", 1, [0, 1, 2, 3]), -40.0)]
  assert callee_groups.superseded(pos, single, gained).tolist() == \
      [True, False, False, True, False]
  lost = [(_group("h", 1, [0, 1, 2, 3]), 40.0)]   # a flip that did not gain: no effect
  assert not callee_groups.superseded(pos, single, lost).any()
  assert callee_groups.superseded(pos[:0], single[:0], gained).tolist() == []


def test_bad_settings(tmp_path):
  pol = testing.shipped_policy("inlining_oz")
  with pytest.raises(ValueError, match="function_size"):
    rollouts.probe_corpus(tmp_path, pol, tmp_path / "p", callee_groups=1)
  with pytest.raises(ValueError, match=">= 0"):
    rollouts.probe_corpus(tmp_path, pol, tmp_path / "p", callee_groups=-1,
                          credit_kind="function_size")
  with pytest.raises(ValueError, match="callee_groups"):
    probe_chain.ChainConfig(corpus="c", output="o", callee_groups=1, credit="ir2native",
                            flips_per_compile=1).check()
  with pytest.raises(ValueError, match="callee_groups"):
    probe_chain.ChainConfig(corpus="c", output="o", callee_groups=-1).check()


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
  root = tmp_path_factory.mktemp("cg")
  corpus = testing.make_tiny_corpus(root / "corpus", [PROGRAM], llvm_version=22, opt="Oz")
  kw = {"split": "all", "anchors": 20, "jobs": 2, "flips_per_compile": 16,
        "flip_compiles": 1, "credit_kind": "function_size"}
  stats = rollouts.probe_corpus(corpus, testing.shipped_policy("inlining_oz"), root / "p",
                                callee_groups=10, **kw)
  plain = rollouts.probe_corpus(corpus, testing.shipped_policy("inlining_oz"), root / "q",
                                **kw)
  return corpus, root, stats, plain


def test_callee_flips_are_measured_compiles(probed):
  corpus_dir, root, stats, plain = probed
  module = corpus_lib.load_corpus(corpus_dir).modules[0]
  problem = problems.get_problem("inlining")
  pol = policy_io.load_policy(testing.shipped_policy("inlining_oz"))
  greedy = policy_io.Policy(pol.spec, pol.arch.w, greedy=True)
  ann = function_size.Annotator.for_problem(problem)
  base = env.compile_module(module, problem, greedy, annotator=ann)
  assert base.ok
  callees = multi_flip.decision_names(base)[1]
  actions = np.asarray(base.trajectories[0].actions).reshape(-1)
  total = float(sum(problem.scores(module.name, base.reward).values()))
  flips = rollouts.ProbeStore(root / "p").index["done"][module.name]["callees"]
  # Every helper called at least 3 times (10 compiles allowed) was flipped.
  want = sorted(e for e in set(callees) if callees.count(e) >= 3)
  assert sorted(c for c, *_ in flips) == want and len(want) >= 3
  assert stats["callee_compiles"] == len(want)
  assert stats["compiles"] == plain["compiles"] + len(want)
  assert stats["callee_change"] == pytest.approx(sum(f[-1] for f in flips))
  gains = [f for f in flips if f[-1] < 0]
  assert stats["callee_better"] == len(gains) >= 1 and len(gains) < len(flips)
  for callee, major, calls, own, d in flips:
    pos = [p for p, e in enumerate(callees) if e == callee]
    # The shipped policy defers nothing: all its calls are its own.
    assert calls == own == len(pos) and all(actions[p] == major for p in pos)
    # A fresh compile with the callee forced the other way: the recorded change, and
    # none of its calls reaches the policy.
    forced = env.compile_module(module, problem, greedy, annotator=ann,
                                extra_flags=callee_groups.force_flags(callee, major))
    assert forced.ok and callee not in multi_flip.decision_names(forced)[1]
    assert float(sum(problem.scores(module.name, forced.reward).values())) - total == d
  # Only the gains are probes: each at its callee's calls, sharing the change.
  sh = next(rollouts.ProbeStore(root / "p").shards())
  g = sh["probe_group"]
  assert sorted(set(g[g > 0].tolist())) == list(range(1, len(gains) + 1))
  assert stats["callee_probes"] == int((g > 0).sum()) == sum(f[2] for f in gains)
  for callee, major, calls, _, d in gains:
    at = np.isin(sh["positions"], [p for p, e in enumerate(callees) if e == callee]) & (g > 0)
    assert int(at.sum()) == calls
    np.testing.assert_allclose(sh["probe_sizes"][at], total + d / calls)
    assert (sh["probe_actions"][at] == major).all()
    assert sh["probe_attributed"][at].all() and not sh["mismatch"][at].any()
  # The single flips are those of the probe without callee flips, less the superseded.
  plain_sh = next(rollouts.ProbeStore(root / "q").shards())
  for key in ("positions", "probe_sizes", "probe_actions"):
    np.testing.assert_array_equal(sh[key][g == 0], plain_sh[key], err_msg=key)
  assert (plain_sh["probe_group"] == 0).all()
  assert int((sh["mismatch"][g == 0] & ~plain_sh["mismatch"]).sum()) == \
      stats["callee_superseded"]


def test_fine_tuning_labels_callee_probes_with_the_flipped_answer(probed):
  _, root, _, _ = probed
  pol = policy_io.load_policy(testing.shipped_policy("inlining_oz"))
  sh = next(rollouts.ProbeStore(root / "p").shards())
  data = probe_tuning.load_probe_data([root / "p"], pol.input_names, heldout_fraction=0.0)
  only = probe_tuning.load_probe_data([root / "q"], pol.input_names, heldout_fraction=0.0)
  grouped = sh["probe_group"] > 0
  n = int(grouped.sum())
  assert n > 0
  superseded = int((sh["mismatch"] & ~grouped).sum()) - int(
      next(rollouts.ProbeStore(root / "q").shards())["mismatch"].sum())
  assert len(data["probe_y"]) == len(only["probe_y"]) + n - superseded
  np.testing.assert_array_equal(data["probe_y"][-n:], 1 - sh["probe_actions"][grouped])
