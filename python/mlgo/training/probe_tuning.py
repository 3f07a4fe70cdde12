"""Fine-tuning a policy on rollout probes (the learning step of the rollouts).

Labels each probe with the better action and trains the probed policy towards it
(weighted by the size change), plus towards its own decisions on anchor states so it
moves only where the probes say so. Separate from rollouts.py: this half reads finished
probe dirs and needs TensorFlow, no compiler.

  train_on_probes(...) -> a policy dir fine-tuned from the probed policy
"""
import json
import math
import pathlib
import sys

import numpy as np

from mlgo.training import bc, rollouts
from mlgo.evaluation.report import REGRESSION_THRESHOLD as REGRESSION
from mlgo.policy import policy_io



# The share of modules whose probes fine-tuning never trains on (by a hash of the name).
HELDOUT_FRACTION = 0.1


def heldout_module(name: str, fraction: float = HELDOUT_FRACTION) -> bool:
  """Modules whose probes fine-tuning never sees (agreement on them is reported)."""
  return bc.heldout_module(name, fraction, salt="probe")


def regression_cost(size, default, penalty: float):
  """A module's size with every byte beyond 1.01 x the default's counted 1 + `penalty`
  times (the modules users notice first are those that got bigger)."""
  return size + penalty * np.maximum(0.0, size - (1.0 + REGRESSION) * default)


def _open_store(d, feature_names):
  """A probe dir to read from, refused if its probes have other features."""
  store = rollouts.ProbeStore(d)
  if store.index["features"] != list(feature_names):
    raise ValueError(f"{d}/index.json: features differ from the policy's")
  return store


def _held_modules(names, fraction: float) -> np.ndarray:
  """Per module name of a shard: is it held out of fine-tuning (heldout_module)?"""
  return np.array([heldout_module(str(n), fraction) for n in names], bool)


def best_rounds(probe_dirs) -> dict:
  """module -> the probe dir, of `probe_dirs` (in round order), whose probed policy's
  greedy compile of that module was the smallest; a tie goes to the later dir."""
  best = {}
  for d in probe_dirs:
    for m, info in rollouts.ProbeStore(d).index["done"].items():
      size = info.get("base_size")
      if size is not None and np.isfinite(size) and (m not in best or size <= best[m][0]):
        best[m] = (float(size), d)
  return {m: d for m, (_, d) in best.items()}


def load_best_anchors(probe_dirs, feature_names, heldout_fraction: float = HELDOUT_FRACTION):
  """Anchor states for 'best' anchors: each module's from the probe dir of its best round
  (best_rounds), with the actions that round's policy took there as labels. Returns
  (states, labels, held-out mask, {probe dir: modules taken from it})."""
  chosen = best_rounds(probe_dirs)
  xs, ys, hs = [], [], []
  for d in probe_dirs:
    for s in _open_store(d, feature_names).shards():
      names = [str(n) for n in s["module_names"]]
      mine = np.array([chosen.get(n) == d for n in names], bool)
      keep = mine[s["anchor_module"]]
      held = _held_modules(names, heldout_fraction)
      xs.append(s["anchor_features"][keep])
      ys.append(s["anchor_actions"][keep])
      hs.append(held[s["anchor_module"]][keep])
  nf = len(feature_names)
  counts = {str(d): sum(1 for v in chosen.values() if v == d) for d in probe_dirs}
  return (np.concatenate(xs) if xs else np.zeros((0, nf)),
          np.concatenate(ys).astype(np.int64) if ys else np.zeros(0, np.int64),
          np.concatenate(hs).astype(bool) if hs else np.zeros(0, bool), counts)


# Probe weightings (load_probe_data); BYTE_UNIT: the bytes that weigh 1 in
# "module_or_bytes" (with the cap of 4, changes of 64 bytes and more weigh the most).
WEIGHTINGS = ("module", "key", "module_or_bytes")
BYTE_UNIT = 16.0


