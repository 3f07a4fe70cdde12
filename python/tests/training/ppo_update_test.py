"""The PPO update (tf-agents, as the trainer configures it) is the textbook clipped-
surrogate step: on the same batch it moves an eviction policy the way a plain
implementation does (clipped ratio times standardized advantage, entropy bonus, both
weighted per decision; global-norm gradient clipping; Adam), and it raises the
probability of the decisions with positive advantage."""
import numpy as np

from mlgo.policy import policy_io, regalloc_architectures
from mlgo.training import learner as learner_lib
from mlgo.training import ppo
from mlgo.training.testing import fake_eviction_features, fitted_spec


def _batch(seed=0, n=1500):
  rng = np.random.default_rng(seed)
  feats = fake_eviction_features(n, rng)
  spec, w0, enc = fitted_spec("regalloc_eviction", feats, seed)
  # Away from the initial (near uniform) policy, as a warm start is.
  w0 = {k: (v + rng.normal(0, 0.3, v.shape)).astype(np.float32) for k, v in w0.items()}
  arch = policy_io.Policy(spec, w0).arch
  params = arch.dist_params(enc)
  acts = arch.sample(params, rng).astype(np.int64)
  # A learnable signal: evicting a column with few defs and uses pays off.
  nd = feats["nr_defs_and_uses"].reshape(n, -1)[np.arange(n), acts]
  r = np.where(nd < np.median(nd), 1.0, -1.0) + rng.normal(0, 0.3, n)
  r = ((r - r.mean()) / r.std()).astype(np.float32)
  wts = rng.uniform(0.5, 1.5, n).astype(np.float32)
  wts *= len(wts) / wts.sum()
  exp = {"obs": enc, "actions": acts, "params": {"logits": params["logits"]},
         "rewards": r, "weights": wts}
  return spec, w0, exp


def _plain_ppo(spec, w0, exp, cfg, seed):
  """The pre-merge trainer's step, written out: one Adam over num_epochs passes of
  512-decision minibatches."""
  import tensorflow as tf
  v = {k: tf.Variable(x) for k, x in w0.items()}
  opt = tf.keras.optimizers.Adam(cfg.learning_rate)
  arch = spec["architecture"]
  n = len(exp["rewards"])
  lp_all = policy_io.Policy(spec, w0).arch._logp(exp["params"])
  old_lp = lp_all[np.arange(n), exp["actions"]].astype(np.float32)
  eps = cfg.importance_ratio_clipping

  def step(enc, act, olp, adv, w):
    with tf.GradientTape() as tape:
      lg = regalloc_architectures.scorer_logits_tf(tf, v, arch, enc)
      lpa = tf.nn.log_softmax(lg, axis=-1)
      lp = tf.gather(lpa, act, axis=1, batch_dims=1)
      valid = tf.cast(lg > regalloc_architectures.NEG / 2, lpa.dtype)
      ent = -tf.reduce_sum(tf.exp(lpa) * lpa * valid, axis=-1)
      ratio = tf.exp(lp - olp)
      surr = tf.minimum(ratio * adv, tf.clip_by_value(ratio, 1 - eps, 1 + eps) * adv)
      loss = (-tf.reduce_mean(w * surr)
              - cfg.entropy_regularization * tf.reduce_mean(w * ent))
    g, _ = tf.clip_by_global_norm(tape.gradient(loss, list(v.values())),
                                  cfg.gradient_clipping)
    opt.apply_gradients(zip(g, list(v.values())))

  rng = np.random.default_rng(seed)
  mb = cfg.minibatch_rows * cfg.sequence_length
  for _ in range(cfg.num_epochs):
    perm = rng.permutation(n)
    for s in range(0, n, mb):
      b = perm[s:s + mb]
      step(tf.constant(exp["obs"][b]), tf.constant(exp["actions"][b]),
           tf.constant(old_lp[b]), tf.constant(exp["rewards"][b]),
           tf.constant(exp["weights"][b]))
  return {k: x.numpy() for k, x in v.items()}


