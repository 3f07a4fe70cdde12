"""Several rollout probes a compile (mlgo.training.multi_flip), on hand-made inputs and
on real clang-22 compiles of a tiny corpus with the shipped inlining policy: more
probes a compile than single flips, every flip found at the greedy compile's call site, each probe
credited with what its flip did to its own caller (read back from the objects' symbol
tables), and the stores usable by fine-tuning."""
import pathlib

import numpy as np
import pytest

from mlgo import corpus as corpus_lib
from mlgo import env, problems
from mlgo.credit import function_size
from mlgo.training import multi_flip, probe_tuning, probe_widening, rollouts, testing
from mlgo.policy import policy_io

PROGRAMS = sorted((pathlib.Path(__file__).parent / "programs").glob("*.c*"))


def _oz():
  return testing.shipped_policy("inlining_oz")


def test_groups_share_no_function():
  callers = ["a", "a", "b", "c", "d", "e", "f"]
  callees = ["x", "y", "x", "a", "z", "w", "v"]
  groups = multi_flip.group_positions([6, 0, 1, 2, 3, 4, 5], callers, callees, 3)
  assert sorted(p for g in groups for p in g) == list(range(7))
  for g in groups:
    assert len(g) <= 3
    fns = [f for p in g for f in (callers[p], callees[p])]
    assert len(fns) == len(set(fns)), g
  # 0 and 1 share caller a, 2 shares callee x with 0, 3's callee is 0's caller.
  assert groups[0] == [0, 4, 5]
  assert multi_flip.group_positions([0, 4], callers, callees, 1) == [[0], [4]]


def test_packing_fills_fixed_compiles_least_sure_first():
  callers = ["a", "a", "b", "c", "d", "e", "f", "g"]
  callees = ["x", "y", "x", "a", "z", "w", "v", "u"]
  # At most 2 compiles of 3: 1 conflicts with 0 (caller a) and goes to the second
  # compile; 2 conflicts with 0 (callee x), fits with 1; 3's callee is a: no room.
  groups = multi_flip.pack_groups([0, 1, 2, 3, 4, 5, 6, 7], callers, callees, 2, 3, 100)
  assert groups == [[0, 4, 5], [1, 2, 6]]
  for g in groups:
    fns = [f for p in g for f in (callers[p], callees[p])]
    assert len(fns) == len(set(fns)), g
  assert multi_flip.pack_groups([0, 1, 2], callers, callees, 5, 3, 2) == [[0], [1]]
  # The least sure decisions take the slots first; the random fraction takes the rest.
  margins = np.array([5.0, -0.1, 3.0, 0.2, -4.0, 0.3, 9.0, 8.0])
  eligible = np.ones(8, bool)
  eligible[5] = False
  pos, groups = multi_flip.packed_positions(margins, eligible, callers, callees, 1, 2, 0.0,
                                            np.random.default_rng(0))
  # By |margin|: 1, 3, 2, 4, ... 3's callee a is 1's caller, so 3 is skipped for 2.
  assert pos.tolist() == [1, 2], pos
  assert groups == [[1, 2]]
  pos, groups = multi_flip.packed_positions(margins, eligible, callers, callees, 2, 4, 0.5,
                                            np.random.default_rng(0))
  assert len(pos) == sum(len(g) for g in groups) <= 8 and 5 not in pos.tolist()
  assert 1 in pos.tolist()    # the least sure one always
  with pytest.raises(ValueError, match="annotations"):
    multi_flip.packed_positions(margins, eligible, callers[:3], callees[:3], 1, 2, 0.0,
                                np.random.default_rng(0))


def test_match_key_ignores_volatile_columns_and_counts_repeats():
  rows = np.array([[1, 10, 5], [2, 11, 5], [1, 12, 5], [1, 13, 6]], np.float64)
  keep = multi_flip.keep_columns(["a", "count", "b"], [1, 1, 1], {"count"})
  assert keep.tolist() == [0, 2]
  assert multi_flip.match_key(rows, 0, keep)[1] == 1
  assert multi_flip.match_key(rows, 2, keep) == (rows[0, keep].tobytes(), 2)
  assert multi_flip.match_key(rows, 3, keep)[1] == 1
  assert multi_flip.keep_columns(["e", "n"], [3, 1], {"n"}).tolist() == [0, 1, 2]


def test_bad_settings(tmp_path):
  pol = _oz()
  with pytest.raises(ValueError, match="function_size"):
    rollouts.probe_corpus(tmp_path, pol, tmp_path / "p", flips_per_compile=4)
  with pytest.raises(ValueError, match="flips_per_compile > 1"):
    rollouts.probe_corpus(tmp_path, pol, tmp_path / "p", flip_compiles=2,
                          credit_kind="function_size")
  with pytest.raises(ValueError, match=">= 0"):
    rollouts.probe_corpus(tmp_path, pol, tmp_path / "p", flip_compiles=-1, flips_per_compile=4,
                          credit_kind="function_size")
  with pytest.raises(ValueError, match="at least 1"):
    rollouts.probe_corpus(tmp_path, pol, tmp_path / "p", flips_per_compile=0,
                          credit_kind="function_size")