def load_probe_data(probe_dirs, feature_names, weight_unit: float = 0.001,
                    weight_cap: float = 4.0, heldout_fraction: float = HELDOUT_FRACTION,
                    weighting: str = "module", regression_penalty: float = 0.0,
                    default_sizes: dict | None = None, byte_unit: float = BYTE_UNIT):
  """Labelled probes + anchor states from one or more probe dirs.

  A probe whose alternative lowered the module's score is labelled with the alternative,
  one that raised it with the policy's action; ties are dropped. Weight: the relative
  change in units of `weight_unit`, clipped to [0.25, weight_cap]; relative to the
  module's score (weighting "module") or to that of the probed decision's own key
  (weighting "key": for eviction the function, whose cost is the only one a flip
  changes; a hot function then weighs no more than any other, as in the per-function
  reward). Stores from before key scores were recorded only allow "module".
  "module_or_bytes": the larger of the "module" weight and the absolute change in units of
  `byte_unit` bytes (clipped the same way). Relative weights alone leave a large module's
  flips at the floor (a 100-byte saving in a 400 kB module is 0.25 where 20 bytes of a
  2 kB module is 4): in C18's probes modules of 100 kB or more held 38% of the training
  bytes and 0.8% of the weight. The larger of the two keeps every small-module weight and
  lifts the large modules' toward their share of the bytes, the figure being judged.

  regression_penalty (with `default_sizes`, module -> the default's score; weighting
  "module" or "module_or_bytes"): a probe's weight is scaled by how much more its change
  costs under `regression_cost` than in plain bytes (1 to 1 + penalty), so decisions of
  modules that are, or would become, more than 1% bigger than the default weigh more. The
  cost rises with the size, so no label changes."""
  if weighting not in WEIGHTINGS:
    raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, not {weighting!r}")
  if byte_unit <= 0:
    raise ValueError(f"byte_unit must be > 0, not {byte_unit}")
  if regression_penalty < 0:
    raise ValueError(f"regression_penalty must be >= 0, not {regression_penalty}")
  if regression_penalty and (default_sizes is None or weighting == "key"):
    raise ValueError("regression_penalty needs default_sizes (module -> default score) "
                     "and weighting 'module' or 'module_or_bytes'")
  px, py, pw, ph, ax, ah = [], [], [], [], [], []
  for d in probe_dirs:
    for s in _open_store(d, feature_names).shards():
      names = s["module_names"]
      held_mod = _held_modules(names, heldout_fraction)
      if weighting == "key":
        if "probe_key_base" not in s:
          raise ValueError(f"{d}: probes without per-key scores (recorded before they "
                           f"were); use weighting 'module' or probe again")
        base, delta = s["probe_key_base"], s["probe_key_scores"] - s["probe_key_base"]
      else:
        base = s["base_size"][s["probe_module"]]
        delta = s["probe_sizes"] - base
      ok = np.isfinite(delta) & (delta != 0) & ~s["mismatch"]
      a = s["probe_actions"]
      label = np.where(delta < 0, rollouts.probe_alternatives(s), a)
      w = np.clip(np.abs(delta) / np.maximum(base, 1.0) / weight_unit, 0.25, weight_cap)
      if weighting == "module_or_bytes":
        w = np.maximum(w, np.clip(np.abs(delta) / byte_unit, 0.25, weight_cap))
      if regression_penalty:
        dft = np.array([default_sizes.get(str(n), np.nan) for n in names])[s["probe_module"]]
        known = np.isfinite(dft) & np.isfinite(delta) & (delta != 0)
        pen = (regression_cost(base + delta, dft, regression_penalty)
               - regression_cost(base, dft, regression_penalty))
        w = np.where(known, w * np.abs(pen) / np.where(known, np.abs(delta), 1.0), w)
      px.append(s["probe_features"][ok])
      py.append(label[ok])
      pw.append(w[ok])
      ph.append(held_mod[s["probe_module"]][ok])
      ax.append(s["anchor_features"])
      ah.append(held_mod[s["anchor_module"]])
  cat = lambda xs, shape=(0,): np.concatenate(xs) if xs else np.zeros(shape)  # noqa: E731
  nf = len(feature_names)
  return {"probe_x": cat(px, (0, nf)), "probe_y": cat(py).astype(np.int64),
          "probe_w": cat(pw).astype(np.float32), "probe_held": cat(ph).astype(bool),
          "anchor_x": cat(ax, (0, nf)),
          "anchor_held": cat(ah).astype(bool)}


