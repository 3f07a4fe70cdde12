"""Ensembles written as one wider network: the merged policy's outputs are the mean of its
members' outputs, in numpy and in the SavedModel the compiler tools load."""
import pathlib

import numpy as np
import pytest

from mlgo.policy import derived, policy_io, regalloc_architectures

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
  shipped = policy_io.load_policy(EVICTION)
  # A second member of other widths (members need not share a trajectory or a size).
  arch = dict(shipped.spec["architecture"], hidden=[32, 16])
  w2 = regalloc_architectures.init_eviction_weights(arch, seed=3)
  w2["out/kernel"] = w2["out/kernel"] * 300.0   # as decisive as a trained scorer
  other = policy_io.write_policy_dir(tmp_path / "other", dict(shipped.spec, architecture=arch),
                                     w2, saved_model=False)
  ens = derived.ensemble_policies([EVICTION, other], tmp_path / "ens")
  assert ens.spec["architecture"]["hidden"] == [96, 48]
  assert ens.spec["ensemble_of"] == [str(EVICTION), str(other)]
  _assert_mean_of_members(ens, tmp_path / "ens", [shipped, policy_io.load_policy(other)],
                          _random_eviction_observations(shipped, 60, seed=1))


def _assert_mean_of_members(ens, ens_dir, members, observations):
  """The eviction ensemble's logits are its members' mean on every valid column, the same
  columns are masked, and its SavedModel chooses as the numpy policy does."""
  import tensorflow as tf
  fn = tf.saved_model.load(str(ens_dir / "saved_policy")).signatures["action"]
  differ = 0
  for o in observations:
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


def _categorical(tmp_path, name, seed, hidden=(16, 8), data_seed=0):
  """A categorical policy; members made with one data_seed share their normalization."""
  from mlgo.policy import normalization  # pylint: disable=import-outside-toplevel
  from mlgo.training import bc  # pylint: disable=import-outside-toplevel
  names = [f"feat_{i}" for i in range(6)]
  rng = np.random.default_rng(data_seed)
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
  ens = derived.ensemble_policies([a, b, b], tmp_path / "ens", saved_model=False)
  assert ens.normalizer.copies == 1 and "ensemble_normalization" not in ens.spec
  pa, pb = policy_io.load_policy(a), policy_io.load_policy(b)
  x = np.stack([data[n][:500] for n in pa.input_names], axis=1)
  feats = {n: x[:, i:i + 1] for i, n in enumerate(pa.input_names)}
  want = (pa.dist_params_batch(feats)["logits"] + 2 * pb.dist_params_batch(feats)["logits"]) / 3
  np.testing.assert_allclose(ens.dist_params_batch(feats)["logits"], want, rtol=1e-4,
                             atol=1e-5)
  # Another depth is refused, naming the member.
  c = policy_io.load_policy(a)
  deep = policy_io.write_policy_dir(
      tmp_path / "deep", dict(c.spec, architecture=dict(c.spec["architecture"], hidden=[8])),
      {k: v for k, v in c.arch.w.items() if not k.startswith("hidden_1")} | {
          "out/kernel": np.zeros((8, 2), np.float32),
          "hidden_0/kernel": c.arch.w["hidden_0/kernel"][:, :8],
          "hidden_0/bias": c.arch.w["hidden_0/bias"][:8]}, saved_model=False)
  with pytest.raises(ValueError, match="deep: its architecture differs"):
    derived.ensemble_policies([a, deep], tmp_path / "bad2", saved_model=False)


