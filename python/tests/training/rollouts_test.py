"""Rollout probes on tiny real corpora with the shipped inlining and eviction policies:
each probe is reproducible, a broken module is skipped and counted, reruns resume, and
fine-tuning on the probes moves the policy to the better action."""
import json
import pathlib
import shutil
import tempfile

import numpy as np
import pytest

from mlgo import corpus as corpus_lib
from mlgo import env, problems
from mlgo.training import probe_tuning, probe_widening, rollouts, testing
from mlgo.policy import derived, policy_io

PROGRAMS = sorted((pathlib.Path(__file__).parent / "programs").glob("*.c*"))
REGALLOC_PROGRAMS = sorted(
    (pathlib.Path(__file__).resolve().parents[1] / "env" / "regalloc_programs").glob("*.c"))


def _oz():
  return testing.shipped_policy("inlining_oz")


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
  return testing.make_tiny_corpus(tmp_path_factory.mktemp("corpus"), PROGRAMS)


def test_choose_positions_prefers_low_margin():
  rng = np.random.default_rng(0)
  m = np.array([5.0, -0.1, 3.0, 0.2, -7.0, 9.0])
  pos = rollouts.choose_positions(m, 2, 1, rng)
  assert {1, 3} <= set(pos.tolist()) and len(pos) == 3 and list(pos) == sorted(pos)
  assert len(rollouts.choose_positions(np.zeros(0), 4, 4, rng)) == 0
  assert rollouts.probe_budget(0, 16) == 0
  assert rollouts.probe_budget(3, 16) == 3          # every decision of a small module
  assert rollouts.probe_budget(10000, 16) == 16     # capped
  assert rollouts.probe_budget(400, 64) == 10       # sqrt(n)/2


def test_greedy_figure_sums_only_modules_with_a_default():
  g = rollouts.GreedyFigure({"a": 100.0, "b": 200.0})
  g.add("a", 90.0)           # 10% smaller
  g.add("b", 203.0)          # 1.5% bigger: a regression
  g.add("c", 5.0)            # no default size: left out
  g.add("a2", float("nan"))  # a failed compile: left out
  assert (g.modules, g.regressed) == (2, 1)
  assert g.change_pct() == pytest.approx(100 * (293 - 300) / 300)
  assert g.text() == "greedy -2.33% vs default over 2 modules (1 >1% bigger)"
  assert rollouts.GreedyFigure({}).change_pct() == 0.0


def test_probe_and_train(tiny_corpus, tmp_path):
  policy_dir = _oz()
  out = tmp_path / "probes"
  s = rollouts.probe_corpus(tiny_corpus, policy_dir, out, split="all", max_probes=6,
                            anchors=50, jobs=2)
  assert s["modules"] == 4 and s["failed"] == 0 and s["mismatch"] == 0
  assert s["probes"] == s["better"] + s["worse"] + s["same"] > 0
  assert s["better"] + s["worse"] > 0      # some flips change the object's size
  store = rollouts.ProbeStore(out)
  shard = next(store.shards())
  # Reproduce one probe that changed the size, in this process, from scratch.
  d = shard["probe_sizes"] - shard["base_size"][shard["probe_module"]]
  j = int(np.flatnonzero(np.isfinite(d) & (d != 0))[0])
  name = str(shard["module_names"][shard["probe_module"][j]])
  module = next(m for m in corpus_lib.load_corpus(tiny_corpus).modules if m.name == name)
  pol = policy_io.load_policy(policy_dir)
  fp = rollouts.FlipPolicy(pol, int(shard["positions"][j]),
                          problems.get_problem("inlining").probe_alternative)
  r = env.compile_module(module, problems.get_problem("inlining"), fp)
  assert r.ok and r.reward["text_size"] == shard["probe_sizes"][j]
  assert int(r.trajectories[0].actions[fp.flip_at]) == 1 - int(shard["probe_actions"][j])
  # Rerunning the same command does nothing more. Given the default's sizes, it still
  # reports the greedy policy's figure, from the modules already done.
  base = {k: float(v["base_size"]) for k, v in rollouts.ProbeStore(out).index["done"].items()}
  first, second = sorted(base)[:2]
  defaults = {first: base[first] * 1.05, second: base[second] * 0.9, "not-in-corpus": 1.0}
  again = rollouts.probe_corpus(tiny_corpus, policy_dir, out, split="all", max_probes=6,
                                jobs=2, default_sizes=defaults)
  assert again["modules"] == 0 and len(rollouts.ProbeStore(out).index["done"]) == 4
  dft = base[first] * 1.05 + base[second] * 0.9
  assert again["greedy_modules"] == 2 and again["greedy_regressed"] == 1
  assert again["greedy_change_pct"] == pytest.approx(
      100 * (base[first] + base[second] - dft) / dft)

  # Fine-tuning: the new policy takes the better action on (almost) every probe.
  m = probe_tuning.train_on_probes(policy_dir, [out], tmp_path / "tuned", epochs=60,
                                   learning_rate=3e-3, heldout_fraction=0.0)
  assert m["after"]["train_probe"][0] >= 0.9
  assert m["after"]["train_probe"][0] >= m["before"]["train_probe"][0]
  tuned = policy_io.load_policy(tmp_path / "tuned")
  data = probe_tuning.load_probe_data([out], tuned.input_names)
  x = data["probe_x"]
  pred = tuned.decide_batch({n: x[:, i:i + 1] for i, n in enumerate(tuned.input_names)})
  assert (pred == data["probe_y"]).mean() == pytest.approx(m["after"]["train_probe"][0])
  assert json.loads((tmp_path / "tuned" / "policy.json").read_text())["fine_tuned_from"]