@pytest.fixture(scope="module")
def probed(tmp_path_factory):
  root = tmp_path_factory.mktemp("mf")
  corpus = testing.make_tiny_corpus(root / "corpus", PROGRAMS, llvm_version=22, opt="Oz")
  stats = {}
  for k in (1, 4):
    stats[k] = rollouts.probe_corpus(corpus, _oz(), root / f"k{k}", split="all",
                                     max_probes=16, anchors=20, jobs=2, flips_per_compile=k,
                                     credit_kind="function_size")
  # Packed: at most 2 flip compiles a module, up to 16 flips each.
  stats["packed"] = rollouts.probe_corpus(corpus, _oz(), root / "packed", split="all",
                                          anchors=20, jobs=2, flips_per_compile=16,
                                          flip_compiles=2, credit_kind="function_size")
  # The same policy probed twice through a greedy-compile cache (a chain's stalled round):
  # seed 1 fills it, seed 0 reuses it; a stale policy's dir is removed on the way.
  packed = {"anchors": 20, "jobs": 2, "flips_per_compile": 16, "flip_compiles": 2,
            "credit_kind": "function_size", "greedy_cache": root / "gc", "split": "all"}
  stats["fill"] = rollouts.probe_corpus(corpus, _oz(), root / "fill", seed=1, **packed)
  (root / "gc" / ("0" * 20)).mkdir()
  stats["reuse"] = rollouts.probe_corpus(corpus, _oz(), root / "reuse", seed=0, **packed)
  return corpus, root, stats


def _probes(d):
  out = {}
  for sh in rollouts.ProbeStore(d).shards():
    base = sh["base_size"][sh["probe_module"]]
    for j in range(len(sh["positions"])):
      name = str(sh["module_names"][sh["probe_module"][j]])
      out[(name, int(sh["positions"][j]))] = {
          "delta": sh["probe_sizes"][j] - base[j], "mismatch": bool(sh["mismatch"][j]),
          "attributed": bool(sh["probe_attributed"][j]), "action": int(sh["probe_actions"][j])}
  return out


def test_more_probes_a_compile_same_sites(probed):
  _, root, stats = probed
  one, four = stats[1], stats[4]
  assert four["modules"] == one["modules"] == 4 and four["failed"] == 0
  # More probes a compile: the budget grows with the flips a compile carries, the
  # compiles do not (flips in different functions share one).
  assert four["probes"] / four["compiles"] > 1.3 * one["probes"] / one["compiles"]
  assert four["compiles"] <= one["compiles"]
  assert four["multi_flips"] > four["multi_compiles"]
  single, multi = _probes(root / "k1"), _probes(root / "k4")
  assert not any(p["attributed"] for p in single.values())
  done = [p for p in multi.values() if not p["mismatch"]]
  assert done and all(p["attributed"] for p in done)
  assert len(done) >= 0.8 * len(multi)      # most flips find their call site again
  # Against the same call sites flipped one at a time (measured module changes), the
  # attributed changes pick the same better action nearly everywhere.
  common = [k for k in multi if k in single and not multi[k]["mismatch"]
            and np.isfinite(single[k]["delta"])]
  assert len(common) >= 10
  agree = np.mean([(multi[k]["delta"] < 0) == (single[k]["delta"] < 0) for k in common])
  print(f"{len(common)} common probes, better action agrees on {agree:.3f}, "
        f"{len(done)} of {len(multi)} flips found")
  assert agree >= 0.8, agree


def test_packed_compiles_fixed_flips_many(probed):
  _, root, stats = probed
  packed, four = stats["packed"], stats[4]
  assert packed["modules"] == 4 and packed["failed"] == 0
  # Per module one greedy compile and at most 2 flip compiles...
  assert packed["compiles"] <= 4 * (1 + 2)
  per = {}
  for sh in rollouts.ProbeStore(root / "packed").shards():
    for m, n in zip(*np.unique(sh["probe_module"], return_counts=True)):
      per[str(sh["module_names"][m])] = int(n)
  # ...each carrying more flips than the unpacked K=4 compiles do.
  assert packed["multi_flips"] / packed["multi_compiles"] > \
      four["multi_flips"] / four["multi_compiles"]
  assert max(per.values()) > 2 * 4
  done = [p for p in _probes(root / "packed").values() if not p["mismatch"]]
  assert len(done) >= 0.7 * packed["probes"] > 0
  assert all(p["attributed"] for p in done)


def _by_module(d):
  """module -> its stored probe and anchor arrays (and greedy size), over a store's shards."""
  out = {}
  for sh in rollouts.ProbeStore(d).shards():
    for i, name in enumerate(sh["module_names"]):
      p, a = sh["probe_module"] == i, sh["anchor_module"] == i
      out[str(name)] = {"base_size": sh["base_size"][i], **{
          k: sh[k][p] for k in ("positions", "probe_sizes", "probe_features", "probe_actions",
                                "mismatch")}, **{
          k: sh[k][a] for k in ("anchor_features", "anchor_actions")}}
  return out