def _moves(spec, w0, w1, exp):
  """(KL from w0 to w1, weighted mean of advantage x change in log-prob of the action)."""
  n = len(exp["rewards"])
  lp0 = policy_io.Policy(spec, w0).arch._logp(exp["params"])
  a1 = policy_io.Policy(spec, w1).arch
  lp1 = a1._logp(a1.dist_params(exp["obs"]))
  p0 = np.exp(lp0)
  kl = float((p0 * np.where(p0 > 0, lp0 - lp1, 0.0)).sum(-1).mean())
  d = lp1[np.arange(n), exp["actions"]] - lp0[np.arange(n), exp["actions"]]
  return kl, float(np.mean(exp["weights"] * exp["rewards"] * d))


def test_tf_agents_update_is_the_clipped_surrogate_step():
  spec, w0, exp = _batch()
  cfg = ppo.PPOConfig(num_epochs=3, sequence_length=16, minibatch_rows=32, seed=0)
  learner = learner_lib.PPOLearner(spec, cfg, exp["obs"].shape[1])
  learner.set_weights(w0)
  loss = learner.train_on(exp, np.random.default_rng(0))
  assert np.isfinite(loss)
  w_agent = learner.weights()
  w_plain = _plain_ppo(spec, w0, exp, cfg, 1)
  keys = sorted(w0)
  d_agent = np.concatenate([(w_agent[k] - w0[k]).ravel() for k in keys])
  d_plain = np.concatenate([(w_plain[k] - w0[k]).ravel() for k in keys])
  assert np.linalg.norm(d_agent) > 0
  cos = d_agent @ d_plain / (np.linalg.norm(d_agent) * np.linalg.norm(d_plain))
  assert cos > 0.9, cos
  kl_a, gain_a = _moves(spec, w0, w_agent, exp)
  kl_p, gain_p = _moves(spec, w0, w_plain, exp)
  # Both raise the probability of positive-advantage decisions, by about as much.
  assert gain_a > 0 and gain_p > 0
  assert 0.5 < gain_a / gain_p < 2.0, (gain_a, gain_p)
  assert 0.5 < kl_a / kl_p < 2.0, (kl_a, kl_p)


def test_entropy_bonus_raises_entropy_when_advantages_carry_no_signal():
  spec, w0, exp = _batch(seed=3, n=600)
  exp["rewards"] = np.random.default_rng(5).choice([-1.0, 1.0], 600).astype(np.float32)
  cfg = ppo.PPOConfig(num_epochs=2, sequence_length=16, minibatch_rows=32, seed=0,
                      entropy_regularization=0.1)
  learner = learner_lib.PPOLearner(spec, cfg, exp["obs"].shape[1])
  learner.set_weights(w0)
  learner.train_on(exp, np.random.default_rng(0))
  arch0 = policy_io.Policy(spec, w0).arch
  arch1 = policy_io.Policy(spec, learner.weights()).arch
  ent0 = arch0.entropy(arch0.dist_params(exp["obs"])).mean()
  ent1 = arch1.entropy(arch1.dist_params(exp["obs"])).mean()
  assert ent1 > ent0 + 0.01, (ent0, ent1)


def test_decisions_with_advantage_exactly_zero_are_not_trained_on():
  # tf-agents takes a step whose return and advantage are both 0 for padding; this is
  # why the trainer can standardize rewards over the batch first
  # (PPOConfig.batch_advantage_normalization), which keeps those decisions.
  spec, w0, exp = _batch(seed=4, n=300)
  exp["rewards"] = np.zeros_like(exp["rewards"])
  cfg = ppo.PPOConfig(num_epochs=1, sequence_length=16, minibatch_rows=32, seed=0,
                      entropy_regularization=0.1)
  learner = learner_lib.PPOLearner(spec, cfg, exp["obs"].shape[1])
  learner.set_weights(w0)
  learner.train_on(exp, np.random.default_rng(0))
  w1 = learner.weights()
  assert all(np.array_equal(w0[k], w1[k]) for k in w0)
