"""Register-allocation policy architectures: the eviction column scorer and the
priority log2 Normal, with the column encoding, mask and default-rule helpers they share
between numpy (collection) and TF (export), registered with architectures' registry.

Eviction: the compiler sends 20 per-column features, each a [1, 33] tensor (32
interfering candidates + the live range being allocated), plus the scalar `progress`.
The shared MLP scores each column from that column's encoded features and the encoded
progress; columns whose `mask` is 0 get -1e9 before the softmax, so an invalid index can
be neither sampled nor chosen greedily. The encoded input (3 floats per scalar,
feature-major) is reshaped to [B, 33, 3 * 20] per column; the mask is recovered exactly
from the encoded mask feature (its standardized log value: 0 and 1 map to two distinct
values, split by `mask_z_threshold`). Two options narrow or steer it with the default
heuristic's own structure: `cost_mask` (only columns the default could evict) and
`default_prior` (a trainable bonus on the column the default-equivalent rule picks).

Priority: the action is the priority itself, 2 ** sample (what the compiler's priority
advisor expects: a float, cast to unsigned).
"""
import numpy as np

from mlgo.policy import normalization
from mlgo.policy.architectures import Architecture, mlp_tf, register_architecture, relu_np

E = normalization.ENCODED_PER_SCALAR
COLUMNS = 33
NEG = -1e9

MAX_LOG2_PRIORITY = 32.0

# LLVM sends NaN for some normalized features (e.g. use_def_density when an interval
# has infinite spill weight) and may send inf: encoded values are made finite and
# bounded before the network sees them, the same way in numpy and TF.
ENC_CLIP = 10.0


def clean_np(enc):
  e = np.asarray(enc, np.float32)
  e = np.where(e != e, np.float32(0), e)
  return np.clip(e, -ENC_CLIP, ENC_CLIP, out=e)


def clean_tf(tf, enc):
  enc = tf.where(tf.math.is_nan(enc), tf.zeros_like(enc), enc)
  return tf.clip_by_value(enc, -ENC_CLIP, ENC_CLIP)


def column_inputs_np(enc: np.ndarray, n_col_features: int, copies: int = 1):
  """enc [B, D] -> per-column inputs [B, 33, 3F + 3] (column features + progress).

  copies > 1 (an ensemble of members with their own normalizations): enc holds one
  encoding a member side by side; each column gets every member's inputs, in order."""
  if copies > 1:
    return np.concatenate([column_inputs_np(part, n_col_features)
                           for part in np.split(np.asarray(enc), copies, axis=1)], axis=-1)
  enc = clean_np(enc)
  b = enc.shape[0]
  k, f = n_col_features * COLUMNS * E, n_col_features * E
  # Filled in place (not transpose + broadcast + concatenate): the same array, C order,
  # in about half the time of the per-decision path.
  out = np.empty((b, COLUMNS, f + E), enc.dtype)
  out[:, :, :f].reshape(b, COLUMNS, n_col_features, E)[...] = (
      enc[:, :k].reshape(b, n_col_features, COLUMNS, E).transpose(0, 2, 1, 3))
  out[:, :, f:] = enc[:, None, k:k + E]
  return out


def _column_z_np(enc, i):
  """The standardized log value of column feature i in each of the 33 columns."""
  return enc[:, i * COLUMNS * E:(i + 1) * COLUMNS * E].reshape(-1, COLUMNS, E)[:, :, 2]


_LAST_COLUMN = np.arange(COLUMNS) == COLUMNS - 1


def mask_np(enc: np.ndarray, config: dict) -> np.ndarray:
  """Columns the policy may choose: the compiler's mask, narrowed by the cost rule when
  the config has one (see eviction_architecture). For an ensemble of several encodings,
  the config's thresholds are the first member's and read the first encoding."""
  m = _column_z_np(enc, config["mask_feature_index"]) > config["mask_z_threshold"]
  cm = config.get("cost_mask")
  if cm:
    d = _column_z_np(enc, cm["density_index"])
    keep = ((d < d[:, -1:])
            | (_column_z_np(enc, cm["urgent_index"]) > cm["urgent_z"])
            | (_column_z_np(enc, cm["hint_index"]) > cm["hint_z"])
            | _LAST_COLUMN[None, :] | ~m[:, -1:])
    m = m & keep
  return m


