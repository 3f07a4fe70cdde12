"""Policy network architectures: numpy evaluators (the collection hot path) and their
TF forward passes (the SavedModel export), registered by name.

A policy.json names its architecture ("type"); `architecture_class(type)` returns the
class. Each maps encoded observations (float32 [N, D], see normalization) to an action
distribution: dist_params / greedy / sample / log_prob / entropy in numpy, tf_greedy in
TF. `train_actions` maps the actions sent to the compiler into the distribution's space
(identity except for priorities, which are sampled as log2). The tf-agents networks that
train the same weights live in mlgo.training.networks.

  mlp_categorical   MLP + softmax over `num_actions` (inlining: inline or not)
  mlp_normal        MLP giving a Normal's mean (a generic continuous action)
  regalloc_column_scorer  eviction: one MLP shared by the 33 columns, masked softmax
  regalloc_log2_normal    priority: MLP -> Normal over log2(priority)

The regalloc architectures (eviction's column scorer, priority's log2 Normal) are in
regalloc_architectures; the package's __init__ imports it, so every type is registered
before any policy is loaded.
"""
import numpy as np

_ARCHITECTURES = {}


def architecture_class(name: str):
  if name not in _ARCHITECTURES:
    raise ValueError(f"policy.json names an unknown architecture {name!r} "
                     f"(known: {sorted(_ARCHITECTURES)})")
  return _ARCHITECTURES[name]


def register_architecture(cls):
  _ARCHITECTURES[cls.TYPE] = cls
  return cls


def relu_np(x):
  return np.maximum(x, 0)


class Architecture:
  """Maps encoded observations (float32 [N, D]) to an action distribution."""
  TYPE = ""
  # Names of dist_params entries that parameterize the distribution (what PPO stores
  # per decision); other entries (e.g. the eviction mask) are helpers.
  DIST_PARAMS = ("logits",)
  # Feature encodings (mlgo.policy.normalization.ENCODINGS) the architecture can read:
  # the column architectures slice the quantile encoding's three floats per element.
  ENCODINGS = ("quantile", "slog")

  def __init__(self, config: dict, weights: dict):
    self.config = config
    self.w = weights

  # numpy
  def dist_params(self, enc: np.ndarray) -> dict:
    raise NotImplementedError

  def greedy(self, params: dict) -> np.ndarray:
    raise NotImplementedError

  def sample(self, params: dict, rng: np.random.Generator) -> np.ndarray:
    raise NotImplementedError

  def log_prob(self, params: dict, actions: np.ndarray) -> np.ndarray:
    raise NotImplementedError

  def entropy(self, params: dict) -> np.ndarray:
    raise NotImplementedError

  def train_actions(self, actions) -> np.ndarray:
    """Actions as sent to the compiler -> values in the distribution's space."""
    return np.asarray(actions)

  # tensorflow
  def tf_greedy(self, tf, enc):
    raise NotImplementedError

  @staticmethod
  def init_weights(config: dict, input_dim: int, seed: int = 0) -> dict:
    """Fresh weights (what behavioral cloning and PPO start from)."""
    raise NotImplementedError


def _glorot_mlp(config: dict, input_dim: int, seed: int, n_out: int) -> dict:
  rng = np.random.default_rng(seed)
  w, d = {}, input_dim
  for i, h in enumerate(config["hidden"]):
    lim = np.sqrt(6.0 / (d + h))
    w[f"hidden_{i}/kernel"] = rng.uniform(-lim, lim, (d, h)).astype(np.float32)
    w[f"hidden_{i}/bias"] = np.zeros(h, np.float32)
    d = h
  lim = np.sqrt(6.0 / (d + n_out))
  w["out/kernel"] = rng.uniform(-lim, lim, (d, n_out)).astype(np.float32) * 0.1
  w["out/bias"] = np.zeros(n_out, np.float32)
  return w


def mlp_np(w, n_hidden, x):
  h = x
  for i in range(n_hidden):
    h = relu_np(h @ w[f"hidden_{i}/kernel"] + w[f"hidden_{i}/bias"])
  return h


