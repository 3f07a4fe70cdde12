"""The eviction network's default prior: a trainable scale times a one-hot of the column
the default-equivalent rule (mlgo.problems.regalloc.eviction_default) picks, computed on
the encoded features the same way in numpy and in TF, so a fresh policy decides as that
rule and training starts from it."""
import numpy as np

from mlgo.policy import regalloc_architectures
from mlgo.problems import regalloc
from mlgo.training import testing


def _features(n=600, seed=3):
  rng = np.random.default_rng(seed)
  feats = testing.fake_eviction_features(n, rng)
  # Few distinct hint counts and densities: ties are what the rule's order is about.
  feats["nr_broken_hints"] = rng.integers(0, 3, feats["nr_broken_hints"].shape).astype(
      np.float32)
  feats["use_def_density"] = rng.integers(1, 6, feats["use_def_density"].shape).astype(
      np.float32) / 4
  # Every case: no candidate valid, the own column masked (an eviction is required).
  feats["mask"][:50, 0, :32] = 0
  feats["mask"][:50, 0, 32] = 1
  feats["mask"][50:100, 0, 32] = 0
  feats["mask"][50:100, 0, 5] = 1
  return feats


def _spec(feats, prior=3.0):
  spec, _, enc = testing.fitted_spec("regalloc_eviction", feats, hidden=(16, 8),
                                     architecture_options={"default_prior": prior})
  return spec, enc


def _rows(feats, i):
  return {k: v[i] for k, v in feats.items()}


def test_prior_column_is_the_default_equivalent_rule():
  feats = _features()
  spec, enc = _spec(feats)
  got = regalloc_architectures.default_column_np(enc, spec["architecture"])
  want = np.array([regalloc.eviction_default(_rows(feats, i)) for i in range(len(got))])
  assert (got[:50] == 32).all()                      # nothing else valid
  assert (want[50:100] != 32).all() and (got[50:100] == want[50:100]).all()
  # Row 0 of the fake data has a NaN density, which the encoding turns into 0: that
  # row may differ; every other row is the rule's exact choice.
  assert (got[1:] == want[1:]).all(), np.flatnonzero(got != want)
  assert len(set(want.tolist())) > 5                 # the data exercises many columns


def test_numpy_and_tf_agree_and_a_fresh_policy_follows_the_rule():
  import tensorflow as tf
  feats = _features()
  spec, enc = _spec(feats)
  arch = spec["architecture"]
  col_tf = regalloc_architectures.default_column_tf(tf, tf.constant(enc), arch).numpy()
  col_np = regalloc_architectures.default_column_np(enc, arch)
  assert (col_tf == col_np).all()
  w = regalloc_architectures.init_eviction_weights(arch, seed=2)
  assert w["prior/scale"].tolist() == [3.0]
  net = regalloc_architectures.ColumnScorer(arch, w)
  params = net.dist_params(enc)
  assert (net.greedy(params) == col_np).all()
  # Sampling favours it too: its logit leads every other valid column's by about the
  # scale (the fresh MLP's outputs are near zero).
  lg = params["logits"]
  lead = np.take_along_axis(lg, col_np[:, None], 1)[:, 0] - np.where(
      np.eye(regalloc_architectures.COLUMNS, dtype=bool)[col_np], -np.inf, lg).max(axis=1)
  rows = params["mask"].sum(axis=1) > 1
  assert lead[rows].min() > 2.5
  logits_tf = regalloc_architectures.scorer_logits_tf(
      tf, {k: tf.constant(v) for k, v in w.items()}, arch, tf.constant(enc)).numpy()
  np.testing.assert_allclose(logits_tf, params["logits"], rtol=1e-5, atol=1e-4)
  # Without the prior the same MLP weights give another greedy choice on most rows.
  plain = dict(arch)
  plain.pop("default_prior")
  other = regalloc_architectures.ColumnScorer(plain, w)
  assert np.mean(other.greedy(other.dist_params(enc)) == col_np) < 0.5


def test_the_scale_is_a_trained_weight():
  import tensorflow as tf
  from mlgo.training import networks
  feats = _features(n=64)
  spec, enc = _spec(feats, prior=2.5)
  arch = spec["architecture"]
  obs_spec = tf.TensorSpec((enc.shape[1],), tf.float32)
  actor = networks.make_actor(arch, obs_spec)
  actor.create_variables()
  w = regalloc_architectures.init_eviction_weights(arch, seed=0)
  networks.set_actor_weights(actor, arch, w)
  assert networks.actor_weights(actor, arch)["prior/scale"].tolist() == [2.5]
  assert any(v.name.startswith("prior_scale") or "prior_scale" in v.name
             for v in actor.trainable_variables)
  dist, _ = actor(tf.constant(enc))
  np.testing.assert_array_equal(tf.argmax(dist.logits, -1).numpy(),
                                regalloc_architectures.default_column_np(enc, arch))
  # An old policy (no prior in its config) has no such weight and is unchanged.
  plain = dict(arch)
  plain.pop("default_prior")
  assert "prior/scale" not in regalloc_architectures.init_eviction_weights(plain, seed=0)


def test_saved_model_decides_as_the_numpy_policy(tmp_path):
  """The SavedModel (what saved_model_cli AOT-compiles for the release server) carries
  the prior: with the MLP's outputs scaled up to compete with it, its decisions are the
  numpy policy's, which follow the rule on some rows and the MLP on others."""
  import tensorflow as tf
  from mlgo.policy import policy_io
  feats = _features(n=200, seed=5)
  spec, enc = _spec(feats, prior=2.0)
  w = regalloc_architectures.init_eviction_weights(spec["architecture"], seed=4)
  w["out/kernel"] = w["out/kernel"] * 200.0
  d = policy_io.write_policy_dir(tmp_path / "pol", spec, w)
  pol = policy_io.load_policy(d)
  fn = tf.saved_model.load(str(d / "saved_policy")).signatures["action"]
  rule = regalloc_architectures.default_column_np(enc, spec["architecture"])
  ours, follows_rule = [], 0
  for i in range(len(rule)):
    o = _rows(feats, i)
    a = int(pol.act(o))
    assert int(fn(**{k: tf.constant(v) for k, v in o.items()})["index_to_evict"][0]) == a
    follows_rule += a == rule[i]
  assert 0 < follows_rule < len(rule)


def test_an_ensemble_of_prior_policies_is_the_mean_of_its_members(tmp_path):
  from mlgo.policy import derived, policy_io
  feats = _features(n=120, seed=7)
  spec, enc = _spec(feats, prior=2.0)
  dirs = []
  for i, (hidden, scale) in enumerate((((16, 8), 2.0), ((8, 4), 0.5))):
    arch = dict(spec["architecture"], hidden=list(hidden))
    w = regalloc_architectures.init_eviction_weights(arch, seed=i)
    w["out/kernel"] = w["out/kernel"] * 150.0
    w["prior/scale"] = np.array([scale], np.float32)
    dirs.append(policy_io.write_policy_dir(tmp_path / f"m{i}", dict(spec, architecture=arch),
                                           w, saved_model=False))
  ens = derived.ensemble_policies(dirs, tmp_path / "ens", saved_model=False)
  assert ens.arch.w["prior/scale"].tolist() == [1.25]
  members = [policy_io.load_policy(d) for d in dirs]
  mean = np.mean([m.arch.dist_params(enc)["logits"].astype(np.float64) for m in members], 0)
  got = ens.arch.dist_params(enc)["logits"]
  valid = mean > regalloc_architectures.NEG / 2
  np.testing.assert_allclose(got[valid], mean[valid], rtol=1e-4, atol=1e-4)