def column_inputs_tf(tf, enc, n_col_features: int, copies: int = 1):
  if copies > 1:
    return tf.concat([column_inputs_tf(tf, part, n_col_features)
                      for part in tf.split(enc, copies, axis=1)], axis=-1)
  enc = clean_tf(tf, enc)
  b = tf.shape(enc)[0]
  cols = tf.reshape(enc[:, :n_col_features * COLUMNS * E], [b, n_col_features, COLUMNS, E])
  cols = tf.reshape(tf.transpose(cols, [0, 2, 1, 3]), [b, COLUMNS, n_col_features * E])
  prog = enc[:, n_col_features * COLUMNS * E:n_col_features * COLUMNS * E + E]
  prog = tf.tile(prog[:, None, :], [1, COLUMNS, 1])
  return tf.concat([cols, prog], axis=-1)


def _column_z_tf(tf, enc, i):
  return tf.reshape(enc[:, i * COLUMNS * E:(i + 1) * COLUMNS * E], [-1, COLUMNS, E])[:, :, 2]


def mask_tf(tf, enc, config: dict):
  """mask_np in TF (the SavedModel, and the network tf-agents trains)."""
  m = _column_z_tf(tf, enc, config["mask_feature_index"]) > config["mask_z_threshold"]
  cm = config.get("cost_mask")
  if cm:
    d = _column_z_tf(tf, enc, cm["density_index"])
    keep = ((d < d[:, -1:])
            | (_column_z_tf(tf, enc, cm["urgent_index"]) > cm["urgent_z"])
            | (_column_z_tf(tf, enc, cm["hint_index"]) > cm["hint_z"])
            | tf.constant(_LAST_COLUMN)[None, :] | tf.logical_not(m[:, -1:]))
    m = tf.logical_and(m, keep)
  return m


# The default prior (eviction_architecture(default_prior=...)): the column that the
# default-equivalent rule picks (mlgo.problems.regalloc.eviction_default, which is
# default_rule_columns on the raw features), found on the encoded features. Within one
# decision every column of a feature has the same normalization, so the encoded values
# keep the raw values' order and ties. NaN densities (LLVM's unspillable ranges) encode
# as 0, so on those the prior can differ from the raw rule.
_CANDIDATES = COLUMNS - 1


def _keep_lowest(c, v):
  """Of the columns c ([B, n] bool), those with the lowest v; NaN values rank last."""
  ok = c & ~np.isnan(v)
  low = np.where(ok, v, np.inf).min(axis=1, keepdims=True)
  return np.where(ok.any(axis=1, keepdims=True), ok & (v <= low), c)


def default_rule_columns(valid, hints, density) -> np.ndarray:
  """[B] int64: the default-equivalent eviction rule for B decisions, given per-column
  validity and the nr_broken_hints and use_def_density values ([B, 33], raw or any
  order-keeping transform). Among the valid candidates 0..31: fewest broken hints, then
  the lowest density, then the lowest index; the live range itself (32) instead when no
  candidate is valid, or when it is valid and the chosen one is not lighter than it."""
  valid = np.asarray(valid, bool)
  hints, density = np.asarray(hints), np.asarray(density)
  cm = valid[:, :_CANDIDATES]
  c = _keep_lowest(_keep_lowest(cm, hints[:, :_CANDIDATES]), density[:, :_CANDIDATES])
  best = np.argmax(c, axis=1)      # the first remaining column
  any_valid = cm.any(axis=1)
  d_best = np.take_along_axis(density, best[:, None], axis=1)[:, 0]
  own = ~any_valid | (valid[:, -1] & (d_best >= density[:, -1]))
  return np.where(own, _CANDIDATES, best).astype(np.int64)


def default_column_np(enc: np.ndarray, config: dict) -> np.ndarray:
  """[B] int64: the default prior's column for each encoded observation."""
  enc = clean_np(enc)
  dp = config["default_prior"]
  return default_rule_columns(
      _column_z_np(enc, config["mask_feature_index"]) > config["mask_z_threshold"],
      _column_z_np(enc, dp["hint_index"]), _column_z_np(enc, dp["density_index"]))


