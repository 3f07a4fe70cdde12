"""What training needs to know about a problem, beyond mlgo.problems' description.

A `TrainingAdapter` says which raw features the policy reads, which architecture it
uses (numpy evaluator + TF export in policy_io, tf-agents networks for PPO), how
encoded observations are made, and how rewards are computed from compile results:
  scores(result)           -> {key: score}, lower is better (inlining: module .text;
                              regalloc: per-function cost)
  trajectory_key(module, t) -> which score a trajectory's decisions are credited with
Reward of a key: 1 - (score + d) / (baseline + d). Register adapters for new problems
with `register_adapter` (the regalloc problems plug in here).
"""
import numpy as np

_ADAPTERS = {}


def register_adapter(cls):
  _ADAPTERS[cls.PROBLEM] = cls
  return cls


def get_adapter(problem_name: str, **kwargs) -> "TrainingAdapter":
  if problem_name not in _ADAPTERS:
    # Problem-specific adapters may live in their own modules; import on demand.
    try:
      import importlib  # pylint: disable=import-outside-toplevel
      importlib.import_module(f"mlgo.training.adapters_{problem_name}")
    except ImportError:
      pass
  if problem_name not in _ADAPTERS:
    raise KeyError(f"no training adapter for problem {problem_name!r} "
                   f"(known: {sorted(_ADAPTERS)})")
  return _ADAPTERS[problem_name](**kwargs)


def _spec_json(s):
  return {"name": s.name, "dtype": np.dtype(s.dtype).name, "shape": [int(d) for d in s.shape]}


class TrainingAdapter:
  PROBLEM = ""
  # Raw features never given to the policy (e.g. the default heuristic's own decision).
  EXCLUDE_FEATURES = ()
  REWARD_DELTA = 0.01

  def __init__(self, hidden=(64, 64), exclude_features=None):
    self.hidden = [int(h) for h in hidden]
    if exclude_features is not None:
      self.EXCLUDE_FEATURES = tuple(exclude_features)

  # --- problem description -------------------------------------------------
  def problem(self):
    from mlgo.training import envshim  # pylint: disable=import-outside-toplevel
    _, problems = envshim.env_and_problems()
    return problems.get_problem(self.PROBLEM)

  def policy_features(self, all_features) -> list[dict]:
    """Raw feature specs (json dicts) the policy reads, in input order."""
    out = []
    for s in all_features:
      d = s if isinstance(s, dict) else _spec_json(s)
      if d["name"] not in self.EXCLUDE_FEATURES:
        out.append(d)
    return out

  def architecture(self) -> dict:
    raise NotImplementedError

  # --- tf-agents side ----------------------------------------------------------
  def tf_action_spec(self):
    raise NotImplementedError

  def make_networks(self, observation_spec, action_spec):
    """Actor (distribution) network and value network for PPO."""
    raise NotImplementedError

  def actor_weights(self, actor_net) -> dict:
    """The actor network's weights under the numpy architecture's names."""
    raise NotImplementedError

  def set_actor_weights(self, actor_net, weights: dict):
    raise NotImplementedError

  # --- rewards -----------------------------------------------------------------
  def scores(self, result) -> dict:
    raise NotImplementedError

  def trajectory_key(self, module_name: str, trajectory) -> str:
    return module_name

  def exploration_prob(self, features: dict, eps: float, tau: float):
    """Per-decision probability to leave on the non-default action(s) in behavioral
    cloning (the warm start's exploration), or None for uniform label smoothing."""
    return None

  def reward(self, score: float, baseline: float) -> float:
    d = self.REWARD_DELTA
    return 1.0 - (score + d) / (baseline + d)


class MlpCategoricalAdapter(TrainingAdapter):
  """Discrete action in [0, num_actions), MLP over the flat encoded features."""
  NUM_ACTIONS = 2
  OUTPUT_NAME = "action"

  def architecture(self):
    return {"type": "mlp_categorical", "hidden": self.hidden, "num_actions": self.NUM_ACTIONS,
            "output_name": self.OUTPUT_NAME, "output_dtype": "int64"}

  def tf_action_spec(self):
    from tf_agents.specs import tensor_spec  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    return tensor_spec.BoundedTensorSpec((), tf.int64, 0, self.NUM_ACTIONS - 1,
                                         name=self.OUTPUT_NAME)

  def make_networks(self, observation_spec, action_spec):
    from tf_agents.networks import actor_distribution_network, value_network  # pylint: disable=import-outside-toplevel
    actor = actor_distribution_network.ActorDistributionNetwork(
        observation_spec, action_spec, fc_layer_params=tuple(self.hidden))
    value = value_network.ValueNetwork(observation_spec, fc_layer_params=tuple(self.hidden))
    return actor, value

  def _actor_vars(self, actor_net):
    vs = list(actor_net.trainable_variables)
    n = len(self.hidden)
    if len(vs) != 2 * (n + 1):
      raise ValueError(f"actor network has {len(vs)} variables, expected {2 * (n + 1)}")
    names = []
    for i in range(n):
      names += [f"hidden_{i}/kernel", f"hidden_{i}/bias"]
    names += ["out/kernel", "out/bias"]
    return dict(zip(names, vs))

  def actor_weights(self, actor_net):
    return {k: v.numpy().astype(np.float32) for k, v in self._actor_vars(actor_net).items()}

  def set_actor_weights(self, actor_net, weights):
    for k, v in self._actor_vars(actor_net).items():
      if tuple(v.shape) != tuple(weights[k].shape):
        raise ValueError(f"weight {k}: shape {weights[k].shape} does not fit the network "
                         f"({tuple(v.shape)}); was it trained with other layer sizes?")
      v.assign(weights[k])


@register_adapter
class InliningAdapter(MlpCategoricalAdapter):
  PROBLEM = "inlining"
  OUTPUT_NAME = "inlining_decision"
  EXCLUDE_FEATURES = ("inlining_default",)

  def exploration_prob(self, features, eps, tau):
    # The default inlines iff cost_estimate < threshold. Flipping a call site far from
    # that boundary (inlining a callee that costs hundreds over the threshold) nearly
    # always grows the code and drowns the module's reward in noise; exploring close
    # to the boundary is where a different decision can pay off.
    c = np.asarray(features["cost_estimate"], np.float64).reshape(-1)
    t = np.asarray(features["threshold"], np.float64).reshape(-1)
    return eps * np.exp(-np.abs(c - t) / max(tau, 1e-6))

  def scores(self, result):
    return {result.module.name if hasattr(result.module, "name") else str(result.module):
            float(result.reward["text_size"])}


@register_adapter
class InliningIR2VecAdapter(InliningAdapter):
  """Inlining whose policy also sees the callee's and caller's instruction mix."""
  PROBLEM = "inlining_ir2vec"
