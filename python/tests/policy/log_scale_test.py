"""The "log" transform of eviction's frequency and weight features: decades near 0 that
slog merges stay apart, the same numbers in numpy and the SavedModel, and older policy
files (no transform recorded) still read as slog."""
import json

import numpy as np
import pytest

from mlgo.policy import normalization, policy_io, regalloc_architectures
from mlgo.problems import regalloc
from mlgo.training import testing


def _tiny(v, rng):
  """Values spread over 12 decades below 1, a fifth of them 0: a function with deep loops."""
  out = (v / 10.0) * 10.0 ** -rng.uniform(0, 12, v.shape)
  out[rng.random(v.shape) < 0.2] = 0
  return out.astype(np.float32)


def _features(n=400, seed=5):
  rng = np.random.default_rng(seed)
  feats = testing.fake_eviction_features(n, rng)
  for name in regalloc.EVICTION_LOG_SCALE_FEATURES:
    nan = np.isnan(feats[name])
    feats[name] = _tiny(np.nan_to_num(feats[name]), rng)
    feats[name][nan] = np.nan
  return feats


def test_log_keeps_apart_decades_that_slog_merges():
  rng = np.random.default_rng(0)
  values = _tiny(rng.random(5000) * 10, rng)
  cold, hot = np.array([1.67e-9]), np.array([3.2e-5])   # two candidates of stop 70
  for kind, apart in (("slog", False), ("log", True)):
    n = normalization.fit_feature("hottest_bb_freq_by_max", values, kind=kind)
    norm = normalization.Normalizer([n])
    z = [norm.encode_one(x)[2] for x in (cold, hot)]
    assert z[1] > z[0]
    assert (z[1] - z[0] > 0.5) == apart, (kind, z)


def test_transform_is_recorded_only_when_not_slog_and_read_back():
  v = np.array([0.0, 1e-6, 1e-3, 1.0])
  plain = normalization.fit_feature("a", v)
  assert "transform" not in plain.to_json()           # older files stay as they were
  logged = normalization.fit_feature("a", v, kind="log")
  d = json.loads(json.dumps(logged.to_json()))
  assert d["transform"] == "log"
  back = normalization.FeatureNorm.from_json(d)
  assert back.transform == "log" and back.mean == logged.mean
  d.pop("transform")
  assert normalization.FeatureNorm.from_json(d).transform == "slog"
  with pytest.raises(ValueError, match="feature 'a': unknown transform 'log2'"):
    normalization.fit_feature("a", v, kind="log2")
  with pytest.raises(ValueError, match="feature 'b': unknown transform"):
    normalization.FeatureNorm.from_json(dict(d, name="b", transform="sqrt"))


def test_only_the_problems_log_scale_features_change():
  feats = _features()
  spec_s, _, enc_s = testing.fitted_spec("regalloc_eviction", feats, hidden=(16, 8))
  spec_l, _, enc_l = testing.fitted_spec("regalloc_eviction", feats, hidden=(16, 8),
                                         log_scale=True)
  kinds = {d["name"]: d.get("transform", "slog") for d in spec_l["normalization"]}
  assert {n for n, k in kinds.items() if k == "log"} == set(regalloc.EVICTION_LOG_SCALE_FEATURES)
  assert all("transform" not in d for d in spec_s["normalization"])
  # Same quantiles; the third float differs exactly on the log features' elements.
  pol = policy_io.Policy(spec_l, {})
  names = [n.name for n in pol.normalizer.norms]
  e = normalization.ENCODED_PER_SCALAR
  differs = np.nanmax(np.abs(enc_l - enc_s).reshape(len(enc_l), -1, e), axis=0)  # NaN row
  for i, name in enumerate(names):
    assert differs[i, 0] == 0 and differs[i, 1] == 0
    assert (differs[i, 2] > 0) == (name in regalloc.EVICTION_LOG_SCALE_FEATURES), name


def test_the_default_prior_reads_tiny_densities_in_order_with_log():
  """The default-equivalent column found on encoded features: slog's float32 values tie
  densities a few decades below 1, so it picks by index there; log picks the rule's."""
  feats = _features()
  want = np.array([regalloc.eviction_default({k: v[i] for k, v in feats.items()})
                   for i in range(len(feats["mask"]))])
  got = {}
  for log_scale in (False, True):
    spec, _, enc = testing.fitted_spec("regalloc_eviction", feats, hidden=(16, 8),
                                       architecture_options={"default_prior": 3.0},
                                       log_scale=log_scale)
    got[log_scale] = regalloc_architectures.default_column_np(enc, spec["architecture"])
  rows = ~np.isnan(feats["use_def_density"]).any(axis=(1, 2))
  assert (got[True][rows] == want[rows]).all()
  assert (got[False][rows] != want[rows]).mean() > 0.05   # 8% of these rows


def test_numpy_and_saved_model_decide_alike_with_log_scale(tmp_path):
  import tensorflow as tf
  feats = _features(n=60, seed=8)
  spec, w, _ = testing.fitted_spec("regalloc_eviction", feats, hidden=(16, 8), seed=3,
                                   log_scale=True)
  w["out/kernel"] = w["out/kernel"] * 300   # decisive logits
  d = policy_io.write_policy_dir(tmp_path / "pol", spec, w)
  pol = policy_io.load_policy(d)
  fn = tf.saved_model.load(str(d / "saved_policy")).signatures["action"]
  seen = set()
  for i in range(len(feats["mask"])):
    obs = {k: v[i] for k, v in feats.items()}
    a_np = int(pol.act(obs))
    a_tf = fn(**{k: tf.constant(v) for k, v in obs.items()})["index_to_evict"].numpy()
    assert int(a_tf[0]) == a_np, i
    seen.add(a_np)
  assert len(seen) > 5