def default_column_tf(tf, enc, config: dict):
  """default_column_np in TF (the encoded values are finite: no NaN ranking needed)."""
  enc = clean_tf(tf, enc)
  dp = config["default_prior"]
  m = _column_z_tf(tf, enc, config["mask_feature_index"]) > config["mask_z_threshold"]
  h = _column_z_tf(tf, enc, dp["hint_index"])
  d = _column_z_tf(tf, enc, dp["density_index"])
  cm = m[:, :_CANDIDATES]
  big = tf.constant(np.inf, h.dtype)
  hc = tf.where(cm, h[:, :_CANDIDATES], big)
  c1 = tf.logical_and(cm, hc <= tf.reduce_min(hc, axis=1, keepdims=True))
  dc = tf.where(c1, d[:, :_CANDIDATES], big)
  c2 = tf.logical_and(c1, dc <= tf.reduce_min(dc, axis=1, keepdims=True))
  # The first True: argmin over the index where true, a large number elsewhere (unique
  # minimum, so no reliance on how argmax breaks ties).
  idx = tf.range(_CANDIDATES, dtype=tf.int32)[None, :]
  best = tf.argmin(tf.where(c2, idx, tf.fill(tf.shape(c2), COLUMNS)), axis=1,
                   output_type=tf.int32)
  any_valid = tf.reduce_any(cm, axis=1)
  d_best = tf.gather(d, best, axis=1, batch_dims=1)
  take_own = tf.logical_and(m[:, -1], tf.logical_or(tf.logical_not(any_valid),
                                                     d_best >= d[:, -1]))
  own = tf.logical_or(take_own, tf.logical_not(any_valid))
  return tf.where(own, tf.fill(tf.shape(best), _CANDIDATES), best)


def _prior_np(w, config, enc):
  if "default_prior" not in config:
    return 0.0
  return np.eye(COLUMNS, dtype=np.float32)[default_column_np(enc, config)] * w["prior/scale"][0]


def _prior_tf(tf, w, config, enc):
  if "default_prior" not in config:
    return 0.0
  return tf.one_hot(default_column_tf(tf, enc, config), COLUMNS) * w["prior/scale"][0]


def scorer_logits_tf(tf, w, config, enc):
  """TF forward pass; `w` maps weight names to tensors (constants or variables)."""
  x = column_inputs_tf(tf, enc, config["n_column_features"], config.get("input_copies", 1))
  h = x
  for i in range(len(config["hidden"])):
    h = tf.nn.relu(tf.einsum("bcd,de->bce", h, w[f"hidden_{i}/kernel"]) + w[f"hidden_{i}/bias"])
  logits = tf.einsum("bcd,de->bce", h, w["out/kernel"])[:, :, 0] + w["out/bias"][0]
  logits = logits + _prior_tf(tf, w, config, enc)
  m = mask_tf(tf, enc, config)
  return tf.where(m, logits, tf.fill(tf.shape(logits), tf.constant(NEG, logits.dtype)))


