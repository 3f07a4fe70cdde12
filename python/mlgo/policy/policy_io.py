"""Policy directories: numpy evaluator for collection + TF SavedModel for LLVM tooling.

A policy dir holds:
  policy.json   problem, raw input features (name/dtype/shape, as the compiler sends them),
                normalization (per-feature quantile boundaries, log mean/std),
                architecture (type, layer sizes, output name/dtype)
  weights.npz   network weights (names given by the architecture)
  saved_policy/ TF SavedModel, signature "action": inputs are the raw features, the
                normalization is inside the graph, output named like LLVM expects
                (`inlining_decision` int64 for the inliner).
The numpy evaluator (`load_policy`) and the SavedModel compute the same function; a
test checks that their decisions agree.

The network itself is one of mlgo.policy.architectures, named in policy.json.
"""
import json
import os
import pathlib
import shutil
import tempfile

import numpy as np

from mlgo.policy.architectures import architecture_class
from mlgo.policy.normalization import LOG_EPS, FeatureNorm, Normalizer

FORMAT_VERSION = 1


class Policy:
  """Fast numpy policy: `act(observation)` for one decision (the collection hot path).

  greedy=True takes the most likely action; otherwise samples with `rng`.
  """

  def __init__(self, spec: dict, weights: dict, greedy: bool = True, seed: int | None = None):
    self.spec = spec
    self.problem = spec["problem"]
    self.features = spec["features"]           # [{"name","dtype","shape"}]
    self.input_names = [f["name"] for f in self.features]
    self.sizes = [int(np.prod(f["shape"])) for f in self.features]
    # An ensemble of members with their own normalizations (ensemble_policies) encodes
    # the input once per member, with that member's norms.
    members = member_normalizations(spec)
    expanded = []
    for member in members:
      norms = {d["name"]: FeatureNorm.from_json(d) for d in member}
      for f, n in zip(self.features, self.sizes):
        expanded += [norms[f["name"]]] * n
    self.normalizer = Normalizer(expanded, spec.get("encoding", "quantile"), len(members))
    arch_cls = architecture_class(spec["architecture"]["type"])
    if self.normalizer.encoding not in arch_cls.ENCODINGS:
      raise ValueError(f"architecture {arch_cls.TYPE} cannot read the "
                       f"{self.normalizer.encoding!r} feature encoding "
                       f"(it reads {', '.join(arch_cls.ENCODINGS)})")
    self.arch = arch_cls(spec["architecture"], dict(weights))
    self.greedy_mode = greedy
    self.rng = np.random.default_rng(seed)
    self._scalar_inputs = all(n == 1 for n in self.sizes)
    # Deferring to the compiler's own decision where the policy is unsure: a greedy
    # categorical decision takes the observation's `feature` (e.g. inlining_default)
    # instead where its top two probabilities are closer than `margin`, or where an input
    # lies outside the range its normalization saw by more than a factor `outside`
    # (deferral_bounds), or where one of the `nonzero` scalar inputs is not 0 (e.g.
    # last_call_to_static_bonus: the sole call of a local function, which clang knows
    # how to price), or where one of the `below` scalar inputs is under its threshold
    # (e.g. edge_count: a module with few calls, where one departure is a large share of
    # the object and the default leaves little to win). The SavedModel does the same
    # (export_saved_model).
    d = spec.get("defer") or {}
    self.defer_margin = float(d.get("margin", 0.0))
    self.defer_outside = float(d.get("outside", 0.0))
    self.defer_nonzero = list(d.get("nonzero", ()))
    self.defer_nonzero_at = scalar_positions(self, self.defer_nonzero, "nonzero")
    below = d.get("below") or {}
    self.defer_below_at = scalar_positions(self, list(below), "below")
    self.defer_below = np.array([float(v) for v in below.values()], np.float64)
    self.defer_feature = d.get("feature")
    self.defers = bool(self.defer_feature and (self.defer_margin or self.defer_outside
                                               or self.defer_nonzero or below))
    self.defer_low, self.defer_high = (deferral_bounds(self.normalizer, self.defer_outside)
                                       if self.defer_outside else (None, None))
    self.deferred_by = {}   # rule -> decisions it sent to the compiler (the first that held)

  @property
  def deferred(self) -> int:
    """Decisions this policy left to the compiler so far, all rules together."""
    return sum(self.deferred_by.values())

  def with_sampling(self, seed: int) -> "Policy":
    return Policy(self.spec, self.arch.w, greedy=False, seed=seed)

  def raw_vector(self, observation: dict) -> np.ndarray:
    if self._scalar_inputs:
      return np.array([observation[n].flat[0] for n in self.input_names], np.float64)
    try:   # the reader's 1-D arrays: one concatenate (~25 us a decision instead of ~60)
      return np.concatenate([observation[n] for n in self.input_names],
                            dtype=np.float64).reshape(-1)
    except (ValueError, TypeError):   # scalars, or arrays of other ranks
      return np.concatenate([np.asarray(observation[n], np.float64).reshape(-1)
                             for n in self.input_names])

  def dist_params(self, observation: dict) -> dict:
    """The architecture's distribution parameters (e.g. logits) for one observation."""
    return self._dist_params_of_raw(self.raw_vector(observation))

  def _dist_params_of_raw(self, raw: np.ndarray) -> dict:
    return self.arch.dist_params(self.normalizer.encode_one(raw)[None, :])

  def act(self, observation: dict):
    answer, params = self.deferral(observation)
    if answer is not None:
      return answer
    a = self.arch.greedy(params) if self.greedy_mode else self.arch.sample(params, self.rng)
    return a.reshape(-1)[0] if a.ndim <= 1 or a.shape[-1] == 1 else a[0]

  def deferral(self, observation: dict):
    """(the compiler's answer where this greedy policy defers to it, else None; the
    network's distribution parameters). Counts the deferred decisions, in all and by
    rule."""
    raw = self.raw_vector(observation)
    params = self._dist_params_of_raw(raw)   # the raw vector also feeds the range check
    if not (self.greedy_mode and self.defers and self.defer_feature in observation):
      return None, params
    why = self._deferral_rule(raw, params)
    if why is None:
      return None, params
    self.deferred_by[why] = self.deferred_by.get(why, 0) + 1
    return int(np.asarray(observation[self.defer_feature]).reshape(-1)[0]), params

  def _deferral_rule(self, raw: np.ndarray, params: dict):
    """The first deferral rule that holds for this raw input (nonzero, below, outside,
    margin), or None."""
    rules = self._deferral_rules(raw[None, :], params["logits"][:1])
    return rules[0] or None

  def _deferral_rules(self, raw: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """Per row of raw inputs [N, D] (and the network's logits [N, A]): the name of the
    first deferral rule that holds, in the order nonzero, below, outside, margin, or ""."""
    out = np.full(len(raw), "", dtype=object)

    def mark(rows, name):
      out[(out == "") & rows] = name
    if self.defer_nonzero:
      mark(np.any(raw[:, self.defer_nonzero_at] != 0, axis=1), "nonzero")
    if len(self.defer_below):
      mark(np.any(raw[:, self.defer_below_at] < self.defer_below, axis=1), "below")
    if self.defer_outside:
      with np.errstate(invalid="ignore"):   # NaN is inside (as in the TF graph)
        mark(np.any((raw > self.defer_high) | (raw < self.defer_low), axis=1), "outside")
    if self.defer_margin:
      lg = np.asarray(logits, np.float64)
      p = np.exp(lg - lg.max(axis=1, keepdims=True))
      p = np.sort(p / p.sum(axis=1, keepdims=True), axis=1)
      mark(p[:, -1] - p[:, -2] < self.defer_margin, "margin")
    return out

  def deferred_batch(self, features: dict) -> np.ndarray:
    """features: name -> [N, *shape] -> bool [N]: the decisions this (greedy) policy
    hands to the compiler (any deferral rule holds)."""
    raw = self.raw_batch(features)
    if not self.defers:
      return np.zeros(len(raw), bool)
    logits = self.arch.dist_params(self.normalizer.encode_scalar_rows(raw))["logits"]
    return self.deferred_rows(raw, logits)

  def deferred_rows(self, raw: np.ndarray, logits: np.ndarray) -> np.ndarray:
    """Raw input rows [N, D] and the network's logits for them -> bool [N]: the rows this
    (greedy) policy hands to the compiler."""
    if not self.defers:
      return np.zeros(len(raw), bool)
    return self._deferral_rules(np.asarray(raw, np.float64), logits) != ""

  def raw_batch(self, features: dict) -> np.ndarray:
    """features: name -> [N, *shape] -> the raw input rows, float64 [N, D] (raw_vector's
    order)."""
    n = len(next(iter(features.values())))
    return np.concatenate([np.asarray(features[f], np.float64).reshape(n, -1)
                           for f in self.input_names], axis=1)

  def encode_batch(self, features: dict) -> np.ndarray:
    """features: name -> [N, *shape] -> encoded float32 [N, D]."""
    return self.normalizer.encode_scalar_rows(self.raw_batch(features))

  def dist_params_batch(self, features: dict) -> dict:
    return self.arch.dist_params(self.encode_batch(features))

  def decide_batch(self, features: dict) -> np.ndarray:
    return self.arch.greedy(self.dist_params_batch(features))


def member_normalizations(spec: dict) -> list:
  """The normalization of each encoder the policy reads its input through: one, or one a
  member for an ensemble of differently normalized members."""
  return spec.get("ensemble_normalization") or [spec["normalization"]]


def write_policy_dir(out_dir, spec: dict, weights: dict, saved_model: bool = True):
  """Writes policy.json + weights.npz (+ saved_policy/) atomically (temp dir + rename)."""
  out_dir = pathlib.Path(out_dir)
  out_dir.parent.mkdir(parents=True, exist_ok=True)
  tmp = pathlib.Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp", dir=out_dir.parent))
  spec = dict(spec, format_version=FORMAT_VERSION)
  with open(tmp / "policy.json", "w") as f:
    json.dump(spec, f, indent=1)
  np.savez(tmp / "weights.npz", **{k: np.asarray(v, np.float32) for k, v in weights.items()})
  if saved_model:
    export_saved_model(Policy(spec, weights), tmp / "saved_policy")
  if out_dir.exists():
    old = out_dir.with_name(out_dir.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    os.rename(out_dir, old)
    os.rename(tmp, out_dir)
    shutil.rmtree(old, ignore_errors=True)
  else:
    os.rename(tmp, out_dir)
  return out_dir


def load_policy(policy_dir, greedy: bool = True, seed: int | None = None) -> Policy:
  """Loads the numpy policy of a policy dir (policy.json + weights.npz)."""
  d = pathlib.Path(policy_dir)
  if not (d / "policy.json").exists():
    raise FileNotFoundError(f"{d}: not a policy dir (no policy.json)")
  with open(d / "policy.json") as f:
    spec = json.load(f)
  if spec.get("format_version") != FORMAT_VERSION:
    raise ValueError(f"{d}/policy.json: unsupported format_version "
                     f"{spec.get('format_version')!r} (expected {FORMAT_VERSION})")
  with np.load(d / "weights.npz") as z:
    weights = {k: z[k] for k in z.files}
  return Policy(spec, weights, greedy=greedy, seed=seed)


_TF_DTYPES = {"int64": "int64", "int32": "int32", "float32": "float32", "float64": "float64"}


def export_saved_model(policy: Policy, path):
  """TF SavedModel with signature "action": raw features in, decision out."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  spec = policy.spec
  arch = spec["architecture"]
  norm = policy.normalizer
  groups, inverse = norm.boundary_groups()
  mean, std = norm.mean.copy(), norm.std.copy()
  feats = policy.features
  inputs = [tf.TensorSpec(shape=[1] + list(f["shape"]) if f["shape"] != [1] else [1],
                          dtype=getattr(tf, _TF_DTYPES[f["dtype"]]), name=f["name"])
            for f in feats]
  out_name = arch.get("output_name", "action")
  out_dtype = arch.get("output_dtype", "int64")
  defer = policy.defers
  if defer:
    if not hasattr(policy.arch, "tf_logits"):
      raise ValueError(f"{spec['architecture']['type']}: deferring to the default needs a "
                       "categorical architecture")
    # The compiler's own decision as one more input (the inline plugin feeds it when the
    # model asks for it), used where the policy is unsure, exactly as Policy.act does.
    inputs = inputs + [tf.TensorSpec(shape=[1], dtype=tf.int64, name=policy.defer_feature)]

  class _Module(tf.Module):

    @tf.function(input_signature=inputs)
    def action(self, *args):
      default = None
      if defer:
        args, default = args[:-1], args[-1]
      x = tf.concat([tf.reshape(tf.cast(a, tf.float64), [1, -1]) for a in args], axis=1)
      xs = tf.tile(x, [1, norm.copies]) if norm.copies > 1 else x   # one copy per encoder
      s = tf.sign(xs) * tf.math.log1p(tf.abs(xs))
      if norm.log_mask is not None:   # features fitted with the "log" transform
        s = tf.where(tf.constant(norm.log_mask[None, :]),
                     tf.math.log(tf.abs(xs) + LOG_EPS), s)
      z = (s - tf.constant(mean)) / tf.constant(std)
      if norm.encoding == "slog":
        enc = z
      else:
        # The empirical CDF: per group of features, compare against the group's padded
        # boundaries, weight by the CDF increments, sum; then back to feature order.
        qs = [tf.reduce_sum(tf.cast(tf.gather(xs, idx, axis=1)[:, :, None] >= tf.constant(b),
                                    tf.float64) * tf.constant(d), axis=-1)
              for idx, b, d in groups]
        q = tf.gather(tf.concat(qs, axis=1), inverse, axis=1)
        enc = tf.reshape(tf.stack([q, tf.sqrt(q), z], axis=-1), [1, -1])
      if defer:
        logits = tf.cast(policy.arch.tf_logits(tf, tf.cast(enc, tf.float32)), tf.float64)
        p = tf.nn.softmax(logits, axis=-1)
        best = tf.argmax(logits, axis=-1, output_type=tf.int64)
        # The runner-up without a sort (XLA's AOT runtime has no sort kernel here).
        second = tf.reduce_max(p - 2.0 * tf.one_hot(best, tf.shape(p)[-1], dtype=p.dtype),
                               axis=-1)
        unsure = (tf.reduce_max(p, axis=-1) - second) < policy.defer_margin
        if policy.defer_outside:
          # Raw values against float64 bounds: the same compares as Policy.act, exactly.
          out_of_range = tf.logical_or(x > tf.constant(policy.defer_high[None, :]),
                                       x < tf.constant(policy.defer_low[None, :]))
          unsure = tf.logical_or(unsure, tf.reduce_any(out_of_range, axis=-1))
        if policy.defer_nonzero:
          picked = tf.gather(x, policy.defer_nonzero_at, axis=1)
          unsure = tf.logical_or(unsure, tf.reduce_any(picked != 0.0, axis=-1))
        if len(policy.defer_below):
          picked = tf.gather(x, policy.defer_below_at, axis=1)
          unsure = tf.logical_or(unsure, tf.reduce_any(
              picked < tf.constant(policy.defer_below[None, :]), axis=-1))
        out = tf.where(unsure, tf.reshape(default, [1]), best)
      else:
        out = policy.arch.tf_greedy(tf, tf.cast(enc, tf.float32))
      out = tf.reshape(tf.cast(out, getattr(tf, out_dtype)), [1])
      return {out_name: out}

  m = _Module()
  # Keyword names of the signature are the feature names (what LLVM's tools feed).
  fn = m.action.get_concrete_function()
  tf.saved_model.save(m, str(path), signatures={"action": fn, "serving_default": fn})
  return path


def publish_iteration_policy(output, iteration: int, spec: dict, weights: dict, *,
                             saved_model: bool, keep: int) -> pathlib.Path:
  """Writes OUTPUT/policies/iter-N and atomically makes OUTPUT/policy a copy of it.

  A reader of OUTPUT/policy never sees a half-written directory (copy to a temp dir,
  then rename); only the newest `keep` iteration policies are kept.
  """
  output = pathlib.Path(output)
  d = write_policy_dir(output / "policies" / f"iter-{iteration:05d}", spec, weights,
                       saved_model=saved_model)
  latest = output / "policy"
  old = latest.with_name("policy.old")
  tmp = pathlib.Path(tempfile.mkdtemp(prefix="policy.tmp", dir=output))
  shutil.rmtree(tmp)
  shutil.copytree(d, tmp)
  if latest.exists():
    shutil.rmtree(old, ignore_errors=True)
    os.rename(latest, old)
  os.rename(tmp, latest)
  shutil.rmtree(old, ignore_errors=True)
  for o in sorted((output / "policies").glob("iter-*"))[:-keep]:
    shutil.rmtree(o, ignore_errors=True)
  return d


def deferral_bounds(normalizer, factor: float):
  """Per raw input element, the values past which a policy defers for being outside its
  training range: the range its normalization saw ([first, last] boundary) widened so
  that 1 + |x| may grow by `factor` (> 1) beyond either end; for an ensemble of several
  encoders, the narrowest of their ranges. float64, so the numpy policy and the
  SavedModel compare the same numbers."""
  if factor < 1:
    raise ValueError(f"outside factor must be >= 1, not {factor}")
  lo = np.array([n.boundaries[0] if len(n.boundaries) else 0.0 for n in normalizer.norms])
  hi = np.array([n.boundaries[-1] if len(n.boundaries) else 0.0 for n in normalizer.norms])
  lo = lo - (factor - 1.0) * (1.0 + np.abs(lo))
  hi = hi + (factor - 1.0) * (1.0 + np.abs(hi))
  # An ensemble's encoders each saw their own range: outside any one of them is outside.
  return (lo.reshape(normalizer.copies, -1).max(axis=0),
          hi.reshape(normalizer.copies, -1).min(axis=0))


def scalar_positions(policy, names, rule: str = "nonzero") -> np.ndarray:
  """Where the named scalar inputs sit in the policy's raw input vector; a clear error
  (naming the deferral `rule`) for a name that is not one of its scalar features."""
  offsets = dict(zip(policy.input_names, np.cumsum([0] + policy.sizes[:-1]).tolist()))
  sizes = dict(zip(policy.input_names, policy.sizes))
  for n in names:
    if n not in offsets:
      raise ValueError(f"defer on {rule} {n!r}: not an input of this policy")
    if sizes[n] != 1:
      raise ValueError(f"defer on {rule} {n!r}: not a scalar input ({sizes[n]} elements)")
  return np.array([offsets[n] for n in names], np.int64)