def test_a_deferring_policy_is_probed_only_where_it_decides(tiny_corpus, tmp_path):
  # Leaving every call of a static function's last use to clang: no probe flips one.
  part = derived.with_deferral(_oz(), tmp_path / "part", 0.0,
                               nonzero=["last_call_to_static_bonus"])
  s = rollouts.probe_corpus(tiny_corpus, tmp_path / "part", tmp_path / "p1", split="all",
                            max_probes=64, anchors=200, jobs=2)
  assert s["modules"] == 4 and s["failed"] == 0 and s["probes"] > 0
  at = part.input_names.index("last_call_to_static_bonus")
  col = int(np.cumsum([0] + part.sizes)[at])
  probed = np.concatenate([sh["probe_features"] for sh in rollouts.ProbeStore(
      tmp_path / "p1").shards()])
  anchors = np.concatenate([sh["anchor_features"] for sh in rollouts.ProbeStore(
      tmp_path / "p1").shards()])
  assert (probed[:, col] == 0).all()
  assert (anchors[:, col] != 0).any()      # such decisions were there to be probed
  # The same without the deferral does probe some of them.
  rollouts.probe_corpus(tiny_corpus, _oz(), tmp_path / "p0", split="all", max_probes=64,
                        anchors=200, jobs=2)
  plain = np.concatenate([sh["probe_features"] for sh in rollouts.ProbeStore(
      tmp_path / "p0").shards()])
  assert (plain[:, col] != 0).any()
  # Everything deferred (no module has 1e9 calls): the greedy compiles, no probe.
  derived.with_deferral(_oz(), tmp_path / "all", 0.0, below={"edge_count": 1e9})
  s = rollouts.probe_corpus(tiny_corpus, tmp_path / "all", tmp_path / "p2", split="all",
                            max_probes=64, jobs=2)
  assert s["modules"] == 4 and s["failed"] == 0 and s["probes"] == 0
  assert len(rollouts.ProbeStore(tmp_path / "p2").index["done"]) == 4