def test_members_with_their_own_normalization_keep_it(tmp_path):
  """Seeds of one command fit their own normalizations: the ensemble encodes the input
  once per member, so it is still exactly the mean of the members, in numpy, one decision
  at a time, in the SavedModel, and after another ensemble or a deferral on top."""
  import tensorflow as tf
  a, data = _categorical(tmp_path, "a", 0, data_seed=0)
  b, _ = _categorical(tmp_path, "b", 7, hidden=(8, 4), data_seed=1)
  pa, pb = policy_io.load_policy(a), policy_io.load_policy(b)
  assert pa.spec["normalization"] != pb.spec["normalization"]
  ens = derived.ensemble_policies([a, b], tmp_path / "ens")
  assert ens.normalizer.copies == 2
  assert ens.spec["ensemble_normalization"] == [pa.spec["normalization"],
                                                pb.spec["normalization"]]
  assert ens.spec["architecture"]["hidden"] == [24, 12]
  x = np.stack([data[n][:300] for n in pa.input_names], axis=1)
  x[:20] *= 50   # beyond both members' ranges too
  feats = {n: x[:, i:i + 1] for i, n in enumerate(pa.input_names)}
  want = (pa.dist_params_batch(feats)["logits"] + pb.dist_params_batch(feats)["logits"]) / 2
  got = ens.dist_params_batch(feats)["logits"]
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
  # Read through a's normalization, b's network gives other logits: the encoders matter.
  b_in_a = policy_io.Policy(dict(pb.spec, normalization=pa.spec["normalization"]), pb.arch.w)
  assert np.abs(b_in_a.dist_params_batch(feats)["logits"]
                - pb.dist_params_batch(feats)["logits"]).max() > 1e-3
  fn = tf.saved_model.load(str(tmp_path / "ens" / "saved_policy")).signatures["action"]
  for row in x[:60]:
    obs = {n: np.array([v], np.int64) for n, v in zip(pa.input_names, row)}
    one = ens.dist_params(obs)["logits"][0]
    np.testing.assert_allclose(one, (pa.dist_params(obs)["logits"][0]
                                     + pb.dist_params(obs)["logits"][0]) / 2, atol=1e-5)
    tf_a = fn(**{k: tf.constant(v) for k, v in obs.items()})["inlining_decision"].numpy()
    assert int(tf_a[0]) == int(ens.act(obs))
  # An ensemble of such ensembles keeps every encoder.
  twice = derived.ensemble_policies([tmp_path / "ens", a], tmp_path / "twice",
                                      saved_model=False)
  assert twice.normalizer.copies == 3
  np.testing.assert_allclose(twice.dist_params_batch(feats)["logits"],
                             (got + pa.dist_params_batch(feats)["logits"]) / 2, atol=1e-5)
  # Outside-range deferral: outside any member's (widened) range is outside.
  d = derived.with_deferral(tmp_path / "ens", tmp_path / "deferred", margin=0.0,
                              outside=1.0, feature="inlining_default", saved_model=False)
  lo = np.maximum(policy_io.deferral_bounds(pa.normalizer, 1.0)[0],
                  policy_io.deferral_bounds(pb.normalizer, 1.0)[0])
  hi = np.minimum(policy_io.deferral_bounds(pa.normalizer, 1.0)[1],
                  policy_io.deferral_bounds(pb.normalizer, 1.0)[1])
  np.testing.assert_array_equal(d.defer_low, lo)
  np.testing.assert_array_equal(d.defer_high, hi)
  deferred = 0
  for row in x:
    obs = {n: np.array([v], np.int64) for n, v in zip(pa.input_names, row)}
    obs["inlining_default"] = np.array([7], np.int64)   # a mark no network answers
    outside = bool(np.any((row > hi) | (row < lo)))
    assert (int(d.act(obs)) == 7) == outside
    deferred += outside
  assert 0 < deferred < len(x)
  # The widening of fine-tuning starts refuses such an ensemble rather than misread it.
  with pytest.raises(ValueError, match="ens: an ensemble of differently normalized"):
    derived.widen_policy(tmp_path / "ens", a, tmp_path / "wide", saved_model=False)


def test_eviction_members_with_their_own_normalization(tmp_path):
  """Eviction seeds fit their own normalizations, and with them their mask and cost
  thresholds: the column scorer reads each member's encoding per column."""
  from mlgo.policy.normalization import FeatureNorm  # pylint: disable=import-outside-toplevel
  shipped = policy_io.load_policy(EVICTION)
  norms = [dict(d, mean=d["mean"] + 0.3, std=d["std"] * 1.5)
           for d in shipped.spec["normalization"]]
  sa = shipped.spec["architecture"]
  arch = regalloc_architectures.eviction_architecture(
      shipped.input_names, {d["name"]: FeatureNorm.from_json(d) for d in norms},
      hidden=(32, 16), cost_mask="cost_mask" in sa,
      default_prior=sa.get("default_prior", {}).get("init", 0.0))
  assert arch["mask_z_threshold"] != sa["mask_z_threshold"]
  w2 = regalloc_architectures.init_eviction_weights(arch, seed=3)
  w2["out/kernel"] = w2["out/kernel"] * 300.0
  if "prior/scale" in shipped.arch.w:
    w2["prior/scale"] = shipped.arch.w["prior/scale"]
  other = policy_io.write_policy_dir(
      tmp_path / "other", dict(shipped.spec, normalization=norms, architecture=arch), w2,
      saved_model=False)
  ens = derived.ensemble_policies([EVICTION, other], tmp_path / "ens")
  assert ens.normalizer.copies == 2 and ens.spec["architecture"]["input_copies"] == 2
  _assert_mean_of_members(ens, tmp_path / "ens", [shipped, policy_io.load_policy(other)],
                          _random_eviction_observations(shipped, 40, seed=2))
  # A member that differs beyond widths and thresholds is still refused.
  odd = dict(arch, n_column_features=arch["n_column_features"] + 1)
  odir = policy_io.write_policy_dir(
      tmp_path / "odd", dict(shipped.spec, normalization=norms, architecture=odd), w2,
      saved_model=False)
  with pytest.raises(ValueError, match="odd: its architecture differs"):
    derived.ensemble_policies([EVICTION, odir], tmp_path / "bad", saved_model=False)
