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

from mlgo.training import adapters, dataset, normalization, policy_io


def heldout_module(name: str, fraction: float, salt: str = "bc") -> bool:
  """A stable pseudo-random `fraction` of module names (a different set per salt)."""
  h = int(hashlib.sha1(f"{salt}:{name}".encode()).hexdigest()[:8], 16)
  return (h % 10000) < fraction * 10000


def make_spec(problem: str, features: list, norms: list, architecture: dict) -> dict:
  return {"problem": problem, "features": features,
          "normalization": [n.to_json() for n in norms], "architecture": architecture,
          "format_version": policy_io.FORMAT_VERSION}


def fit_normalization(ds: dataset.Dataset, features: list, seed: int = 0,
                      max_boundaries: int = normalization.MAX_BOUNDARIES):
  col = normalization.QuantileCollector([f["name"] for f in features], seed=seed)
  for shard in ds.shards():
    for f in features:
      col.add(f["name"], shard["f/" + f["name"]])
  return col.finish(max_boundaries)


def _labels(shard):
  return shard["default_action"] if "default_action" in shard else shard["action"]


def init_weights(arch: dict, input_dim: int, seed: int = 0) -> dict:
  """Glorot-uniform weights for an MLP architecture (what BC and PPO start from)."""
  rng = np.random.default_rng(seed)
  w, d = {}, input_dim
  for i, h in enumerate(arch["hidden"]):
    lim = np.sqrt(6.0 / (d + h))
    w[f"hidden_{i}/kernel"] = rng.uniform(-lim, lim, (d, h)).astype(np.float32)
    w[f"hidden_{i}/bias"] = np.zeros(h, np.float32)
    d = h
  n_out = arch.get("num_actions", 1)
  lim = np.sqrt(6.0 / (d + n_out))
  w["out/kernel"] = rng.uniform(-lim, lim, (d, n_out)).astype(np.float32) * 0.1
  w["out/bias"] = np.zeros(n_out, np.float32)
  if arch["type"] == "mlp_normal":
    w["std/bias"] = np.zeros(n_out, np.float32)
  return w