def test_eviction_probes_try_the_default_rule(tmp_path):
  """An eviction probe answers one decision where the policy left the default-equivalent
  column with that column, and measures the module's weighted spill cost."""
  from mlgo.env import prepared  # pylint: disable=import-outside-toplevel
  from mlgo.problems import regalloc  # pylint: disable=import-outside-toplevel
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", REGALLOC_PROGRAMS, opt="O2",
                                    variants=2)
  prep = prepared.prepare(corpus, out_root=tmp_path / "prepared")
  policy_dir = testing.shipped_policy("regalloc_eviction")
  out = tmp_path / "probes"
  s = rollouts.probe_corpus(prep, policy_dir, out, split="all", max_probes=8, anchors=100,
                            jobs=2)
  assert s["modules"] == len(prep.modules) and s["failed"] == 0 and s["mismatch"] == 0
  assert s["probes"] == s["better"] + s["worse"] + s["same"] > 0
  assert s["better"] + s["worse"] > 0          # some departures from the rule matter
  pol = policy_io.load_policy(policy_dir)
  problem = problems.get_problem("regalloc_eviction")
  shard = next(rollouts.ProbeStore(out).shards())
  x, alt, act = shard["probe_features"], shard["probe_alternatives"], shard["probe_actions"]
  cut = np.cumsum([0] + pol.sizes)
  for i in range(len(alt)):
    obs = {n: x[i, cut[k]:cut[k + 1]] for k, n in enumerate(pol.input_names)}
    assert alt[i] == regalloc.eviction_default(obs) != act[i]
  # One probe that changed the cost, reproduced from scratch: the same module total,
  # and the flipped decision (counted over all functions) took the rule's column.
  d = shard["probe_sizes"] - shard["base_size"][shard["probe_module"]]
  j = int(np.flatnonzero(np.isfinite(d) & (d != 0))[0])
  name = str(shard["module_names"][shard["probe_module"][j]])
  module = next(m for m in prep.modules if m.name == name)
  fp = rollouts.FlipPolicy(pol, int(shard["positions"][j]), problem.probe_alternative)
  r = env.compile_module(module, problem, fp)
  assert r.ok and r.reward["total"] == pytest.approx(shard["probe_sizes"][j])
  taken = np.concatenate([t.actions.reshape(-1) for t in r.trajectories])
  assert taken[fp.flip_at] == alt[j]
  # A flip changes only its own function's allocation: the module's change is that
  # function's change, which the probe records as its key's scores.
  ends = np.cumsum([len(t.actions) for t in r.trajectories])
  fn = r.trajectories[int(np.searchsorted(ends, fp.flip_at, side="right"))].context
  assert shard["probe_key_scores"][j] == pytest.approx(r.reward["functions"][fn])
  ok = np.isfinite(d)
  key_delta = shard["probe_key_scores"] - shard["probe_key_base"]
  assert np.allclose(key_delta[ok], d[ok], rtol=1e-9, atol=1e-6)
  by_key = probe_tuning.load_probe_data([out], pol.input_names, weighting="key")
  by_module = probe_tuning.load_probe_data([out], pol.input_names)
  assert np.array_equal(by_key["probe_y"], by_module["probe_y"])
  assert (by_key["probe_w"] >= by_module["probe_w"]).all()   # a function is <= its module
  used = ok & (d != 0) & ~shard["mismatch"]
  rel = np.abs(key_delta[used]) / np.maximum(shard["probe_key_base"][used], 1.0)
  assert np.allclose(by_key["probe_w"], np.clip(rel / 0.001, 0.25, 4.0))
  # Fine-tuning the column scorer moves it to the better column of the probes.
  m = probe_tuning.train_on_probes(policy_dir, [out], tmp_path / "tuned", epochs=80,
                                   learning_rate=3e-3, heldout_fraction=0.0)
  assert m["after"]["train_probe"][0] >= 0.9 > m["before"]["train_probe"][0]
  tuned = policy_io.load_policy(tmp_path / "tuned")
  assert tuned.spec["architecture"] == pol.spec["architecture"]
  # Held in place by its own distribution and told nothing by the probes, the policy
  # decides every anchor state as before (hard greedy labels would sharpen it instead).
  m0 = probe_tuning.train_on_probes(policy_dir, [out], tmp_path / "still", epochs=20,
                                    learning_rate=3e-3, probe_weight=0.0,
                                    heldout_fraction=0.0, anchor_targets="distribution")
  assert m0["anchors"] > 100 and m0["anchor_targets"] == "distribution"
  still = policy_io.load_policy(tmp_path / "still")
  ax = probe_tuning.load_probe_data([out], pol.input_names)["anchor_x"]
  enc = pol.normalizer.encode_scalar_rows(ax)
  assert np.array_equal(still.arch.greedy(still.arch.dist_params(enc)),
                        pol.arch.greedy(pol.arch.dist_params(enc)))
  with pytest.raises(ValueError, match="anchor_targets"):
    probe_tuning.train_on_probes(policy_dir, [out], tmp_path / "x", anchor_targets="soft")
  # Priority has no alternative action to try: a clear error, nothing written.
  feats = {"li_size": np.arange(1, 9, dtype=np.int64).reshape(-1, 1),
           "stage": np.zeros((8, 1), np.int64), "weight": np.ones((8, 1), np.float32)}
  spec, w, _ = testing.fitted_spec("regalloc_priority", feats)
  policy_io.write_policy_dir(tmp_path / "prio", spec, w, saved_model=False)
  with pytest.raises(ValueError, match="prio: problem 'regalloc_priority' has no rollout"):
    rollouts.probe_corpus(prep, tmp_path / "prio", tmp_path / "p3", split="all")
  assert not (tmp_path / "p3").exists()