def test_greedy_cache_reused_same_probes(probed):
  """A second probe of one policy reads its greedy compiles back and probes exactly as a
  probe without the cache does, with one compile a module fewer."""
  _, root, stats = probed
  fill, reuse, plain = stats["fill"], stats["reuse"], stats["packed"]
  assert fill["greedy_reused"] == 0 and fill["modules"] == 4
  assert reuse["greedy_reused"] == 4 and reuse["failed"] == 0
  assert reuse["compiles"] == plain["compiles"] - 4
  got, want = _by_module(root / "reuse"), _by_module(root / "packed")
  assert sorted(got) == sorted(want) and len(got) == 4
  for name, arrays in want.items():   # the workers' finishing order may differ
    for key, a in arrays.items():
      np.testing.assert_array_equal(got[name][key], a, err_msg=f"{name} {key}")
  # One policy's compiles kept: the stale digest's dir is gone, this one's has 4 modules.
  kept = [d for d in (root / "gc").iterdir()]
  assert len(kept) == 1 and len(list(kept[0].glob("*.pkl"))) == 4
  # An unreadable entry is compiled again, not trusted.
  victim = sorted(kept[0].glob("*.pkl"))[0]
  victim.write_bytes(b"garbage")
  assert rollouts.GreedyCache.load(victim) is None


def test_policy_digest_follows_weights(tmp_path):
  pol = policy_io.load_policy(_oz())
  same = policy_io.load_policy(_oz())
  assert rollouts.policy_digest(pol.spec, pol.arch.w) == \
      rollouts.policy_digest(same.spec, same.arch.w)
  w = {k: np.array(v, copy=True) for k, v in pol.arch.w.items()}
  k = sorted(w)[0]
  w[k].flat[0] += 1e-3
  assert rollouts.policy_digest(pol.spec, w) != rollouts.policy_digest(pol.spec, pol.arch.w)
  # Compiles annotated for a credit are kept apart from plain ones.
  assert rollouts.policy_digest(pol.spec, pol.arch.w, function_size.Annotator()) != \
      rollouts.policy_digest(pol.spec, pol.arch.w)


def test_a_compile_reproduced(probed):
  """One multi-flip compile rebuilt from scratch: each flip lands on its greedy call site
  (the remarks name the same caller and callee), and a flip whose callee is kept in both
  compiles is credited exactly its caller's size change in the two objects."""
  corpus_dir, root, _ = probed
  corpus = corpus_lib.load_corpus(corpus_dir)
  problem = problems.get_problem("inlining")
  pol = policy_io.load_policy(_oz())
  multi = _probes(root / "k4")
  ann = function_size.Annotator.for_problem(problem)
  checked = 0
  for module in corpus.modules:
    mine = sorted(p for (n, p), v in multi.items() if n == module.name and not v["mismatch"])
    if len(mine) < 2:
      continue
    base = env.compile_module(module, problem, policy_io.Policy(pol.spec, pol.arch.w, greedy=True),
                              annotator=ann)
    names = multi_flip.decision_names(base)
    t = base.trajectories[0]
    rows = np.concatenate([np.asarray(t.features[f], np.float64).reshape(len(t.actions), -1)
                           for f in pol.input_names], axis=1)
    keep = multi_flip.keep_columns(pol.input_names, pol.sizes, set(problem.probe_volatile))
    for g in multi_flip.group_positions(mine, *names, 4):
      if len(g) < 2:
        continue
      mp = multi_flip.MultiFlipPolicy(policy_io.Policy(pol.spec, pol.arch.w, greedy=True), g,
                                      rows, np.asarray(t.actions).reshape(-1),
                                      problem.probe_alternative, keep)
      r = env.compile_module(module, problem, mp, annotator=ann)
      assert r.ok and set(mp.flipped) == set(g)
      fnames = multi_flip.decision_names(r)
      before = base.annotations["function_sizes"]   # each object's symbol table
      after = r.annotations["function_sizes"]
      for p in g:
        at = mp.flipped[p][0]
        assert (fnames[0][at], fnames[1][at]) == (names[0][p], names[1][p])
        assert int(np.asarray(r.trajectories[0].actions[at]).reshape(-1)[0]) == \
            1 - multi[(module.name, p)]["action"]
        caller, callee = names[0][p], names[1][p]
        if caller in before and caller in after and (callee in before) == (callee in after):
          assert multi[(module.name, p)]["delta"] == after[caller] - before[caller]
          checked += 1
  assert checked >= 3


def test_stores_train_and_widening_refuses(probed, tmp_path):
  _, root, _ = probed
  pol = policy_io.load_policy(_oz())
  data = probe_tuning.load_probe_data([root / "k4"], pol.input_names, heldout_fraction=0.0)
  assert len(data["probe_y"]) > 0
  with pytest.raises(ValueError, match="probe_attributed"):
    probe_widening.widen_probes(root / "k4", probed[0], "inlining_ir2vec", tmp_path / "w")
