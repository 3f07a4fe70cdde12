"""The update side of PPO: the actor network of a policy's architecture, a value network
(zero unless PPOConfig.use_value_network), Adam and tf-agents' PPOClipAgent, and one
iteration's update on the per-decision arrays of mlgo.training.experience.

Kept apart from the trainer's loop (mlgo.training.ppo: collect, score, checkpoint), so the
update can be checked on its own: ppo_update_test compares it with a plain clipped-
surrogate step on the same batch.

The agent is set up so that each decision is its own one-step episode: discount 0 and
lambda 0 (a decision's return is its reward, already relative to its key's baseline), no
reward or observation normalization inside tf-agents (observations are encoded by the
policy's normalizer), and one epoch per train call, the epochs being run here over
reshuffled decisions. tf-agents still standardizes advantages per minibatch and skips
decisions whose advantage is exactly 0 (as padding); with batch_advantage_normalization
the rewards are standardized over the whole batch first, which keeps them.
"""
import numpy as np

from mlgo.training import networks


class PPOLearner:
  """Networks, optimizer and agent for policies of `spec` with hyperparameters `cfg`
  (a PPOConfig). `checkpoint` holds everything that a resume must restore."""

  def __init__(self, spec: dict, cfg, input_dim: int):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from tf_agents.agents.ppo import ppo_clip_agent  # pylint: disable=import-outside-toplevel
    from tf_agents.trajectories import time_step as ts  # pylint: disable=import-outside-toplevel
    self.cfg = cfg
    tf.random.set_seed(cfg.seed)
    obs_spec = tf.TensorSpec([input_dim], tf.float32, name="observation")
    self.arch = spec["architecture"]
    action_spec = networks.action_spec(self.arch)
    self.actor = networks.make_actor(self.arch, obs_spec)
    if cfg.use_value_network:
      from tf_agents.networks import value_network  # pylint: disable=import-outside-toplevel
      value = value_network.ValueNetwork(obs_spec, fc_layer_params=tuple(self.arch["hidden"]))
    else:
      value = networks.zero_value_network(obs_spec)
    self.optimizer = tf.keras.optimizers.Adam(cfg.learning_rate)
    self.agent = ppo_clip_agent.PPOClipAgent(
        ts.time_step_spec(obs_spec), action_spec, optimizer=self.optimizer,
        actor_net=self.actor, value_net=value,
        importance_ratio_clipping=cfg.importance_ratio_clipping,
        discount_factor=0.0, lambda_value=0.0,
        entropy_regularization=cfg.entropy_regularization,
        value_pred_loss_coef=(cfg.value_pred_loss_coef if cfg.use_value_network else 0.0),
        num_epochs=1, use_gae=False, normalize_rewards=False, normalize_observations=False,
        gradient_clipping=cfg.gradient_clipping,
        compute_value_and_advantage_in_train=True, update_normalizers_in_train=False,
        train_step_counter=tf.Variable(0, dtype=tf.int64, name="train_step"))
    self.agent.initialize()
    self.actor.create_variables(obs_spec)
    self.checkpoint = tf.train.Checkpoint(actor=self.actor, value=value,
                                          optimizer=self.optimizer,
                                          train_step=self.agent.train_step_counter)
    self._train_fn = tf.function(lambda exp, w: self.agent.train(exp, weights=w).loss)

  def weights(self) -> dict:
    """The actor's weights under the policy dir's names."""
    return networks.actor_weights(self.actor, self.arch)

  def set_weights(self, weights: dict):
    networks.set_actor_weights(self.actor, self.arch, weights)

  def train_on(self, exp: dict, rng) -> float:
    """cfg.num_epochs passes over the decisions of `exp` (obs, actions, params, rewards,
    weights), reshuffled with `rng` each pass, in minibatches of cfg.minibatch_rows rows
    of cfg.sequence_length decisions. Returns the mean loss."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from tf_agents.trajectories import trajectory  # pylint: disable=import-outside-toplevel
    T = self.cfg.sequence_length
    n = len(exp["rewards"])
    losses = []
    for _ in range(self.cfg.num_epochs):
      order = rng.permutation(n)
      pad = (-n) % T
      order = np.concatenate([order, order[:pad]]) if pad else order
      w = np.concatenate([exp["weights"][order[:n]], np.zeros(pad, np.float32)])
      rows = order.reshape(-1, T)
      w = w.reshape(-1, T)
      # A dummy last step per row: tf-agents uses the final step only to bootstrap.
      rows = np.concatenate([rows, rows[:, -1:]], axis=1)
      w = np.concatenate([w, np.zeros((len(w), 1), np.float32)], axis=1)
      # Whole minibatches only (zero-weight filler rows): one traced train graph.
      fill = (-len(rows)) % self.cfg.minibatch_rows
      if fill:
        rows = np.concatenate([rows, rows[np.arange(fill) % len(rows)]])
        w = np.concatenate([w, np.zeros((fill, w.shape[1]), np.float32)])
      for s in range(0, len(rows), self.cfg.minibatch_rows):
        r = rows[s:s + self.cfg.minibatch_rows]
        b = r.shape
        mid = tf.ones(b, tf.int32)
        traj = trajectory.Trajectory(
            step_type=mid, observation=tf.constant(exp["obs"][r]),
            action=tf.constant(exp["actions"][r]),
            policy_info={"dist_params": {k: tf.constant(v[r].astype(np.float32))
                                         for k, v in exp["params"].items()}},
            next_step_type=mid, reward=tf.constant(exp["rewards"][r]),
            discount=tf.ones(b, tf.float32))
        losses.append(float(self._train_fn(traj, tf.constant(w[s:s + len(r)]))))
    return float(np.mean(losses)) if losses else float("nan")
