"""The tf-agents networks that train each policy architecture's weights.

The numpy evaluator and the SavedModel export of an architecture live in
mlgo.policy.architectures; here is the trainable side of the same function, as a
tf-agents actor network emitting the action distribution, so PPO (tf-agents'
PPOClipAgent) and behavioral cloning train every problem the same way:

  mlp_categorical         tf-agents ActorDistributionNetwork (MLP + categorical head)
  regalloc_column_scorer  one MLP shared by the 33 columns, masked logits, Categorical
  regalloc_log2_normal    MLP -> Normal(loc, softplus(std)) over log2(priority)

`actor_weights` / `set_actor_weights` translate between a network's variables and the
policy dir's weight names (weights.npz), so a policy moves between numpy collection,
TF training and export without conversion code per problem.
"""
import numpy as np

from mlgo.policy import architectures, regalloc_architectures


def action_spec(arch: dict):
  """The tf-agents action spec of an architecture (the distribution's space)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tf_agents.specs import tensor_spec  # pylint: disable=import-outside-toplevel
  name = arch.get("output_name", "action")
  if arch["type"] in (architectures.MlpCategorical.TYPE,
                      regalloc_architectures.ColumnScorer.TYPE):
    return tensor_spec.BoundedTensorSpec((), tf.int64, 0, int(arch["num_actions"]) - 1,
                                         name=name)
  if arch["type"] == regalloc_architectures.PriorityLog2Normal.TYPE:
    return tensor_spec.BoundedTensorSpec((), tf.float32, 0.0,
                                         regalloc_architectures.MAX_LOG2_PRIORITY, name=name)
  raise ValueError(f"no trainable network for architecture {arch['type']!r}")


def is_categorical(arch: dict) -> bool:
  return arch["type"] in (architectures.MlpCategorical.TYPE,
                          regalloc_architectures.ColumnScorer.TYPE)


def _mlp_names(n_hidden: int) -> list:
  names = []
  for i in range(n_hidden):
    names += [f"hidden_{i}/kernel", f"hidden_{i}/bias"]
  return names + ["out/kernel", "out/bias"]


def _weight_shapes(arch: dict, input_dim: int) -> dict:
  # Same shapes as the architecture's own initializer (no second copy of the layout).
  return {k: v.shape for k, v in architectures.architecture_class(arch["type"])
          .init_weights(arch, input_dim, 0).items()}


def make_actor(arch: dict, observation_spec):
  """The actor network of `arch` for encoded observations of `observation_spec`."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_probability as tfp  # pylint: disable=import-outside-toplevel
  from tf_agents.networks import actor_distribution_network, network, utils  # pylint: disable=import-outside-toplevel
  from tf_agents.utils import nest_utils  # pylint: disable=import-outside-toplevel

  spec = action_spec(arch)
  if arch["type"] == architectures.MlpCategorical.TYPE:
    return actor_distribution_network.ActorDistributionNetwork(
        observation_spec, spec, fc_layer_params=tuple(arch["hidden"]))

  input_dim = int(observation_spec.shape[-1])

  class _NamedWeightsNetwork(network.Network):
    """Variables named as in weights.npz; the forward pass is the architecture's TF one."""

    def __init__(self):
      super().__init__(observation_spec, state_spec=(), name=arch["type"])
      self.w = {}
      for k, shape in _weight_shapes(arch, input_dim).items():
        self.w[k] = self.add_weight(name=k.replace("/", "_"), shape=shape,
                                    initializer="zeros", trainable=True)

    def call(self, observations, step_type=None, network_state=(), training=False):
      del step_type, training
      outer = nest_utils.get_outer_rank(observations, self.input_tensor_spec)
      squash = utils.BatchSquash(outer)
      x = squash.flatten(tf.cast(observations, tf.float32))
      if arch["type"] == regalloc_architectures.ColumnScorer.TYPE:
        logits = squash.unflatten(regalloc_architectures.scorer_logits_tf(tf, self.w, arch, x))
        return tfp.distributions.Categorical(logits=logits, dtype=tf.int64), network_state
      loc = squash.unflatten(regalloc_architectures.priority_mlp_tf(tf, self.w, arch, x))
      scale = tf.nn.softplus(self.w["std/bias"][0]) * tf.ones_like(loc)
      return tfp.distributions.Normal(loc=loc, scale=scale), network_state

  return _NamedWeightsNetwork()


def _variables(actor, arch: dict) -> dict:
  if hasattr(actor, "w"):
    return dict(actor.w)
  vs = list(actor.trainable_variables)
  names = _mlp_names(len(arch["hidden"]))
  if len(vs) != len(names):
    raise ValueError(f"actor network has {len(vs)} variables, expected {len(names)}")
  return dict(zip(names, vs))


def actor_weights(actor, arch: dict) -> dict:
  """The actor's weights under the policy dir's names (float32 numpy)."""
  return {k: v.numpy().astype(np.float32) for k, v in _variables(actor, arch).items()}


def set_actor_weights(actor, arch: dict, weights: dict):
  for k, v in _variables(actor, arch).items():
    if k not in weights:
      raise ValueError(f"weights lack {k!r}; is the policy of another architecture?")
    if tuple(v.shape) != tuple(weights[k].shape):
      raise ValueError(f"weight {k}: shape {weights[k].shape} does not fit the network "
                       f"({tuple(v.shape)}); was it trained with other layer sizes?")
    v.assign(weights[k])


def actor_with_weights(arch: dict, input_dim: int, weights: dict):
  """The actor of `arch` for encoded observations of width `input_dim`, holding
  `weights` (policy dir names): what BC and probe fine-tuning start from."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  actor = make_actor(arch, tf.TensorSpec([input_dim], tf.float32))
  actor.create_variables()
  set_actor_weights(actor, arch, weights)
  return actor


def zero_value_network(observation_spec):
  """A value network that predicts 0, for PPO without a learned baseline (the rewards
  are already relative to a per-key baseline)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tf_agents.networks import network  # pylint: disable=import-outside-toplevel

  class ZeroValueNetwork(network.Network):
    """Predicts 0: advantages are the (normalized) rewards themselves."""

    def __init__(self, input_tensor_spec):
      super().__init__(input_tensor_spec, state_spec=(), name="ZeroValueNetwork")
      self._rank = len(tf.nest.flatten(input_tensor_spec)[0].shape)

    def call(self, observation, step_type=None, network_state=(), training=False):
      x = tf.nest.flatten(observation)[0]
      outer = tf.shape(x)[:tf.rank(x) - self._rank]
      return tf.zeros(outer, tf.float32), network_state

  return ZeroValueNetwork(observation_spec)