def keras_mlp(arch: dict, input_dim: int, weights: dict):
  """A Keras model of an mlp_categorical architecture holding `weights`, and the
  policy_io weight names of its variables in order (to read the weights back)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  layers = [tf.keras.layers.Dense(h, activation="relu") for h in arch["hidden"]]
  layers.append(tf.keras.layers.Dense(arch["num_actions"]))
  model = tf.keras.Sequential(layers)
  model.build((None, input_dim))
  names = []
  for i in range(len(arch["hidden"])):
    names += [f"hidden_{i}/kernel", f"hidden_{i}/bias"]
  names += ["out/kernel", "out/bias"]
  for v, n in zip(model.trainable_variables, names):
    v.assign(weights[n])
  return model, names


def train_bc(trace_dir, output, hidden=(64, 64), epochs: int = 4, batch_size: int = 256,
             learning_rate: float = 1e-3, heldout_fraction: float = 0.1, seed: int = 0,
             label_smoothing: float = 0.1, explore_eps: float = 0.0,
             explore_tau: float = 20.0, teacher=None, stream=sys.stderr) -> dict:
  """label_smoothing > 0 keeps the clone's greedy decisions but leaves it some
  probability on the other action, which PPO needs to explore from a warm start (the
  default inliner is an almost exactly learnable function of its features; a clone
  trained to zero loss would never try anything else).
  explore_eps > 0 instead uses the problem's exploration_prob (for inlining: eps *
  exp(-|cost_estimate - threshold| / explore_tau)) as the target probability of the
  non-default action, so exploration concentrates where it can pay off.
  teacher: a policy dir whose greedy decisions replace the trace's default actions as
  labels (re-warm-starting PPO from a trained policy with fresh exploration, after its
  entropy has collapsed)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  t_start = time.monotonic()
  ds = dataset.Dataset(trace_dir)
  adapter = adapters.get_adapter(ds.problem, hidden=hidden)
  features = adapter.policy_features(ds.features)
  arch = adapter.architecture()
  if arch["type"] != "mlp_categorical":
    raise NotImplementedError(f"behavioral cloning supports discrete actions; "
                              f"{ds.problem} uses {arch['type']}")
  if ds.num_decisions == 0:
    raise ValueError(f"{trace_dir}: the trace holds no decisions")
  norms = fit_normalization(ds, features, seed)
  spec = make_spec(ds.problem, features, norms, arch)
  encoder = policy_io.Policy(spec, {})
  input_dim = sum(int(np.prod(f["shape"])) for f in features) * normalization.ENCODED_PER_SCALAR
  w0 = init_weights(arch, input_dim, seed)

  tf.random.set_seed(seed)
  model, names = keras_mlp(arch, input_dim, w0)
  opt = tf.keras.optimizers.Adam(learning_rate)
  loss_fn = tf.keras.losses.CategoricalCrossentropy(from_logits=True,
                                                    label_smoothing=label_smoothing)
  n_act = arch["num_actions"]

  @tf.function
  def step(x, y):
    with tf.GradientTape() as tape:
      loss = loss_fn(tf.one_hot(y, n_act), model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  soft_loss = tf.keras.losses.CategoricalCrossentropy(from_logits=True)

  @tf.function
  def soft_step(x, target):
    with tf.GradientTape() as tape:
      loss = soft_loss(target, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

  teacher_policy = policy_io.load_policy(teacher) if teacher else None

  def shard_arrays(shard):
    x = encoder.encode_batch({f["name"]: shard["f/" + f["name"]] for f in features})
    if teacher_policy is not None:
      y = teacher_policy.decide_batch({n: shard["f/" + n] for n in teacher_policy.input_names})
      y = np.asarray(y).astype(np.int64).reshape(-1)
    else:
      y = _labels(shard).astype(np.int64).reshape(-1)
    held = np.array([heldout_module(m, heldout_fraction) for m in shard["traj_module"]])[
        shard["traj"]]
    soft = None
    if explore_eps > 0:
      p = adapter.exploration_prob({k[2:]: v for k, v in shard.items() if k.startswith("f/")},
                                   explore_eps, explore_tau)
      if p is not None:
        p = np.clip(p, 0.0, 0.49)
        soft = np.where(np.eye(n_act, dtype=bool)[y], (1 - p)[:, None],
                        (p / (n_act - 1))[:, None]).astype(np.float32)
    return x, y, held, soft

  rng = np.random.default_rng(seed)
  print(f"behavioral cloning: {ds.num_decisions} decisions from {len(ds.modules)} modules, "
        f"{len(features)} features -> {input_dim} inputs, {epochs} epochs", file=stream)
  for epoch in range(epochs):
    losses = []
    for shard in ds.shards():
      x, y, held, soft = shard_arrays(shard)
      x, y = x[~held], y[~held]
      soft = soft[~held] if soft is not None else None
      order = rng.permutation(len(y))
      for s in range(0, len(order), batch_size):
        idx = order[s:s + batch_size]
        if soft is not None:
          losses.append(float(soft_step(x[idx], soft[idx])))
        else:
          losses.append(float(step(x[idx], y[idx])))
    print(f"  epoch {epoch + 1}/{epochs}: loss {np.mean(losses) if losses else float('nan'):.4f}",
          file=stream)

  weights = {n: v.numpy() for n, v in zip(names, model.trainable_variables)}
  policy = policy_io.Policy(spec, weights)
  counts = {"train": [0, 0], "heldout": [0, 0]}
  per_class = {}
  ent_sum, ent_n = 0.0, 0
  for shard in ds.shards():
    x, y, held, _ = shard_arrays(shard)
    params = policy.arch.dist_params(x)
    pred = policy.arch.greedy(params)
    ent_sum += float(policy.arch.entropy(params).sum())
    ent_n += len(pred)
    for name, mask in (("train", ~held), ("heldout", held)):
      counts[name][0] += int((pred[mask] == y[mask]).sum())
      counts[name][1] += int(mask.sum())
    for c in np.unique(y[held]):
      m = held & (y == c)
      pc = per_class.setdefault(int(c), [0, 0])
      pc[0] += int((pred[m] == c).sum())
      pc[1] += int(m.sum())
  acc = {k: (v[0] / v[1] if v[1] else float("nan")) for k, v in counts.items()}
  metrics = {"train_accuracy": acc["train"], "heldout_accuracy": acc["heldout"],
             "train_decisions": counts["train"][1], "heldout_decisions": counts["heldout"][1],
             "heldout_per_class_accuracy": {str(c): v[0] / v[1] for c, v in per_class.items()},
             "heldout_majority_baseline": (max(v[1] for v in per_class.values()) /
                                           max(1, counts["heldout"][1])) if per_class else None,
             "mean_entropy": ent_sum / max(1, ent_n), "label_smoothing": label_smoothing,
             "explore_eps": explore_eps, "explore_tau": explore_tau,
             "seconds": time.monotonic() - t_start, "trace": str(trace_dir),
             "teacher": str(teacher) if teacher else None}
  out = policy_io.write_policy_dir(output, spec, weights)
  with open(pathlib.Path(out) / "bc_metrics.json", "w") as f:
    json.dump(metrics, f, indent=1)
  print(f"behavioral cloning: train accuracy {acc['train']:.4f}, held-out accuracy "
        f"{acc['heldout']:.4f} on {counts['heldout'][1]} decisions "
        f"(majority class {metrics['heldout_majority_baseline'] or float('nan'):.4f}), "
        f"mean entropy {metrics['mean_entropy']:.3f} nats; "
        f"policy saved to {out}", file=stream)
  return metrics
