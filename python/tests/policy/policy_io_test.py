"""Numpy evaluator vs TF SavedModel, policy dir format, decision cost."""
import json

import numpy as np
import pytest

from mlgo.training import bc
from mlgo.policy import derived, normalization, policy_io

NAMES = [f"feat_{i}" for i in range(12)]


def _spec_and_weights(seed=0, hidden=(16, 8), encoding="quantile"):
  rng = np.random.default_rng(seed)
  data = {n: rng.integers(0, 10 ** (1 + i % 5), size=3000) for i, n in enumerate(NAMES)}
  norms = [normalization.fit_feature(n, data[n]) for n in NAMES]
  arch = {"type": "mlp_categorical", "hidden": list(hidden), "num_actions": 2,
          "output_name": "inlining_decision", "output_dtype": "int64"}
  feats = [{"name": n, "dtype": "int64", "shape": [1]} for n in NAMES]
  spec = bc.make_spec("inlining", feats, norms, arch, encoding)
  w = bc.init_weights(arch, len(NAMES) * normalization.ENCODINGS[encoding], seed)
  w["out/kernel"] = w["out/kernel"] * 30  # decisive logits: both actions occur
  return spec, w, data


@pytest.mark.parametrize("encoding", ["quantile", "slog"])
def test_numpy_matches_saved_model(tmp_path, encoding):
  import tensorflow as tf
  spec, w, data = _spec_and_weights(encoding=encoding)
  d = policy_io.write_policy_dir(tmp_path / "pol", spec, w)
  pol = policy_io.load_policy(d)
  model = tf.saved_model.load(str(d / "saved_policy"))
  fn = model.signatures["action"]
  assert set(fn.structured_input_signature[1]) == set(NAMES)
  assert list(fn.structured_outputs) == ["inlining_decision"]
  assert fn.structured_outputs["inlining_decision"].dtype == tf.int64
  rng = np.random.default_rng(1)
  seen = set()
  for i in range(300):
    obs = {n: np.array([data[n][i] + rng.integers(-3, 4)], np.int64) for n in NAMES}
    a_np = pol.act(obs)
    a_tf = fn(**{n: tf.constant(v) for n, v in obs.items()})["inlining_decision"].numpy()
    assert a_tf.shape == (1,)
    assert int(a_tf[0]) == int(a_np)
    seen.add(int(a_np))
  assert seen == {0, 1}


@pytest.mark.parametrize("encoding", ["quantile", "slog"])
def test_batch_equals_single(tmp_path, encoding):
  spec, w, data = _spec_and_weights(2, encoding=encoding)
  d = policy_io.write_policy_dir(tmp_path / "pol", spec, w, saved_model=False)
  pol = policy_io.load_policy(d)
  obs = [{n: np.array([data[n][i]], np.int64) for n in NAMES} for i in range(1000)]
  single = np.array([pol.act(o) for o in obs])
  batch = pol.decide_batch({n: data[n][:1000, None] for n in NAMES})
  assert (single == batch).all()
  # Per-decision speed is measured by //tools:bench_training, not asserted here.


def test_encoding_is_recorded_and_sets_the_input_width(tmp_path):
  spec, w, data = _spec_and_weights(4, encoding="slog")
  assert spec["encoding"] == "slog"
  assert "encoding" not in _spec_and_weights(4)[0]   # old dirs read as quantile
  pol = policy_io.load_policy(policy_io.write_policy_dir(tmp_path / "p", spec, w,
                                                         saved_model=False))
  assert pol.normalizer.input_dim == len(NAMES)
  x = np.array([[data[n][i] for n in NAMES] for i in range(5)], np.float64)
  enc = pol.normalizer.encode_scalar_rows(x)
  # "slog" is exactly the quantile encoding's third float.
  q = normalization.Normalizer(pol.normalizer.norms).encode_scalar_rows(x)
  assert enc.shape == (5, len(NAMES)) and np.array_equal(enc, q[:, 2::3])
  assert np.array_equal(pol.normalizer.encode_one(x[0]), enc[0])
  bad = dict(spec, encoding="bucket")
  with pytest.raises(ValueError, match="unknown feature encoding 'bucket'"):
    policy_io.Policy(bad, w)


def test_column_scorer_refuses_the_slog_encoding():
  from mlgo.policy import regalloc_architectures
  spec = {"problem": "regalloc_eviction", "features": [{"name": "f", "dtype": "float32",
                                                         "shape": [1]}],
          "normalization": [normalization.fit_feature("f", np.arange(10.0)).to_json()],
          "architecture": {"type": regalloc_architectures.ColumnScorer.TYPE, "hidden": [4]},
          "encoding": "slog"}
  with pytest.raises(ValueError, match="cannot read the 'slog' feature encoding"):
    policy_io.Policy(spec, {})