@register_architecture
class ColumnScorer(Architecture):
  TYPE = "regalloc_column_scorer"
  ENCODINGS = ("quantile",)

  def dist_params(self, enc):
    c = self.config
    h = column_inputs_np(np.asarray(enc, np.float32), c["n_column_features"],
                         c.get("input_copies", 1))
    for i in range(len(c["hidden"])):
      h = relu_np(h @ self.w[f"hidden_{i}/kernel"] + self.w[f"hidden_{i}/bias"])
    logits = (h @ self.w["out/kernel"])[..., 0] + self.w["out/bias"][0]
    logits = logits + _prior_np(self.w, c, np.asarray(enc, np.float32))
    m = mask_np(enc, c)
    return {"logits": np.where(m, logits, NEG).astype(np.float32),
            "mask": m.astype(np.float32)}

  def greedy(self, params):
    return np.argmax(params["logits"], axis=-1).astype(np.int64)

  def _logp(self, params):
    lg = params["logits"].astype(np.float64)
    m = lg.max(axis=-1, keepdims=True)
    return lg - m - np.log(np.exp(lg - m).sum(axis=-1, keepdims=True))

  @staticmethod
  def _valid(params):
    # From the logits, so stored PPO parameters (logits only) suffice.
    return params["logits"] > NEG / 2

  def sample(self, params, rng):
    lp = self._logp(params)
    g = -np.log(-np.log(rng.random(lp.shape).clip(1e-300, 1.0 - 1e-16)))
    a = np.argmax(np.where(self._valid(params), lp + g, -np.inf), axis=-1)
    return a.astype(np.int64)

  def log_prob(self, params, actions):
    lp = self._logp(params)
    return np.take_along_axis(lp, np.asarray(actions, np.int64)[..., None], -1)[..., 0]

  def entropy(self, params):
    lp = self._logp(params)
    valid = self._valid(params)
    p = np.exp(lp) * valid
    return -(p * np.where(valid, lp, 0.0)).sum(axis=-1)

  def tf_greedy(self, tf, enc):
    w = {k: tf.constant(v) for k, v in self.w.items()}
    logits = scorer_logits_tf(tf, w, self.config, enc)
    return tf.argmax(logits, axis=-1, output_type=tf.int64)

  @staticmethod
  def init_weights(config, input_dim, seed=0):
    del input_dim  # the shared scorer sees one column: its features + progress
    return init_eviction_weights(config, seed)


def priority_mlp_tf(tf, w, config, enc):
  h = clean_tf(tf, enc)
  for i in range(len(config["hidden"])):
    h = tf.nn.relu(tf.matmul(h, w[f"hidden_{i}/kernel"]) + w[f"hidden_{i}/bias"])
  return (tf.matmul(h, w["out/kernel"]) + w["out/bias"])[:, 0]


def log2_to_priority(a):
  return np.exp2(np.clip(a, 0.0, MAX_LOG2_PRIORITY)).astype(np.float32)


@register_architecture
class PriorityLog2Normal(Architecture):
  TYPE = "regalloc_log2_normal"
  DIST_PARAMS = ("loc", "scale")

  def dist_params(self, enc):
    h = clean_np(enc)
    for i in range(len(self.config["hidden"])):
      h = relu_np(h @ self.w[f"hidden_{i}/kernel"] + self.w[f"hidden_{i}/bias"])
    loc = (h @ self.w["out/kernel"] + self.w["out/bias"])[:, 0]
    scale = np.full_like(loc, float(np.log1p(np.exp(self.w["std/bias"][0]))))
    return {"loc": loc, "scale": scale}

  def greedy(self, params):
    return log2_to_priority(params["loc"])

  def sample(self, params, rng):
    return log2_to_priority(params["loc"] + params["scale"] * rng.standard_normal(
        params["loc"].shape))

  @staticmethod
  def to_log2(actions):
    return np.log2(np.maximum(np.asarray(actions, np.float64), 1.0))

  def train_actions(self, actions):
    return self.to_log2(actions).astype(np.float32)

  def log_prob(self, params, actions):
    z = (self.to_log2(actions) - params["loc"]) / params["scale"]
    return -0.5 * z * z - np.log(params["scale"]) - 0.5 * np.log(2 * np.pi)

  def entropy(self, params):
    return 0.5 + 0.5 * np.log(2 * np.pi) + np.log(params["scale"])

  def tf_greedy(self, tf, enc):
    w = {k: tf.constant(v) for k, v in self.w.items()}
    loc = priority_mlp_tf(tf, w, self.config, enc)
    return tf.exp(tf.clip_by_value(loc, 0.0, MAX_LOG2_PRIORITY) * np.log(2.0))

  @staticmethod
  def init_weights(config, input_dim, seed=0):
    return init_priority_weights(config, input_dim, seed)


# Config entries that hold a raw threshold in one member's normalized units: members
# that differ only in these (and widths) can be ensembled; the first member's apply.
NORMALIZED_THRESHOLDS = ("mask_z_threshold", "urgent_z", "hint_z")


