"""Ensembles written as one wider network: the merged policy's outputs are the mean of its
members' outputs, in numpy and in the SavedModel the compiler tools load."""
import pathlib

import numpy as np
import pytest

from mlgo.policy import policy_io, regalloc_architectures

ROOT = pathlib.Path(__file__).resolve().parents[3]
EVICTION = ROOT / "models" / "regalloc_eviction"


def _random_eviction_observations(pol, n, seed):
  """Raw observations shaped like llc's (each column feature [1, 33]), with a random
  mask so the masked softmax is exercised."""
  rng = np.random.default_rng(seed)
  obs = []
  for _ in range(n):
    o = {}
    for f in pol.features:
      shape = f["shape"]
      if f["name"] == "mask":
        v = (rng.random(shape) < 0.6).astype(np.int64)
        v[0, -1] = 1
      elif f["dtype"] == "int64":
        v = rng.integers(0, 4, size=shape).astype(np.int64)
      else:
        v = (rng.gamma(1.5, 2.0, size=shape) * (rng.random(shape) < 0.8)).astype(np.float32)
      o[f["name"]] = v
    obs.append(o)
  return obs


def _logits(pol, o):
  enc = pol.normalizer.encode_one(pol.raw_vector(o))[None, :]
  return pol.arch.dist_params(enc)["logits"][0].astype(np.float64)


def test_eviction_ensemble_is_the_mean_of_its_members_everywhere(tmp_path):
  import tensorflow as tf
  shipped = policy_io.load_policy(EVICTION)
  # A second member of other widths (members need not share a trajectory or a size).
  arch = dict(shipped.spec["architecture"], hidden=[32, 16])
  w2 = regalloc_architectures.init_eviction_weights(arch, seed=3)
  w2["out/kernel"] = w2["out/kernel"] * 300.0   # as decisive as a trained scorer
  other = policy_io.write_policy_dir(tmp_path / "other", dict(shipped.spec, architecture=arch),
                                     w2, saved_model=False)
  ens = policy_io.ensemble_policies([EVICTION, other], tmp_path / "ens")
  assert ens.spec["architecture"]["hidden"] == [96, 48]
  assert ens.spec["ensemble_of"] == [str(EVICTION), str(other)]
  members = [shipped, policy_io.load_policy(other)]
  model = tf.saved_model.load(str(tmp_path / "ens" / "saved_policy"))
  fn = model.signatures["action"]
  differ = 0
  for o in _random_eviction_observations(shipped, 60, seed=1):
    mean = np.mean([_logits(m, o) for m in members], axis=0)
    got = _logits(ens, o)
    valid = mean > regalloc_architectures.NEG / 2
    assert (got > regalloc_architectures.NEG / 2).tolist() == valid.tolist()
    np.testing.assert_allclose(got[valid], mean[valid], rtol=1e-4, atol=1e-4)
    a = int(ens.act(o))
    assert valid[a]
    tf_a = fn(**{k: tf.constant(v) for k, v in o.items()})["index_to_evict"].numpy()
    assert int(tf_a[0]) == a
    differ += len({int(m.act(o)) for m in members}) > 1
  assert differ > 0   # the members disagree somewhere, so the mean is not trivially one


def _categorical(tmp_path, name, seed, hidden=(16, 8)):
  from mlgo.policy import normalization  # pylint: disable=import-outside-toplevel
  from mlgo.training import bc  # pylint: disable=import-outside-toplevel
  names = [f"feat_{i}" for i in range(6)]
  rng = np.random.default_rng(0)   # one data set: members share the normalization
  data = {n: rng.integers(0, 10 ** (1 + i % 4), size=2000) for i, n in enumerate(names)}
  arch = {"type": "mlp_categorical", "hidden": list(hidden), "num_actions": 2,
          "output_name": "inlining_decision", "output_dtype": "int64"}
  spec = bc.make_spec("inlining", [{"name": n, "dtype": "int64", "shape": [1]} for n in names],
                      [normalization.fit_feature(n, data[n]) for n in names], arch)
  w = bc.init_weights(arch, len(names) * 3, seed)
  return policy_io.write_policy_dir(tmp_path / name, spec, w, saved_model=False), data


def test_categorical_ensemble_and_refusals(tmp_path):
  a, data = _categorical(tmp_path, "a", 0)
  b, _ = _categorical(tmp_path, "b", 7)
  ens = policy_io.ensemble_policies([a, b, b], tmp_path / "ens", saved_model=False)
  pa, pb = policy_io.load_policy(a), policy_io.load_policy(b)
  x = np.stack([data[n][:500] for n in pa.input_names], axis=1)
  feats = {n: x[:, i:i + 1] for i, n in enumerate(pa.input_names)}
  want = (pa.dist_params_batch(feats)["logits"] + 2 * pb.dist_params_batch(feats)["logits"]) / 3
  np.testing.assert_allclose(ens.dist_params_batch(feats)["logits"], want, rtol=1e-4,
                             atol=1e-5)
  # Another normalization, or another depth, is refused, naming the member.
  c = policy_io.load_policy(a)
  other = dict(c.spec, normalization=[dict(d, mean=d["mean"] + 1.0)
                                      for d in c.spec["normalization"]])
  cdir = policy_io.write_policy_dir(tmp_path / "c", other, c.arch.w, saved_model=False)
  with pytest.raises(ValueError, match="c: its normalization differs"):
    policy_io.ensemble_policies([a, cdir], tmp_path / "bad", saved_model=False)
  deep = policy_io.write_policy_dir(
      tmp_path / "deep", dict(c.spec, architecture=dict(c.spec["architecture"], hidden=[8])),
      {k: v for k, v in c.arch.w.items() if not k.startswith("hidden_1")} | {
          "out/kernel": np.zeros((8, 2), np.float32),
          "hidden_0/kernel": c.arch.w["hidden_0/kernel"][:, :8],
          "hidden_0/bias": c.arch.w["hidden_0/bias"][:8]}, saved_model=False)
  with pytest.raises(ValueError, match="deep: its architecture differs"):
    policy_io.ensemble_policies([a, deep], tmp_path / "bad2", saved_model=False)
