"""Eviction network: masked columns are never chosen; numpy and TF agree."""
import numpy as np

from mlgo.regalloc import model, networks
from mlgo.training import policy_io


def _fake_trace(n, rng):
  feats = {}
  for name in networks.EVICTION_FEATURES:
    if name == "mask":
      v = (rng.random((n, 1, 33)) < 0.3).astype(np.int64)
      v[:, 0, rng.integers(0, 33, n)] = 1
    elif name in ("is_free", "is_hint", "is_local", "max_stage", "min_stage"):
      v = rng.integers(0, 4, (n, 1, 33)).astype(np.int64)
    else:
      v = rng.random((n, 1, 33)).astype(np.float32) * 10
    feats[name] = v
  feats["progress"] = rng.random((n, 1)).astype(np.float32)
  feats["use_def_density"][0, 0, 3] = np.nan  # LLVM sends NaN sometimes
  return feats


def test_masked_columns_are_never_sampled_or_chosen():
  rng = np.random.default_rng(0)
  feats = _fake_trace(300, rng)
  spec = model.make_spec("regalloc_eviction", feats)
  w = model.init_weights(spec, 1)
  # Make the network prefer the masked columns as much as possible.
  w["out/bias"][:] = 5.0
  pol = policy_io.Policy(spec, w)
  enc = model.encode(spec, feats)
  params = pol.arch.dist_params(enc)
  mask = feats["mask"].reshape(-1, 33) == 1
  assert np.array_equal(params["mask"] > 0, mask)
  assert np.isfinite(params["logits"]).all()
  for s in range(20):
    a = pol.arch.sample(params, np.random.default_rng(s))
    assert mask[np.arange(len(a)), a].all()
  g = pol.arch.greedy(params)
  assert mask[np.arange(len(g)), g].all()
  lp = pol.arch.log_prob(params, g)
  assert np.all(lp <= 0) and np.all(np.isfinite(lp))


def test_tf_and_numpy_agree():
  import tensorflow as tf
  rng = np.random.default_rng(1)
  feats = _fake_trace(64, rng)
  spec = model.make_spec("regalloc_eviction", feats)
  w = model.init_weights(spec, 2)
  w["out/kernel"] = w["out/kernel"] * 100
  pol = policy_io.Policy(spec, w)
  enc = model.encode(spec, feats)
  np_logits = pol.arch.dist_params(enc)["logits"]
  tfm = model.TFPolicy(spec, w)
  tf_logits = tfm.logits(tf.constant(enc)).numpy()
  valid = np_logits > -1e8
  assert np.array_equal(valid, tf_logits > -1e8)
  np.testing.assert_allclose(np_logits[valid], tf_logits[valid], rtol=1e-4, atol=1e-4)
  np.testing.assert_array_equal(pol.arch.greedy({"logits": np_logits}),
                                pol.arch.tf_greedy(tf, tf.constant(enc)).numpy())
  # One decision through the per-decision path gives the batch answer.
  one = {k: v[5] for k, v in feats.items()}
  assert pol.act(one) == pol.arch.greedy({"logits": np_logits})[5]
