"""Behavioral cloning: a policy network that imitates the default heuristic's decisions.

Normalization (quantile buckets per feature) is computed from the trace and saved with
the policy. Decisions of a held-out set of modules (hash of the module name) are never
trained on; accuracy on them is reported.
"""
import hashlib
import json
import pathlib
import sys
import time

import numpy as np

from mlgo import problems as problems_lib
from mlgo.policy import architectures, normalization, policy_io, regalloc_architectures
from mlgo.training import dataset


# Largest encoded trace kept in memory across behavioral-cloning epochs.
CACHE_BYTES = 2 << 30


def heldout_module(name: str, fraction: float, salt: str = "bc") -> bool:
  """A stable pseudo-random `fraction` of module names (a different set per salt)."""
  h = int(hashlib.sha1(f"{salt}:{name}".encode()).hexdigest()[:8], 16)
  return (h % 10000) < fraction * 10000


def make_spec(problem: str, features: list, norms: list, architecture: dict,
              encoding: str = "quantile") -> dict:
  """A policy spec; a reward variant's policy names its decision problem in "problem"
  and the problem it was trained on in "trained_for". A spec without "encoding" uses the
  quantile encoding (every policy dir written before the choice existed)."""
  spec = {"problem": problems_lib.decision_problem(problem), "features": features,
          "normalization": [n.to_json() for n in norms], "architecture": architecture,
          "format_version": policy_io.FORMAT_VERSION}
  if encoding != "quantile":
    spec["encoding"] = encoding
  if spec["problem"] != problems_lib.get_problem(problem).name:
    spec["trained_for"] = problems_lib.get_problem(problem).name
  return spec


def fit_normalization(ds: dataset.Dataset, features: list, seed: int = 0,
                      max_boundaries: int = normalization.MAX_BOUNDARIES, transforms=None):
  col = normalization.QuantileCollector([f["name"] for f in features], seed=seed)
  for shard in ds.shards():
    for f in features:
      col.add(f["name"], shard["f/" + f["name"]])
  return col.finish(max_boundaries, transforms)


def spec_from_trace(ds: dataset.Dataset, problem, hidden=None, seed: int = 0,
                    architecture_options=None, encoding: str = "quantile",
                    log_scale: bool = False) -> dict:
  """A fresh policy spec: the problem's features and architecture, the normalization
  fitted on the trace (log_scale: the problem's log_scale_features with "log")."""
  features = [f for f in ds.features if f["name"] not in problem.hidden_features]
  transforms = ({n: "log" for n in problem.log_scale_features} if log_scale else None)
  norms = fit_normalization(ds, features, seed, transforms=transforms)
  arch = problem.architecture(features, {n.name: n for n in norms}, hidden,
                              architecture_options)
  return make_spec(problem.name, features, norms, arch, encoding)


def _labels(shard, taken: bool = False):
  """What BC imitates: the default's decisions where the trace has them (a default trace
  of a channel that sends them), else the decisions taken; `taken` (a dataset whose index
  says "labels": "action", e.g. self_imitation's) always the decisions taken."""
  if taken or "default_action" not in shard:
    return shard["action"]
  return shard["default_action"]


def init_weights(arch: dict, input_dim: int, seed: int = 0) -> dict:
  """Fresh weights of an architecture (what BC and PPO start from)."""
  return architectures.architecture_class(arch["type"]).init_weights(arch, input_dim, seed)


def _usable(arch: dict, params: dict, y: np.ndarray) -> np.ndarray:
  """Decisions whose label the network can express (eviction: a valid column; the
  tracer logs -1 when the default picked a register outside the columns)."""
  if "logits" not in params:
    return np.isfinite(y)
  n = params["logits"].shape[-1]
  ok = (y >= 0) & (y < n)
  idx = np.flatnonzero(ok)
  ok[idx] &= params["logits"][idx, y[idx].astype(np.int64)] > regalloc_architectures.NEG / 2
  return ok