def test_broken_module_is_skipped_and_counted(tiny_corpus, tmp_path):
  bad = tmp_path / "corpus"
  shutil.copytree(tiny_corpus, bad)
  bcs = sorted(bad.rglob("*.bc"))
  bcs[0].write_bytes(b"this is not bitcode")      # refused when the corpus is read
  cmd = bcs[1].with_suffix(".cmd")               # a valid module clang refuses to compile
  cmd.write_bytes(cmd.read_bytes().rstrip(b"\0") + b"\0-mllvm\0-mlgo-no-such-option")
  s = rollouts.probe_corpus(bad, _oz(), tmp_path / "p", split="all",
                            max_probes=2, jobs=2)
  assert s["unusable"] == 1 and s["failed"] == 1 and s["modules"] == 2
  index = rollouts.ProbeStore(tmp_path / "p").index
  assert list(index["failed"]) == [bcs[1].stem] and index["failed"][bcs[1].stem]
  assert len(index["done"]) == 2


def test_training_needs_probe_data(tmp_path):
  with pytest.raises(FileNotFoundError, match="index.json"):
    probe_tuning.train_on_probes(_oz(), [tmp_path / "nothing"], tmp_path / "o")


def test_ir2vec_vocabulary_and_problem(tmp_path, tiny_corpus):
  from mlgo.problems import ir2vec  # pylint: disable=import-outside-toplevel
  v = ir2vec.vocabulary()
  assert set(v) == {"Opcodes", "Types", "Arguments"}
  assert all(len(x) == ir2vec.DIM for sec in v.values() for x in sec.values())
  # every opcode counts once as an instruction and once in exactly one group
  i = ir2vec.DIMENSIONS.index(ir2vec.INSTRUCTIONS)
  assert all(x[i] == 1.0 and sum(x) == 2.0 for x in v["Opcodes"].values())
  p1, p2 = ir2vec.vocabulary_path(tmp_path), ir2vec.vocabulary_path(tmp_path)
  assert p1 == p2 and json.loads(p1.read_text()) == v
  # An MLGO_HOME that cannot be written (Bazel's sandbox) falls back to the temp dir; a
  # directory the caller named is not silently replaced.
  (tmp_path / "file").write_text("")
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("MLGO_HOME", str(tmp_path / "file" / "home"))
    (tmp_path / "tmp").mkdir()
    mp.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    p3 = ir2vec.vocabulary_path()
    assert p3.parent == tmp_path / "tmp" / "mlgo-ir2vec" and p3.name == p1.name
    assert json.loads(p3.read_text()) == v
  with pytest.raises(OSError):
    ir2vec.vocabulary_path(tmp_path / "file")
  # clang-22 sends both instruction mixes; the default's object is unchanged by them
  prob = problems.get_problem("inlining_ir2vec")
  module = corpus_lib.load_corpus(tiny_corpus).modules[0]
  seen = []

  class Watch:
    def act(self, obs):
      seen.append(obs)
      return problems.get_problem("inlining").default_action(obs)
  r = env.compile_module(module, prob, Watch())
  plain = env.compile_module(module, "inlining", env.DefaultPolicy("inlining"))
  assert r.ok and plain.ok and r.reward == plain.reward and seen
  call = ir2vec.DIMENSIONS.index("call")
  for obs in seen:
    for name in ("callee_embedding", "caller_embedding"):
      e = obs[name]
      assert e.dtype == np.float32 and e.shape == (ir2vec.DIM,) and (e >= 0).all()
    # the caller holds at least the call being decided; a callee has instructions
    assert obs["caller_embedding"][call] >= 1 and obs["callee_embedding"][i] >= 1