def test_sampling_follows_probabilities():
  spec, w, _ = _spec_and_weights(3)
  pol = policy_io.Policy(spec, w, greedy=False, seed=0)
  params = {"logits": np.tile(np.array([[0.0, np.log(3.0)]]), (20000, 1))}
  a = pol.arch.sample(params, np.random.default_rng(0))
  assert abs(a.mean() - 0.75) < 0.02
  assert np.allclose(pol.arch.entropy(params)[:1], -(0.25 * np.log(0.25) + 0.75 * np.log(0.75)))


def test_load_rejects_bad_dirs(tmp_path):
  with pytest.raises(FileNotFoundError, match="policy.json"):
    policy_io.load_policy(tmp_path)
  spec, w, _ = _spec_and_weights()
  d = policy_io.write_policy_dir(tmp_path / "pol", spec, w, saved_model=False)
  meta = json.loads((d / "policy.json").read_text())
  meta["format_version"] = 99
  (d / "policy.json").write_text(json.dumps(meta))
  with pytest.raises(ValueError, match="format_version"):
    policy_io.load_policy(d)


def test_rewrite_is_atomic_replace(tmp_path):
  spec, w, _ = _spec_and_weights()
  d = policy_io.write_policy_dir(tmp_path / "pol", spec, w, saved_model=False)
  w2 = {k: v + 1 for k, v in w.items()}
  policy_io.write_policy_dir(tmp_path / "pol", spec, w2, saved_model=False)
  pol = policy_io.load_policy(d)
  assert np.allclose(pol.arch.w["out/bias"], w2["out/bias"])
  assert sorted(p.name for p in tmp_path.iterdir()) == ["pol"]


def test_architecture_lookup_knows_every_architecture_and_rejects_unknown():
  from mlgo.policy import architectures  # the regalloc types too: the package registers them
  for name in ("mlp_categorical", "mlp_normal", "regalloc_column_scorer",
               "regalloc_log2_normal"):
    assert architectures.architecture_class(name).TYPE == name
  with pytest.raises(ValueError, match="unknown architecture 'nope'"):
    architectures.architecture_class("nope")


def test_average_policies(tmp_path):
  spec, w1, data = _spec_and_weights(seed=0)
  _, w2, _ = _spec_and_weights(seed=5)
  # The first member's own history (it was fine-tuned) must not pass for the average's.
  a = policy_io.write_policy_dir(tmp_path / "a", dict(spec, fine_tuned_from="x",
                                                      probe_dirs=["p"]), w1, saved_model=False)
  b = policy_io.write_policy_dir(tmp_path / "b", spec, w2, saved_model=False)
  avg = derived.average_policies([a, b], tmp_path / "avg", saved_model=False)
  assert "fine_tuned_from" not in avg.spec and "probe_dirs" not in avg.spec
  for k in w1:
    np.testing.assert_allclose(avg.arch.w[k], (w1[k] + w2[k]) / 2, rtol=1e-6)
  assert avg.spec["averaged_from"] == [str(a), str(b)]
  obs = {n: np.array([data[n][0]], np.int64) for n in NAMES}
  assert int(avg.act(obs)) in (0, 1)
  # Policies with another normalization (another run) are refused, naming the dir.
  other = dict(spec)
  other["normalization"] = [dict(d, mean=d["mean"] + 1.0) for d in spec["normalization"]]
  c = policy_io.write_policy_dir(tmp_path / "c", other, w2, saved_model=False)
  with pytest.raises(ValueError, match="c: its normalization differs"):
    derived.average_policies([a, c], tmp_path / "bad", saved_model=False)
  # So are members that defer to the compiler otherwise; members that defer alike keep it.
  defer = {"margin": 0.4, "feature": "inlining_default"}
  e = policy_io.write_policy_dir(tmp_path / "e", dict(spec, defer=defer), w2,
                                 saved_model=False)
  with pytest.raises(ValueError, match="e: its defer differs"):
    derived.average_policies([a, e], tmp_path / "bad", saved_model=False)
  f = policy_io.write_policy_dir(tmp_path / "f", dict(spec, defer=defer), w1,
                                 saved_model=False)
  assert derived.average_policies([f, e], tmp_path / "fe", saved_model=False
                                  ).spec["defer"] == defer


def test_weighted_average_steps_part_of_the_way(tmp_path):
  spec, w1, _ = _spec_and_weights(seed=0)
  _, w2, _ = _spec_and_weights(seed=5)
  a = policy_io.write_policy_dir(tmp_path / "a", spec, w1, saved_model=False)
  b = policy_io.write_policy_dir(tmp_path / "b", spec, w2, saved_model=False)
  # Weights are shares: 1 and 3 put three quarters of the way from a to b.
  avg = derived.average_policies([a, b], tmp_path / "avg", saved_model=False,
                                   weights=[1, 3])
  for k in w1:
    np.testing.assert_allclose(avg.arch.w[k], 0.25 * w1[k] + 0.75 * w2[k], rtol=1e-5, atol=1e-6)
  assert avg.spec["averaged_weights"] == [0.25, 0.75]
  # An average of the average records its own weights, not its member's.
  again = derived.average_policies([tmp_path / "avg", a], tmp_path / "again",
                                     saved_model=False)
  assert "averaged_weights" not in again.spec
  for k in w1:
    np.testing.assert_allclose(again.arch.w[k], 0.625 * w1[k] + 0.375 * w2[k], rtol=1e-5,
                               atol=1e-6)
  for bad in ([1], [1, -1], [0, 0], [1, float("nan")]):
    with pytest.raises(ValueError, match="weights"):
      derived.average_policies([a, b], tmp_path / "bad", saved_model=False, weights=bad)