def train_on_probes(policy_dir, probe_dirs, output, *, epochs: int = 30,
                    learning_rate: float = 3e-4, probe_weight: float = 1.0,
                    batch_size: int = 256, weight_unit: float = 0.001,
                    weight_cap: float = 4.0, heldout_fraction: float = HELDOUT_FRACTION,
                    seed: int = 0, anchor_targets: str = "greedy", weighting: str = "module",
                    regression_penalty: float = 0.0, default_sizes: dict | None = None,
                    best_anchor_dirs=None, stream=sys.stderr) -> dict:
  """Fine-tunes the policy of `policy_dir`: cross-entropy towards the better action of
  each probe (weighted by how much it matters) plus cross-entropy towards the policy's
  own decisions on the anchor states (so it changes where probes say so, not elsewhere).
  Reports agreement with the probe labels on modules held out of this fine-tuning.

  anchor_targets: "greedy" (the policy's greedy decision as a hard label; the inlining
  models were tuned so) or "distribution" (its whole action distribution). Hard labels
  also sharpen the policy, and where its top two are close that flips decisions no probe
  asked about; against its own distribution the anchor term is at its minimum where the
  policy starts, so only the probes move it.

  best_anchor_dirs (all probe dirs of a chain so far, in round order): the anchor states
  are instead each module's from the round whose policy compiled it smallest, labelled
  with the actions that policy took ("best" anchors). The policy is then pulled back to
  the best trajectory found for every module, not only kept where it is: a round that
  loses a module another round had made small (a chain's policies trade modules round
  to round) is told so."""
  if anchor_targets not in ("greedy", "distribution"):
    raise ValueError(f"anchor_targets must be 'greedy' or 'distribution', not "
                     f"{anchor_targets!r}")
  if best_anchor_dirs and anchor_targets != "greedy":
    raise ValueError("best anchors are labelled with recorded actions: they need "
                     "anchor_targets='greedy'")
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from mlgo.training import networks  # pylint: disable=import-outside-toplevel
  base = policy_io.load_policy(policy_dir)
  arch = base.spec["architecture"]
  if not networks.is_categorical(arch):
    raise ValueError(f"{policy_dir}: probes fine-tune categorical policies only, not "
                     f"{arch['type']!r}")
  data = load_probe_data(probe_dirs, base.input_names, weight_unit, weight_cap,
                         heldout_fraction, weighting, regression_penalty, default_sizes)
  if len(data["probe_y"]) == 0:
    raise ValueError(f"{', '.join(map(str, probe_dirs))}: no probe changed a module's size; "
                     f"nothing to learn from")

  best_counts = None
  if best_anchor_dirs:
    ax_raw, anchor_y, data["anchor_held"], best_counts = load_best_anchors(
        best_anchor_dirs, base.input_names, heldout_fraction)
    ax = base.normalizer.encode_scalar_rows(ax_raw)
    print("train on probes: best anchors, modules by round: " + ", ".join(
        f"{pathlib.Path(d).parent.name}: {n}" for d, n in best_counts.items()), file=stream)
  else:
    ax = base.normalizer.encode_scalar_rows(data["anchor_x"])
    # Anchors keep the policy being tuned where it is: their labels are its own greedy
    # decisions (probe dirs of earlier rounds hold the states of earlier policies).
    anchor_y = base.arch.greedy(base.arch.dist_params(ax)).astype(np.int64)
  px = base.normalizer.encode_scalar_rows(data["probe_x"])
  ph, ah = data["probe_held"], data["anchor_held"]
  tf.random.set_seed(seed)
  actor = networks.actor_with_weights(arch, px.shape[1], base.arch.w)
  train_vars = actor.trainable_variables

  def model(x, training=False, net=actor):
    return net(x, step_type=None, network_state=(), training=training)[0].logits_parameter()

  if anchor_targets == "distribution":
    # The starting policy, frozen, run on the same batch through the same kernels. The
    # cross-entropy's gradient on the logits is softmax(z) - target; written out with
    # one softmax op for both it is exactly zero until the weights move. (The fused
    # cross-entropy op leaves ~1e-8 there, and Adam turns such noise into full steps.)
    frozen = networks.actor_with_weights(arch, px.shape[1], base.arch.w)

    def anchor_loss(x2, y2):
      del y2
      target = tf.stop_gradient(tf.nn.softmax(model(x2, net=frozen)))
      z = model(x2, training=True)
      ce = tf.nn.softmax_cross_entropy_with_logits(target, z)   # the value reported
      surrogate = tf.reduce_sum(tf.stop_gradient(tf.nn.softmax(z) - target) * z, axis=-1)
      return tf.stop_gradient(ce) + surrogate - tf.stop_gradient(surrogate)
  else:
    def anchor_loss(x2, y2):
      return tf.nn.sparse_softmax_cross_entropy_with_logits(y2, model(x2, training=True))

  opt = tf.keras.optimizers.Adam(learning_rate)

  @tf.function
  def step(x1, y1, w1, x2, y2):
    with tf.GradientTape() as tape:
      l1 = tf.nn.sparse_softmax_cross_entropy_with_logits(y1, model(x1, training=True))
      l2 = anchor_loss(x2, y2)
      loss = probe_weight * tf.reduce_sum(w1 * l1) / tf.reduce_sum(w1) + tf.reduce_mean(l2)
    opt.apply_gradients(zip(tape.gradient(loss, train_vars), train_vars))
    return loss

  def agreement(x, y, w):
    if len(y) == 0:
      return float("nan"), float("nan")
    pred = np.argmax(model(x).numpy(), axis=-1)
    hit = pred == y
    return float(hit.mean()), float((hit * w).sum() / w.sum())

  rng = np.random.default_rng(seed)
  tr_p, tr_a = np.flatnonzero(~ph), np.flatnonzero(~ah)
  if len(tr_p) == 0 or len(tr_a) == 0:
    raise ValueError("too few probe modules to hold some out; probe more modules")
  before = {"heldout_probe": agreement(px[ph], data["probe_y"][ph], data["probe_w"][ph]),
            "train_probe": agreement(px[~ph], data["probe_y"][~ph], data["probe_w"][~ph])}
  print(f"train on probes: {len(tr_p)} probes ({int(ph.sum())} held out), {len(tr_a)} anchor "
        f"states; before: probe agreement train {before['train_probe'][0]:.3f} held-out "
        f"{before['heldout_probe'][0]:.3f} (weighted {before['heldout_probe'][1]:.3f})",
        file=stream)
  pw, py, ay = data["probe_w"], data["probe_y"], anchor_y
  steps = max(1, math.ceil(len(tr_p) / batch_size))
  for epoch in range(epochs):
    order = rng.permutation(tr_p)
    losses = []
    for s in range(steps):
      i1 = order[s * batch_size:(s + 1) * batch_size]
      i2 = rng.choice(tr_a, size=batch_size)
      losses.append(float(step(px[i1], py[i1], pw[i1], ax[i2], ay[i2])))
    if (epoch + 1) % max(1, epochs // 5) == 0 or epoch + 1 == epochs:
      hp = agreement(px[ph], py[ph], pw[ph])
      print(f"  epoch {epoch + 1}/{epochs}: loss {np.mean(losses):.4f}, held-out probe "
            f"agreement {hp[0]:.3f} (weighted {hp[1]:.3f})", file=stream)
  anchor_keep = agreement(ax[ah], ay[ah], np.ones(int(ah.sum()), np.float32))
  after = {"heldout_probe": agreement(px[ph], py[ph], pw[ph]),
           "train_probe": agreement(px[~ph], py[~ph], pw[~ph]),
           "heldout_anchor_agreement": anchor_keep[0]}
  weights = networks.actor_weights(actor, arch)
  spec = dict(base.spec)
  spec["fine_tuned_from"] = str(policy_dir)
  spec["probe_dirs"] = [str(d) for d in probe_dirs]
  out = policy_io.write_policy_dir(output, spec, weights)
  metrics = {"before": before, "after": after, "probes": int(len(py)),
             "heldout_probes": int(ph.sum()), "anchors": int(len(ay)), "epochs": epochs,
             "learning_rate": learning_rate, "probe_weight": probe_weight,
             "anchor_targets": anchor_targets, "weighting": weighting,
             "weight_unit": weight_unit, "weight_cap": weight_cap,
             "regression_penalty": regression_penalty,
             "anchor_source": "best" if best_anchor_dirs else "current"}
  if best_counts is not None:
    metrics["best_anchor_modules"] = best_counts
  with open(pathlib.Path(out) / "probe_metrics.json", "w") as f:
    json.dump(metrics, f, indent=1)
  print(f"train on probes: held-out probe agreement {before['heldout_probe'][0]:.3f} -> "
        f"{after['heldout_probe'][0]:.3f}, train {before['train_probe'][0]:.3f} -> "
        f"{after['train_probe'][0]:.3f}; the policy keeps its own decision on "
        f"{anchor_keep[0]:.3f} of held-out anchor states; wrote {out}", file=stream)
  return metrics
