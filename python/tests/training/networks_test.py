"""The trainable networks compute the same function as the numpy evaluators (and the
exported TF graph); masked eviction columns are never sampled or chosen."""
import numpy as np
import pytest

from mlgo.policy import policy_io, regalloc_architectures
from mlgo.problems import get_problem
from mlgo.training import networks
from mlgo.training.testing import fake_eviction_features as _fake_eviction
from mlgo.training.testing import fake_priority_features as _fake_priority
from mlgo.training.testing import fitted_spec as _spec


def test_masked_columns_are_never_sampled_or_chosen():
  rng = np.random.default_rng(0)
  feats = _fake_eviction(300, rng)
  spec, w, enc = _spec("regalloc_eviction", feats, 1)
  w["out/bias"][:] = 5.0
  pol = policy_io.Policy(spec, w)
  params = pol.arch.dist_params(enc)
  mask = feats["mask"].reshape(-1, 33) == 1
  assert np.array_equal(params["logits"] > regalloc_architectures.NEG / 2, mask)
  assert np.isfinite(params["logits"]).all()
  for s in range(20):
    a = pol.arch.sample(params, np.random.default_rng(s))
    assert mask[np.arange(len(a)), a].all()
  g = pol.arch.greedy(params)
  assert mask[np.arange(len(g)), g].all()
  lp = pol.arch.log_prob(params, g)
  assert np.all(lp <= 0) and np.all(np.isfinite(lp))
  assert np.all(pol.arch.entropy({"logits": params["logits"]}) >= 0)


@pytest.mark.parametrize("problem", ["regalloc_eviction", "regalloc_priority", "inlining"])
def test_actor_network_numpy_and_export_agree(problem):
  import tensorflow as tf
  rng = np.random.default_rng(1)
  if problem == "inlining":
    feats = {f.name: rng.integers(0, 50, (64, 1)).astype(np.int64)
             for f in get_problem(problem).features}
  else:
    feats = (_fake_eviction if problem == "regalloc_eviction" else _fake_priority)(64, rng)
  spec, w, enc = _spec(problem, feats, 2)
  w = {k: v + rng.normal(0, 0.3, v.shape).astype(np.float32) for k, v in w.items()}
  arch = spec["architecture"]
  actor = networks.make_actor(arch, tf.TensorSpec([enc.shape[1]], tf.float32))
  actor.create_variables()
  networks.set_actor_weights(actor, arch, w)
  back = networks.actor_weights(actor, arch)
  assert sorted(back) == sorted(w)
  pol = policy_io.Policy(spec, w)
  params = pol.arch.dist_params(enc)
  dist = actor(tf.constant(enc), step_type=None, network_state=())[0]
  # The same distribution in TF (training) and numpy (collection) ...
  if networks.is_categorical(arch):
    tf_logits = dist.logits_parameter().numpy()
    valid = params["logits"] > regalloc_architectures.NEG / 2
    assert np.array_equal(valid, tf_logits > regalloc_architectures.NEG / 2)
    np.testing.assert_allclose(params["logits"][valid], tf_logits[valid], rtol=1e-4, atol=1e-4)
  else:
    np.testing.assert_allclose(params["loc"], dist.mean().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(params["scale"], dist.stddev().numpy(), rtol=1e-5)
  # ... the same log-probabilities of sampled actions, in the distribution's space ...
  a = pol.arch.sample(params, np.random.default_rng(3))
  np.testing.assert_allclose(pol.arch.log_prob(params, a),
                             dist.log_prob(pol.arch.train_actions(a)).numpy(),
                             rtol=1e-3, atol=1e-3)
  # ... and the same greedy decisions in the exported graph and one decision at a time.
  greedy = pol.arch.greedy(params)
  np.testing.assert_allclose(np.asarray(pol.arch.tf_greedy(tf, tf.constant(enc))).reshape(-1),
                             greedy.reshape(-1), rtol=1e-4)
  one = {k: v[5] for k, v in feats.items()}
  np.testing.assert_allclose(pol.act(one), greedy.reshape(-1)[5], rtol=1e-5)


def test_shape_mismatch_is_a_clear_error():
  import tensorflow as tf
  rng = np.random.default_rng(4)
  feats = _fake_priority(16, rng)
  spec, w, enc = _spec("regalloc_priority", feats)
  actor = networks.make_actor(spec["architecture"], tf.TensorSpec([enc.shape[1]], tf.float32))
  actor.create_variables()
  w["hidden_0/kernel"] = w["hidden_0/kernel"][:-1]
  with pytest.raises(ValueError, match="hidden_0/kernel"):
    networks.set_actor_weights(actor, spec["architecture"], w)