def test_widen_policy_decides_as_before_and_then_sees_more(tmp_path):
  spec, w, data = _spec_and_weights(seed=4)
  src = policy_io.write_policy_dir(tmp_path / "src", spec, w, saved_model=False)
  # A wider policy (as a clone for inlining_ir2vec would be): the same features, then a
  # float vector feature with its own normalization.
  rng = np.random.default_rng(9)
  emb = rng.gamma(2.0, 20.0, size=(3000, 5)).astype(np.float32)
  like_spec = dict(spec, problem="inlining_ir2vec",
                   features=spec["features"] + [{"name": "emb", "dtype": "float32",
                                                 "shape": [5]}],
                   normalization=spec["normalization"] + [
                       normalization.fit_feature("emb", emb).to_json()])
  like_spec["normalization"][0] = dict(like_spec["normalization"][0], mean=123.0)
  wide_in = (len(NAMES) + 5) * 3
  like = policy_io.write_policy_dir(tmp_path / "like", like_spec,
                                    bc.init_weights(spec["architecture"], wide_in, 1),
                                    saved_model=False)
  wide = derived.widen_policy(src, like, tmp_path / "wide", saved_model=False)
  assert wide.problem == "inlining_ir2vec" and wide.input_names[-1] == "emb"
  assert wide.arch.w["hidden_0/kernel"].shape == (wide_in, 16)
  # its own features keep the original normalization (not the clone's)
  assert wide.spec["normalization"][0] == spec["normalization"][0]
  narrow = policy_io.load_policy(src)
  x = {n: data[n][:500, None] for n in NAMES}
  a = narrow.decide_batch(x)
  b = wide.decide_batch(dict(x, emb=emb[:500]))
  assert set(a.tolist()) == {0, 1} and (a == b).all()
  # Fine-tuning can now use the new inputs: a nonzero weight there changes decisions.
  wide.arch.w["hidden_0/kernel"][-15:] = 5.0
  assert (wide.decide_batch(dict(x, emb=emb[:500])) != a).any()
  # A policy whose features are not a prefix of the wider one's is refused.
  other = policy_io.write_policy_dir(tmp_path / "o", dict(spec, features=spec["features"][::-1]),
                                     w, saved_model=False)
  with pytest.raises(ValueError, match="do not start with"):
    derived.widen_policy(other, like, tmp_path / "bad", saved_model=False)


def test_raw_vector_of_vector_inputs_in_any_form():
  """A policy with a vector input (an embedding beside counts) reads the reader's 1-D
  arrays in one concatenate; scalars, nested lists and [1, k] arrays take the general
  path; every form gives the same float64 row, in input order."""
  rng = np.random.default_rng(3)
  feats = [{"name": "a", "dtype": "int64", "shape": [1]},
           {"name": "emb", "dtype": "float32", "shape": [4]},
           {"name": "b", "dtype": "int64", "shape": [1]}]
  norms = [normalization.fit_feature(n, rng.normal(0, 50, 500)) for n in ["a", "emb", "b"]]
  arch = {"type": "mlp_categorical", "hidden": [8], "num_actions": 2,
          "output_name": "inlining_decision", "output_dtype": "int64"}
  spec = bc.make_spec("inlining", feats, norms, arch, "quantile")
  pol = policy_io.Policy(spec, bc.init_weights(arch, 6 * 3, 0), greedy=True)
  assert not pol._scalar_inputs
  emb = np.array([0.5, -1.25, 3e38, 7.0], np.float32)
  want = np.array([2 ** 53 + 2, 0.5, -1.25, float(np.float32(3e38)), 7.0, -9], np.float64)
  forms = [
      {"a": np.array([2 ** 53 + 2]), "emb": emb, "b": np.array([-9])},          # the reader's
      {"a": 2 ** 53 + 2, "emb": emb, "b": np.int64(-9)},                         # scalars
      {"a": np.array([[2 ** 53 + 2]]), "emb": emb[None, :], "b": np.array([[-9]])},  # [1, k]
      {"a": [2 ** 53 + 2], "emb": emb.tolist(), "b": [-9]},                      # lists
  ]
  rows = [pol.raw_vector(o) for o in forms]
  for r in rows:
    assert r.dtype == np.float64 and np.array_equal(r, want)
  # The decision follows the row, whatever form the observation came in.
  assert len({int(pol.act(o)) for o in forms}) == 1