def mlp_tf(tf, w, n_hidden, x):
  h = x
  for i in range(n_hidden):
    h = tf.nn.relu(tf.matmul(h, tf.constant(w[f"hidden_{i}/kernel"]))
                   + tf.constant(w[f"hidden_{i}/bias"]))
  return h


@register_architecture
class MlpCategorical(Architecture):
  """MLP with ReLU, softmax over `num_actions` (action = argmax or a sample)."""
  TYPE = "mlp_categorical"

  def _nh(self):
    return len(self.config["hidden"])

  def dist_params(self, enc):
    h = mlp_np(self.w, self._nh(), enc)
    return {"logits": h @ self.w["out/kernel"] + self.w["out/bias"]}

  def greedy(self, params):
    return np.argmax(params["logits"], axis=-1).astype(np.int64)

  def sample(self, params, rng):
    lg = params["logits"].astype(np.float64)
    p = np.exp(lg - lg.max(axis=-1, keepdims=True))
    c = np.cumsum(p, axis=-1)
    u = rng.random(lg.shape[:-1] + (1,)) * c[..., -1:]
    return (u > c).sum(axis=-1).astype(np.int64)

  @staticmethod
  def _logp(params):
    lg = params["logits"].astype(np.float64)
    m = lg.max(axis=-1, keepdims=True)
    return lg - m - np.log(np.exp(lg - m).sum(axis=-1, keepdims=True))

  def log_prob(self, params, actions):
    lp = self._logp(params)
    return np.take_along_axis(lp, actions.astype(np.int64)[..., None], -1)[..., 0]

  def entropy(self, params):
    lp = self._logp(params)
    return -(np.exp(lp) * lp).sum(axis=-1)

  def tf_logits(self, tf, enc):
    h = mlp_tf(tf, self.w, self._nh(), enc)
    return tf.matmul(h, tf.constant(self.w["out/kernel"])) + tf.constant(self.w["out/bias"])

  def tf_greedy(self, tf, enc):
    return tf.argmax(self.tf_logits(tf, enc), axis=-1, output_type=tf.int64)

  @staticmethod
  def init_weights(config, input_dim, seed=0):
    return _glorot_mlp(config, input_dim, seed, config["num_actions"])


@register_architecture
class MlpNormal(Architecture):
  """MLP with ReLU giving the mean of a Normal; std = softplus(std_param) (continuous)."""
  TYPE = "mlp_normal"
  DIST_PARAMS = ("loc", "scale")

  def _nh(self):
    return len(self.config["hidden"])

  def dist_params(self, enc):
    h = mlp_np(self.w, self._nh(), enc)
    loc = h @ self.w["out/kernel"] + self.w["out/bias"]
    scale = np.broadcast_to(np.log1p(np.exp(self.w["std/bias"])), loc.shape)
    return {"loc": loc, "scale": scale}

  def greedy(self, params):
    return params["loc"].astype(np.float32)

  def sample(self, params, rng):
    return (params["loc"] + params["scale"] * rng.standard_normal(params["loc"].shape)
            ).astype(np.float32)

  def log_prob(self, params, actions):
    z = (actions - params["loc"]) / params["scale"]
    return (-0.5 * z * z - np.log(params["scale"]) - 0.5 * np.log(2 * np.pi)).sum(-1)

  def entropy(self, params):
    return (0.5 + 0.5 * np.log(2 * np.pi) + np.log(params["scale"])).sum(-1)

  def tf_greedy(self, tf, enc):
    h = mlp_tf(tf, self.w, self._nh(), enc)
    return tf.matmul(h, tf.constant(self.w["out/kernel"])) + tf.constant(self.w["out/bias"])

  @staticmethod
  def init_weights(config, input_dim, seed=0):
    n = int(config.get("num_outputs", 1))
    w = _glorot_mlp(config, input_dim, seed, n)
    w["std/bias"] = np.zeros(n, np.float32)
    return w