def test_widen_probes_keeps_states_and_adds_features(tiny_corpus, tmp_path):
  from mlgo.problems import ir2vec  # pylint: disable=import-outside-toplevel
  policy_dir = _oz()
  rollouts.probe_corpus(tiny_corpus, policy_dir, tmp_path / "p", split="all", max_probes=3,
                        anchors=20, jobs=2)
  s = probe_widening.widen_probes(tmp_path / "p", tiny_corpus, "inlining_ir2vec",
                                  tmp_path / "w", anchors=20, jobs=2)
  assert s["modules"] == 4 and s["failed"] == 0 and s["mismatch"] == 0
  src, wide = rollouts.ProbeStore(tmp_path / "p"), rollouts.ProbeStore(tmp_path / "w")
  assert wide.index["features"][-2:] == ["callee_embedding", "caller_embedding"]
  def per_module(store):  # workers finish in any order: compare module by module
    out = {}
    for sh in store.shards():
      for i, name in enumerate(sh["module_names"]):
        m = sh["probe_module"] == i
        out[str(name)] = (sh["positions"][m], sh["probe_sizes"][m], sh["probe_features"][m])
    return out
  a, b = per_module(src), per_module(wide)
  assert sorted(a) == sorted(b) and len(a) == 4
  n38 = len(src.index["features"])
  for name, (pos, sizes, feats) in a.items():
    wpos, wsizes, wfeats = b[name]
    np.testing.assert_array_equal(pos, wpos)
    np.testing.assert_array_equal(sizes, wsizes)
    assert wfeats.shape == (len(pos), n38 + 2 * ir2vec.DIM)
    np.testing.assert_array_equal(wfeats[:, :n38], feats)
    caller_calls = wfeats[:, n38 + ir2vec.DIM + ir2vec.DIMENSIONS.index("call")]
    assert (caller_calls >= 1).all()
  # A corpus without those modules: each is counted as failed, nothing is written.
  other = testing.make_tiny_corpus(tmp_path / "other", PROGRAMS[:1])
  s2 = probe_widening.widen_probes(tmp_path / "p", other, "inlining_ir2vec",
                                   tmp_path / "w2", jobs=1)
  assert s2["failed"] == 3 and s2["modules"] == 1


def test_widened_policy_evaluates_like_the_original(tiny_corpus, tmp_path):
  """The shipped policy widened to inlining_ir2vec (zero weights on the instruction mixes)
  compiles every module to the same size through the IR2Vec channel; `evaluate
  --problem=inlining` runs such a policy as the variant it needs."""
  from mlgo import evaluation  # pylint: disable=import-outside-toplevel
  from mlgo.problems import ir2vec  # pylint: disable=import-outside-toplevel
  from mlgo.policy import normalization  # pylint: disable=import-outside-toplevel
  shipped = policy_io.load_policy(_oz())
  rng = np.random.default_rng(0)
  emb_norm = normalization.fit_feature("x", rng.gamma(2.0, 30.0, 5000)).to_json()
  feats = shipped.spec["features"] + [
      {"name": n, "dtype": "float32", "shape": [ir2vec.DIM]}
      for n in ("callee_embedding", "caller_embedding")]
  like_spec = dict(shipped.spec, problem="inlining_ir2vec", features=feats,
                   normalization=shipped.spec["normalization"] + [
                       dict(emb_norm, name="callee_embedding"),
                       dict(emb_norm, name="caller_embedding")])
  w = dict(shipped.arch.w)
  k = w["hidden_0/kernel"]
  w["hidden_0/kernel"] = np.concatenate([k, np.ones((6 * ir2vec.DIM, k.shape[1]), k.dtype)])
  like = policy_io.write_policy_dir(tmp_path / "like", like_spec, w, saved_model=False)
  wide = derived.widen_policy(_oz(), like, tmp_path / "wide", saved_model=False)
  assert wide.problem == "inlining_ir2vec"
  a = evaluation.evaluate("inlining", tiny_corpus, _oz(), tmp_path / "ea",
                          split="all", use_cache=False)
  b = evaluation.evaluate("inlining", tiny_corpus, tmp_path / "wide", tmp_path / "eb",
                          split="all", use_cache=False)
  assert b["problem"] == "inlining_ir2vec" and a["problem"] == "inlining"
  assert a["modules"] == b["modules"] == 4
  assert a["policy_score"] == b["policy_score"] and a["default"] == b["default"]
  assert a["policy_score"] != a["default"]   # the policy does decide differently


def test_shipped_ir2vec_policy_runs_as_its_variant(tiny_corpus, tmp_path):
  """models/inlining_oz_ir2vec loads as an inlining_ir2vec policy whose embedding inputs
  carry weight, and `evaluate --problem=inlining` compiles with it through clang-22's
  IR2Vec channel."""
  from mlgo import evaluation  # pylint: disable=import-outside-toplevel
  pol = policy_io.load_policy(testing.shipped_policy("inlining_oz_ir2vec"))
  assert pol.problem == "inlining_ir2vec" and len(pol.input_names) == 40
  k = pol.arch.w["hidden_0/kernel"]
  assert k.shape[0] == 3 * (38 + 2 * 18) and np.abs(k[3 * 38:]).max() > 0.01
  r = evaluation.evaluate("inlining", tiny_corpus, testing.shipped_policy("inlining_oz_ir2vec"),
                          tmp_path / "ev", split="all", use_cache=False)
  assert r["problem"] == "inlining_ir2vec" and r["modules"] == 4 and r["failed"] == 0
  assert 0 < r["policy_score"] < 2 * r["default"]