def _z_of(norm, raw: float) -> float:
  t = normalization.transform(np.array([raw]), norm.transform)[0]
  return float((t - norm.mean) / norm.std)


def eviction_architecture(feature_names, norms: dict, hidden=(64, 32),
                          cost_mask: bool = False, default_prior: float = 0.0) -> dict:
  """Config for the column scorer, given the policy's input features (in order).

  cost_mask: also mask every column whose heaviest interfering live range is at least
  as heavy as the live range being allocated (use_def_density, compared within one
  decision: one normalization for all columns, so the order of the encoded values is the
  order of the weights), unless the column is urgent or the hint. That is the default
  heuristic's own condition for an eviction; LLVM's ML advisor leaves it out, so a
  policy may evict a hot live range to place a cold one, which is how single functions
  end up several times costlier than the default. Not applied when the compiler masks
  the candidate itself (an eviction is then required).

  default_prior > 0: add a trainable scale (weight `prior/scale`, starting at this
  value) times a one-hot of the default-equivalent column (default_column_np) to the
  logits. The policy then starts as the documented default rule (on the default
  corpus' held-out split within 0.3% of LLVM's own eviction), not as an imperfect
  clone of it, and the MLP learns where to differ."""
  cols = [n for n in feature_names if n != "progress"]
  if feature_names[-1] != "progress" or len(cols) != len(feature_names) - 1:
    raise ValueError("eviction policy features must be the column features then progress")
  mi = cols.index("mask")
  thr = _z_of(norms["mask"], 0.5)
  config = {"type": ColumnScorer.TYPE, "hidden": [int(h) for h in hidden],
            "n_column_features": len(cols), "mask_feature_index": mi,
            "mask_z_threshold": float(thr), "output_name": "index_to_evict",
            "output_dtype": "int64", "num_actions": COLUMNS}
  if cost_mask:
    # nr_urgent arrives divided by its largest column value, so any urgent column is
    # well above 1e-6; is_hint is 0 or 1.
    config["cost_mask"] = {
        "density_index": cols.index("use_def_density"),
        "urgent_index": cols.index("nr_urgent"), "urgent_z": _z_of(norms["nr_urgent"], 1e-6),
        "hint_index": cols.index("is_hint"), "hint_z": _z_of(norms["is_hint"], 0.5)}
  if default_prior:
    config["default_prior"] = {"hint_index": cols.index("nr_broken_hints"),
                               "density_index": cols.index("use_def_density"),
                               "init": float(default_prior)}
  return config


def _he_mlp_one_output(hidden, input_dim: int, seed: int) -> dict:
  """He-normal hidden layers and a near-zero single output (scores start almost equal)."""
  rng = np.random.default_rng(seed)
  w, d = {}, input_dim
  for i, hdim in enumerate(hidden):
    w[f"hidden_{i}/kernel"] = (rng.standard_normal((d, hdim)) * np.sqrt(2.0 / d)).astype(
        np.float32)
    w[f"hidden_{i}/bias"] = np.zeros(hdim, np.float32)
    d = hdim
  w["out/kernel"] = (rng.standard_normal((d, 1)) * 0.01).astype(np.float32)
  w["out/bias"] = np.zeros(1, np.float32)
  return w


def init_eviction_weights(config: dict, seed: int = 0) -> dict:
  w = _he_mlp_one_output(config["hidden"], config["n_column_features"] * E + E, seed)
  if "default_prior" in config:
    w["prior/scale"] = np.array([config["default_prior"]["init"]], np.float32)
  return w


def priority_architecture(hidden=(32, 32), init_std: float = 0.5) -> dict:
  return {"type": PriorityLog2Normal.TYPE, "hidden": [int(h) for h in hidden],
          "output_name": "priority", "output_dtype": "float32", "init_std": init_std}


def init_priority_weights(config: dict, n_inputs: int, seed: int = 0) -> dict:
  w = _he_mlp_one_output(config["hidden"], n_inputs, seed)
  w["out/bias"] = np.array([24.0], np.float32)   # log2 priorities start near 2 ** 24
  s = float(config.get("init_std", 0.5))
  w["std/bias"] = np.array([np.log(np.expm1(s))], np.float32)
  return w