def _order_agreement(pred, y, rng, pairs: int = 20000) -> float:
  """Fraction of random pairs of decisions ordered alike by pred and y (priorities
  matter only through their order)."""
  if len(y) < 2:
    return float("nan")
  i, j = rng.integers(0, len(y), pairs), rng.integers(0, len(y), pairs)
  sel = y[i] != y[j]
  if not sel.any():
    return float("nan")
  return float(np.mean(np.sign(pred[i] - pred[j])[sel] == np.sign(y[i] - y[j])[sel]))


def train_bc(trace_dir, output, hidden=None, epochs: int = 4, batch_size: int = 256,
             learning_rate: float = 1e-3, heldout_fraction: float = 0.1, seed: int = 0,
             label_smoothing: float = 0.1, explore_eps: float = 0.0,
             explore_tau: float = 20.0, teacher=None, time_budget: float | None = None,
             architecture_options=None, encoding: str = "quantile", init_policy=None,
             skip_deferred: bool = False, log_scale: bool = False,
             stream=sys.stderr) -> dict:
  """Trains the problem's own actor network (mlgo.training.networks, the one PPO
  trains) to imitate the trace's default decisions.

  Categorical actions (inlining, eviction): cross entropy. label_smoothing > 0 keeps the
  clone's greedy decisions but leaves it some probability on the other valid actions,
  which PPO needs to explore from a warm start (the default inliner is an almost exactly
  learnable function of its features; a clone trained to zero loss would never try
  anything else). explore_eps > 0 instead uses the problem's exploration_prob (for
  inlining: eps * exp(-|cost_estimate - threshold| / explore_tau)) as the target
  probability of the non-default actions, so exploration concentrates where it can pay
  off. Continuous actions (priority): least squares on the distribution's mean in its
  own space (log2 priority); the exploration std keeps its initial value.
  trace_dir: one dataset dir or a list read as one (dataset.Datasets).
  teacher: a policy dir whose greedy decisions replace the trace's default actions as
  labels (re-warm-starting PPO from a trained policy with fresh exploration, after its
  entropy has collapsed); with a trace of the teacher's own compiles, this distills the
  teacher into another architecture or encoding (e.g. a smaller network reading
  encoding="slog", mlgo.policy.normalization). time_budget: stop after the epoch that
  passes it (seconds). init_policy: a policy dir to start from (its normalization,
  architecture and weights) instead of a fresh network fitted to the trace: fine-tuning
  a trained policy towards the trace's labels (self_imitation). skip_deferred (with a
  deferring init_policy): leave out the decisions it hands to the compiler whose label is
  the compiler's answer; the network never made them, and imitating them would teach it
  the compiler's answers exactly where it was unsure (a label that departs from the
  compiler there, e.g. a searched flip, is kept). log_scale: a fresh spec encodes the
  problem's log_scale_features with log (mlgo.policy.normalization)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from mlgo import problems as problems_lib  # pylint: disable=import-outside-toplevel
  from mlgo.training import networks  # pylint: disable=import-outside-toplevel
  t_start = time.monotonic()
  ds = dataset.open_traces(trace_dir)
  problem = problems_lib.get_problem(ds.problem)
  if ds.num_decisions == 0:
    raise ValueError(f"{trace_dir}: the trace holds no decisions")
  if init_policy is not None:
    start = policy_io.load_policy(init_policy)
    have = {f["name"] for f in ds.features}
    missing = sorted(f["name"] for f in start.spec["features"] if f["name"] not in have)
    if start.problem != problems_lib.decision_problem(ds.problem) or missing:
      raise ValueError(f"{init_policy}: a policy for {start.problem} reading "
                       f"{missing or 'the same features'}; the trace {trace_dir} is for "
                       f"{ds.problem}")
    spec = start.spec
  else:
    spec = spec_from_trace(ds, problem, hidden, seed, architecture_options, encoding,
                           log_scale)
  arch = spec["architecture"]
  encoder = policy_io.Policy(spec, {})
  input_dim = encoder.normalizer.input_dim
  w0 = (dict(start.arch.w) if init_policy is not None
        else init_weights(arch, input_dim, seed))
  numpy_arch = type(encoder.arch)(arch, w0)
  categorical = networks.is_categorical(arch)

  tf.random.set_seed(seed)
  actor = networks.actor_with_weights(arch, input_dim, w0)
  train_vars = [v for v in actor.trainable_variables if "std" not in v.name]
  opt = tf.keras.optimizers.Adam(learning_rate)

  @tf.function
  def cat_step(x, target):
    with tf.GradientTape() as tape:
      logits = actor(x, step_type=None, network_state=(), training=True)[0].logits_parameter()
      loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(target, logits))
    opt.apply_gradients(zip(tape.gradient(loss, train_vars), train_vars))
    return loss

  @tf.function
  def mean_step(x, y):
    with tf.GradientTape() as tape:
      loss = tf.reduce_mean(tf.square(actor(x, step_type=None, network_state=(), training=True)[0].mean() - y))
    opt.apply_gradients(zip(tape.gradient(loss, train_vars), train_vars))
    return loss

  teacher_policy = policy_io.load_policy(teacher) if teacher else None
  if skip_deferred and (init_policy is None or not start.defers):
    raise ValueError("skip_deferred needs an init_policy that defers to the compiler")
  taken = getattr(ds, "index", {}).get("labels") == "action"

  def shard_arrays(shard):
    x = encoder.encode_batch({f["name"]: shard["f/" + f["name"]] for f in spec["features"]})
    if teacher_policy is not None:
      y = teacher_policy.decide_batch({n: shard["f/" + n] for n in teacher_policy.input_names})
    else:
      y = _labels(shard, taken)
    y = numpy_arch.train_actions(np.asarray(y).reshape(len(x), -1)[:, 0])
    params = numpy_arch.dist_params(x)
    ok = _usable(arch, params, y)
    left_out = np.zeros(len(x), bool)
    if skip_deferred:
      key = "f/" + start.defer_feature
      answer = shard[key] if key in shard else shard["default_action"]
      left_out = start.deferred_batch({n: shard["f/" + n] for n in start.input_names}) & (
          y == np.asarray(answer).reshape(len(x), -1)[:, 0]) & ok
      ok = ok & ~left_out
    held = np.array([heldout_module(m, heldout_fraction) for m in shard["traj_module"]])[
        shard["traj"]]
    target = None
    if categorical:
      y = y.astype(np.int64)
      valid = params["logits"] > regalloc_architectures.NEG / 2
      n_valid = np.maximum(valid.sum(-1, keepdims=True), 1)
      onehot = np.zeros(valid.shape, np.float32)
      onehot[np.flatnonzero(ok), y[ok]] = 1.0
      p = None
      if explore_eps > 0:
        p = problem.exploration_prob(
            {k[2:]: v for k, v in shard.items() if k.startswith("f/")}, explore_eps,
            explore_tau)
      if p is not None:
        p = np.clip(np.asarray(p, np.float64), 0.0, 0.49)[:, None]
        others = np.maximum(n_valid - 1, 1)
        target = onehot * (1 - p) + (valid & (onehot == 0)) * (p / others)
      else:
        target = onehot * (1 - label_smoothing) + valid * (label_smoothing / n_valid)
      target = target.astype(np.float32)
    return x, y, held, ok, target, left_out

  # Encoding a shard (and the labels' validity, a forward pass) does not change between
  # epochs: do it once when the encoded trace fits in memory, else once per epoch.
  encoded_bytes = ds.num_decisions * input_dim * 4
  cached = [shard_arrays(sh) for sh in ds.shards()] if encoded_bytes <= CACHE_BYTES else None

  def arrays():
    return cached if cached is not None else (shard_arrays(sh) for sh in ds.shards())

  rng = np.random.default_rng(seed)
  print(f"behavioral cloning ({problem.name}, {arch['type']}): {ds.num_decisions} decisions "
        f"from {len(ds.modules)} modules, {len(spec['features'])} features -> {input_dim} "
        f"inputs, {epochs} epochs", file=stream)
  for epoch in range(epochs):
    losses = []
    for x, y, held, ok, target, _ in arrays():
      use = np.flatnonzero(ok & ~held)
      order = use[rng.permutation(len(use))]
      for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        if categorical:
          losses.append(float(cat_step(x[idx], target[idx])))
        else:
          losses.append(float(mean_step(x[idx], y[idx].astype(np.float32))))
    print(f"  epoch {epoch + 1}/{epochs}: loss {np.mean(losses) if losses else float('nan'):.4f}",
          file=stream, flush=True)
    if time_budget is not None and time.monotonic() - t_start > time_budget:
      print(f"  time budget reached after epoch {epoch + 1}", file=stream)
      break

  weights = networks.actor_weights(actor, arch)
  policy = policy_io.Policy(spec, weights)
  counts = {"train": [0, 0], "heldout": [0, 0]}
  per_class = {}
  ent_sum, ent_n = 0.0, 0
  preds = {"train": ([], []), "heldout": ([], [])}
  left_out_total = 0
  for x, y, held, ok, _, left_out in arrays():
    left_out_total += int(left_out.sum())
    params = policy.arch.dist_params(x)
    ent_sum += float(policy.arch.entropy(params).sum())
    ent_n += len(x)
    pred = policy.arch.greedy(params) if categorical else params["loc"]
    for name, mask in (("train", ~held & ok), ("heldout", held & ok)):
      counts[name][1] += int(mask.sum())
      if categorical:
        counts[name][0] += int((pred[mask] == y[mask]).sum())
      else:
        preds[name][0].append(pred[mask])
        preds[name][1].append(y[mask])
    if categorical:
      for c in np.unique(y[held & ok]):
        m = held & ok & (y == c)
        pc = per_class.setdefault(int(c), [0, 0])
        pc[0] += int((pred[m] == c).sum())
        pc[1] += int(m.sum())
  metrics = {"train_decisions": counts["train"][1], "heldout_decisions": counts["heldout"][1],
             "mean_entropy": ent_sum / max(1, ent_n), "label_smoothing": label_smoothing,
             "explore_eps": explore_eps, "explore_tau": explore_tau,
             "trace": (",".join(map(str, trace_dir)) if isinstance(trace_dir, (list, tuple))
                       else str(trace_dir)), "teacher": str(teacher) if teacher else None,
             "init_policy": str(init_policy) if init_policy else None,
             "left_out_deferred": left_out_total}
  if categorical:
    acc = {k: (v[0] / v[1] if v[1] else float("nan")) for k, v in counts.items()}
    metrics.update(
        train_accuracy=acc["train"], heldout_accuracy=acc["heldout"],
        heldout_per_class_accuracy={str(c): v[0] / v[1] for c, v in per_class.items()},
        heldout_majority_baseline=(max(v[1] for v in per_class.values()) /
                                   max(1, counts["heldout"][1])) if per_class else None)
    summary = (f"train accuracy {acc['train']:.4f}, held-out accuracy {acc['heldout']:.4f} "
               f"on {counts['heldout'][1]} decisions")
  else:
    for name, (p, y) in preds.items():
      p = np.concatenate(p) if p else np.zeros(0)
      y = np.concatenate(y) if y else np.zeros(0)
      metrics[f"{name}_order_agreement"] = _order_agreement(p, y, np.random.default_rng(0))
      metrics[f"{name}_mean_abs_error"] = float(np.mean(np.abs(p - y))) if len(y) else float("nan")
    summary = (f"order agreement train {metrics['train_order_agreement']:.4f}, held out "
               f"{metrics['heldout_order_agreement']:.4f}")
  if skip_deferred:
    summary += f"; {left_out_total} of the init policy's deferred decisions left out"
  metrics["seconds"] = time.monotonic() - t_start
  out = policy_io.write_policy_dir(output, spec, weights)
  with open(pathlib.Path(out) / "bc_metrics.json", "w") as f:
    json.dump(metrics, f, indent=1)
  print(f"behavioral cloning: {summary}, mean entropy {metrics['mean_entropy']:.3f} nats; "
        f"policy saved to {out}", file=stream)
  return metrics
