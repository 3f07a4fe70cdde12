"""Counterfactual rollouts: per-call-site credit for a trained policy (inlining).

PPO credits every decision of a module with the module's one size change, so on a
module with thousands of call sites the signal per decision is almost nothing. A
rollout probe measures one decision directly: compile the module with the greedy
policy (size S0), then compile it again answering decision number i the other way and
letting the same policy decide everything after it (size Si). Si - S0 is the exact
effect of that one choice, including everything it changes later (the compiler is
deterministic: the first i observations are the same in both compiles, which is
checked). Cost-sensitive imitation on these probes (AggreVaTe: roll in with the policy,
try the other action, roll out with the policy) then moves the policy towards the
better action where it matters, while cloning its own decisions everywhere else.

  probe_corpus(...)   -> DIR/probes-NNNNN.npz shards + DIR/index.json (resumable)
  train_on_probes(...) -> a policy dir fine-tuned from the probed policy
"""
import hashlib
import json
import math
import pathlib
import sys
import time

import numpy as np

from mlgo.training import bc
from mlgo.policy import policy_io


class FlipPolicy:
  """The greedy `policy`, except decision number `flip_at` gets the other action.
  Remembers the raw observation it flipped on (for the determinism check)."""

  def __init__(self, policy, flip_at: int):
    self.policy = policy
    self.flip_at = flip_at
    self.i = 0
    self.flipped_on = None

  def act(self, observation):
    a = self.policy.act(observation)
    if self.i == self.flip_at:
      a = np.int64(1 - int(a))
      self.flipped_on = self.policy.raw_vector(observation)
    self.i += 1
    return a


def _module_rng(name: str, seed: int) -> np.random.Generator:
  h = int(hashlib.sha1(f"{seed}:{name}".encode()).hexdigest()[:12], 16)
  return np.random.default_rng(h)


def choose_positions(margins: np.ndarray, n_low: int, n_random: int,
                     rng: np.random.Generator) -> np.ndarray:
  """The `n_low` decisions the policy is least sure of (smallest |logit margin|) plus
  `n_random` others drawn uniformly: most probes go where a flip is plausible, a few
  check the confident ones."""
  n = len(margins)
  if n == 0:
    return np.zeros(0, np.int64)
  order = np.argsort(np.abs(margins), kind="stable")
  low = order[:min(n_low, n)]
  rest = np.setdiff1d(np.arange(n), low)
  rand = rng.choice(rest, size=min(n_random, len(rest)), replace=False) if len(rest) else []
  return np.sort(np.concatenate([low, np.asarray(rand, np.int64)])).astype(np.int64)


def probe_budget(decisions: int, max_probes: int) -> int:
  """Probes for a module of `decisions` call sites: every one of a small module, about
  sqrt(n)/2 of a large one (its compile is slow, but it holds most of the bytes)."""
  if decisions <= 0:
    return 0
  return int(min(decisions, max_probes, max(4, math.ceil(math.sqrt(decisions) / 2))))


def probe_module(module, spec: dict, weights: dict, max_probes: int, random_fraction: float,
                 anchors: int, llvm_version: int, timeout: float, seed: int):
  """Runs in a worker: one greedy compile and its flip probes. Returns a dict of arrays
  (or {"failed": reason} when the greedy compile itself fails)."""
  from mlgo import env, problems  # pylint: disable=import-outside-toplevel
  problem = problems.get_problem(spec["problem"])
  policy = policy_io.Policy(spec, weights, greedy=True)
  t0 = time.monotonic()
  base = env.compile_module(module, problem, policy, llvm_version=llvm_version,
                            timeout=timeout)
  base_seconds = time.monotonic() - t0
  if not base.ok:
    return {"failed": f"greedy compile: {base.reason}"}
  names = policy.input_names
  traj = base.trajectories[0] if base.trajectories else None
  n = len(traj.actions) if traj is not None else 0
  # Raw rows as float64: exact for the int64 counts, and holds float features (IR2Vec).
  feats = (np.concatenate([np.asarray(traj.features[f], np.float64).reshape(n, -1)
                           for f in names], axis=1)
           if n else np.zeros((0, sum(policy.sizes)), np.float64))
  actions = np.asarray(traj.actions, np.int64).reshape(-1) if n else np.zeros(0, np.int64)
  rng = _module_rng(module.name, seed)
  k = probe_budget(n, max_probes)
  n_rand = int(round(k * random_fraction))
  margins = np.zeros(n)
  if n:
    lg = policy.arch.dist_params(policy.normalizer.encode_scalar_rows(feats))["logits"]
    margins = lg[:, 1] - lg[:, 0]
  pos = choose_positions(margins, k - n_rand, n_rand, rng)
  sizes = np.full(len(pos), np.nan)
  mismatch = np.zeros(len(pos), bool)
  failures = []
  # A flip can make the compile slower (more inlining); allow generous time.
  flip_timeout = min(timeout, max(60.0, 6 * base_seconds))
  for j, p in enumerate(pos):
    fp = FlipPolicy(policy, int(p))
    r = env.compile_module(module, problem, fp, llvm_version=llvm_version,
                           timeout=flip_timeout)
    if not r.ok:
      failures.append(f"flip {int(p)}: {str(r.reason)[:160]}")
      continue
    if fp.flipped_on is None or not np.array_equal(
        np.asarray(fp.flipped_on, np.float64), feats[p]):
      mismatch[j] = True  # the roll-in diverged: this probe measures nothing
      continue
    sizes[j] = float(r.reward["text_size"])
  take = rng.choice(n, size=min(anchors, n), replace=False) if n else np.zeros(0, np.int64)
  return {"module": module.name, "language": getattr(module, "language", ""),
          "base_size": float(base.reward["text_size"]), "decisions": n,
          "base_seconds": base_seconds, "positions": pos, "margins": margins[pos],
          "probe_features": feats[pos], "probe_actions": actions[pos], "probe_sizes": sizes,
          "mismatch": mismatch, "anchor_features": feats[take], "anchor_actions": actions[take],
          "failures": failures}


class ProbeStore:
  """DIR/index.json (policy, feature names, modules done) + probes-NNNNN.npz shards,
  each written atomically; a rerun skips the modules already done."""

  def __init__(self, out_dir, feature_names=None, policy_dir=None):
    self.dir = pathlib.Path(out_dir)
    self.dir.mkdir(parents=True, exist_ok=True)
    self.index_path = self.dir / "index.json"
    if self.index_path.exists():
      with open(self.index_path) as f:
        self.index = json.load(f)
      if feature_names is not None and self.index["features"] != list(feature_names):
        raise ValueError(f"{self.index_path}: probes of a policy with other features; "
                         f"use a new output dir")
    else:
      if feature_names is None:
        raise FileNotFoundError(f"{out_dir}: no probe data (index.json missing)")
      self.index = {"format": 1, "features": list(feature_names),
                    "policy": str(policy_dir), "shards": [], "done": {}, "failed": {}}
    self.pending = []

  def add(self, rec: dict):
    self.pending.append(rec)

  def flush(self):
    if not self.pending:
      return
    name = f"probes-{len(self.index['shards']):05d}.npz"
    arrays, owner = {}, []
    for key in ("positions", "margins", "probe_actions", "probe_sizes", "mismatch"):
      arrays[key] = np.concatenate([r[key] for r in self.pending])
    arrays["probe_features"] = np.concatenate([r["probe_features"] for r in self.pending])
    arrays["anchor_features"] = np.concatenate([r["anchor_features"] for r in self.pending])
    arrays["anchor_actions"] = np.concatenate([r["anchor_actions"] for r in self.pending])
    for i, r in enumerate(self.pending):
      owner.append(np.full(len(r["positions"]), i, np.int64))
    arrays["probe_module"] = np.concatenate(owner) if owner else np.zeros(0, np.int64)
    arrays["anchor_module"] = np.concatenate(
        [np.full(len(r["anchor_actions"]), i, np.int64) for i, r in enumerate(self.pending)])
    arrays["module_names"] = np.array([r["module"] for r in self.pending])
    arrays["base_size"] = np.array([r["base_size"] for r in self.pending])
    tmp = self.dir / (name + ".tmp.npz")
    np.savez(tmp, **arrays)
    tmp.rename(self.dir / name)
    self.index["shards"].append(name)
    for r in self.pending:
      self.index["done"][r["module"]] = {"base_size": r["base_size"],
                                         "decisions": r["decisions"],
                                         "probes": int(len(r["positions"])),
                                         "failures": len(r["failures"])}
    self.save()
    self.pending = []

  def mark_failed(self, module: str, reason: str):
    self.index["failed"][module] = reason[:300]

  def save(self):
    tmp = self.index_path.with_suffix(".tmp")
    with open(tmp, "w") as f:
      json.dump(self.index, f, indent=1)
    tmp.replace(self.index_path)

  def shards(self):
    for name in self.index["shards"]:
      with np.load(self.dir / name) as z:
        yield {k: z[k] for k in z.files}


def probe_corpus(corpus_dir, policy_dir, output, *, split: str = "train",
                 max_probes: int = 16, random_fraction: float = 0.25, anchors: int = 200,
                 max_modules: int | None = None, jobs: int | None = None,
                 timeout: float = 300.0, seed: int = 0, pool: str = "process",
                 stream=sys.stderr) -> dict:
  """Probes every module of `split` (or a seeded sample of `max_modules`) with the
  greedy policy of `policy_dir`. Failed or hung compiles are skipped and counted."""
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from mlgo.util.progress import Progress  # pylint: disable=import-outside-toplevel
  from mlgo.workers.local import make_pool  # pylint: disable=import-outside-toplevel
  corpus = corpus_lib.load_corpus(corpus_dir)
  policy = policy_io.load_policy(policy_dir)
  if not policy.problem.startswith("inlining"):
    raise ValueError(f"{policy_dir}: rollout probes support the inlining problems, "
                     f"not {policy.problem!r}")
  store = ProbeStore(output, policy.input_names, policy_dir)
  modules = corpus.split(split) if split != "all" else list(corpus.modules)
  if not modules:
    raise ValueError(f"{corpus_dir}: no modules in split {split!r}")
  if max_modules and len(modules) > max_modules:
    rng = np.random.default_rng(seed)
    modules = [modules[i] for i in sorted(rng.choice(len(modules), max_modules, replace=False))]
  for why in getattr(corpus, "problems", []):
    print(f"rollout probes: unusable corpus entry skipped: {why}", file=stream)
  todo = [m for m in modules if m.name not in store.index["done"]]
  print(f"rollout probes: {len(todo)} of {len(modules)} modules to do "
        f"({len(modules) - len(todo)} already in {output})", file=stream)
  prog = Progress("probes", len(todo), stream=stream)
  stats = {"modules": 0, "failed": 0, "unusable": len(getattr(corpus, "problems", [])),
           "probes": 0, "better": 0, "worse": 0, "same": 0, "mismatch": 0,
           "probe_failures": 0, "compiles": 0}
  t0 = time.monotonic()
  with make_pool(pool, jobs) as p:
    for m in todo:
      p.submit(probe_module, m, policy.spec, policy.arch.w, max_probes, random_fraction,
               anchors, corpus.llvm_version, timeout, seed)
    for r in p.results():
      name = r.item[0].name
      if not r.ok or "failed" in (r.value or {}):
        why = r.value["failed"] if r.ok else (r.error or "cancelled").strip().splitlines()[-1]
        store.mark_failed(name, why)
        stats["failed"] += 1
        prog.update(failed=1)
        continue
      rec = r.value
      d = rec["probe_sizes"] - rec["base_size"]
      ok = np.isfinite(d)
      stats["modules"] += 1
      stats["probes"] += int(ok.sum())
      stats["better"] += int((d[ok] < 0).sum())
      stats["worse"] += int((d[ok] > 0).sum())
      stats["same"] += int((d[ok] == 0).sum())
      stats["mismatch"] += int(rec["mismatch"].sum())
      stats["probe_failures"] += len(rec["failures"])
      stats["compiles"] += 1 + len(rec["positions"])
      store.add(rec)
      if len(store.pending) >= 25:
        store.flush()
      el = time.monotonic() - t0
      prog.update(extra=f"{stats['probes']} probes ({stats['better']} better, "
                        f"{stats['worse']} worse), {stats['compiles'] / max(el, 1e-9):.1f} compiles/s")
  store.flush()
  store.save()  # the failures, also when nothing was left to flush
  prog.close()
  stats["seconds"] = time.monotonic() - t0
  print("rollout probes: " + " ".join(f"{k}={v if isinstance(v, int) else round(v, 1)}"
                                      for k, v in stats.items()), file=stream)
  return stats


def _widen_module(module, spec: dict, weights: dict, problem_name: str, positions,
                  probe_rows, anchors: int, llvm_version: int, timeout: float, seed: int):
  """Runs in a worker: the probed policy's greedy compile again, under `problem_name`
  (a problem whose compiler sends more features), recording every feature it sends."""
  from mlgo import env, problems  # pylint: disable=import-outside-toplevel
  problem = problems.get_problem(problem_name)
  policy = policy_io.Policy(spec, weights, greedy=True)
  names = [f.name for f in problem.features]
  rows = []

  class Recorder:
    def act(self, obs):
      rows.append(np.concatenate([np.asarray(obs[n], np.float64).reshape(-1) for n in names]))
      return policy.act(obs)
  r = env.compile_module(module, problem, Recorder(), llvm_version=llvm_version,
                         timeout=timeout)
  if not r.ok:
    return {"failed": f"greedy compile: {r.reason}"}
  n = len(rows)
  width = sum(int(np.prod(f.shape)) for f in problem.features)
  full = np.array(rows) if n else np.zeros((0, width))
  # The columns the probed policy saw must be where the probes were taken: the same
  # compile, so the same states (a stale --policy shows up here as mismatches).
  cols, at = [], 0
  for f in problem.features:
    k = int(np.prod(f.shape))
    if f.name in policy.input_names:
      cols.append((policy.input_names.index(f.name), at, k))
    at += k
  order = np.concatenate([np.arange(a, a + k) for _, a, k in sorted(cols)])
  positions = np.asarray(positions, np.int64)
  ok = np.array([p < n and np.array_equal(full[p, order], probe_rows[j])
                 for j, p in enumerate(positions)], bool)
  wide = np.zeros((len(positions), width))
  wide[ok] = full[positions[ok]]
  rng = _module_rng(module.name, seed)
  take = rng.choice(n, size=min(anchors, n), replace=False) if n else np.zeros(0, np.int64)
  return {"rows": wide, "ok": ok, "anchor_features": full[take], "decisions": n}


def widen_probes(src_dir, corpus_dir, problem_name: str, output, *, policy_dir=None,
                 anchors: int = 200, jobs: int | None = None, timeout: float = 300.0,
                 seed: int = 0, pool: str = "process", stream=sys.stderr) -> dict:
  """Copies the probes of `src_dir` into `output` with every feature `problem_name`'s
  compiler sends (e.g. "inlining_ir2vec"), by re-running each module's greedy compile
  of the probed policy (one compile per module, not one per probe). A probe whose state
  is not found again is marked a mismatch (not trained on) and counted."""
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  from mlgo.util.progress import Progress  # pylint: disable=import-outside-toplevel
  from mlgo.workers.local import make_pool  # pylint: disable=import-outside-toplevel
  src = ProbeStore(src_dir)
  policy_dir = policy_dir or src.index["policy"]
  policy = policy_io.load_policy(policy_dir)
  if src.index["features"] != policy.input_names:
    raise ValueError(f"{policy_dir}: not the policy probed in {src_dir} (other features)")
  from mlgo import problems  # pylint: disable=import-outside-toplevel
  problem = problems.get_problem(problem_name)
  wide_names = [f.name for f in problem.features]
  missing = [n for n in policy.input_names if n not in wide_names]
  if missing:
    raise ValueError(f"problem {problem_name!r} does not send {missing[:3]}")
  corpus = corpus_lib.load_corpus(corpus_dir)
  by_name = {m.name: m for m in corpus.modules}
  out = ProbeStore(output, wide_names, f"{policy_dir} (widened from {src_dir})")
  out.index["widened_from"] = str(src_dir)
  recs = {}
  for shard in src.shards():
    for i, name in enumerate(shard["module_names"]):
      name = str(name)
      if name in out.index["done"]:
        continue
      m = shard["probe_module"] == i
      recs[name] = {k: shard[k][m] for k in ("positions", "margins", "probe_actions",
                                             "probe_sizes", "mismatch", "probe_features")}
      recs[name]["base_size"] = float(shard["base_size"][i])
  stats = {"modules": 0, "failed": 0, "probes": 0, "mismatch": 0}
  prog = Progress("widen", len(recs), stream=stream)
  with make_pool(pool, jobs) as p:
    for name, rec in recs.items():
      if name not in by_name:
        out.mark_failed(name, f"not in corpus {corpus_dir}")
        stats["failed"] += 1
        continue
      p.submit(_widen_module, by_name[name], policy.spec, policy.arch.w, problem_name,
               rec["positions"], rec["probe_features"], anchors, corpus.llvm_version,
               timeout, seed)
    for r in p.results():
      name = r.item[0].name
      if not r.ok or "failed" in (r.value or {}):
        out.mark_failed(name, r.value["failed"] if r.ok else str(r.error)[-300:])
        stats["failed"] += 1
        prog.update(failed=1)
        continue
      rec, w = recs[name], r.value
      mismatch = rec["mismatch"] | ~w["ok"]
      out.add({"module": name, "base_size": rec["base_size"], "decisions": w["decisions"],
               "positions": rec["positions"], "margins": rec["margins"],
               "probe_actions": rec["probe_actions"], "probe_sizes": rec["probe_sizes"],
               "mismatch": mismatch, "probe_features": w["rows"],
               "anchor_features": w["anchor_features"],
               "anchor_actions": np.zeros(len(w["anchor_features"]), np.int64),
               "failures": []})
      stats["modules"] += 1
      stats["probes"] += len(mismatch)
      stats["mismatch"] += int((~w["ok"]).sum())
      if len(out.pending) >= 25:
        out.flush()
      prog.update()
  out.flush()
  out.save()
  prog.close()
  print("widen probes: " + " ".join(f"{k}={v}" for k, v in stats.items()), file=stream)
  return stats


def heldout_module(name: str, fraction: float) -> bool:
  """Modules whose probes fine-tuning never sees (agreement on them is reported)."""
  return bc.heldout_module(name, fraction, salt="probe")


def load_probe_data(probe_dirs, feature_names, weight_unit: float = 0.001,
                    weight_cap: float = 4.0, heldout_fraction: float = 0.1):
  """Labelled probes + anchor states from one or more probe dirs.

  A probe whose flip made the module smaller is labelled with the flipped action, one
  that made it bigger with the policy's action; ties are dropped. Weight: the relative
  size change in units of `weight_unit`, clipped to [0.25, weight_cap]."""
  px, py, pw, ph, ax, ah = [], [], [], [], [], []
  for d in probe_dirs:
    store = ProbeStore(d)
    if store.index["features"] != list(feature_names):
      raise ValueError(f"{d}/index.json: features differ from the policy's")
    for s in store.shards():
      names = s["module_names"]
      held_mod = np.array([heldout_module(str(n), heldout_fraction) for n in names], bool)
      base = s["base_size"][s["probe_module"]]
      delta = s["probe_sizes"] - base
      ok = np.isfinite(delta) & (delta != 0) & ~s["mismatch"]
      a = s["probe_actions"]
      label = np.where(delta < 0, 1 - a, a)
      w = np.clip(np.abs(delta) / np.maximum(base, 1.0) / weight_unit, 0.25, weight_cap)
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
                    weight_cap: float = 4.0, heldout_fraction: float = 0.1, seed: int = 0,
                    stream=sys.stderr) -> dict:
  """Fine-tunes the policy of `policy_dir`: cross-entropy towards the better action of
  each probe (weighted by how much it matters) plus cross-entropy towards the policy's
  own decisions on the anchor states (so it changes where probes say so, not elsewhere).
  Reports agreement with the probe labels on modules held out of this fine-tuning."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  base = policy_io.load_policy(policy_dir)
  arch = base.spec["architecture"]
  if arch["type"] != "mlp_categorical":
    raise NotImplementedError(f"{policy_dir}: probes train mlp_categorical policies only")
  data = load_probe_data(probe_dirs, base.input_names, weight_unit, weight_cap,
                         heldout_fraction)
  if len(data["probe_y"]) == 0:
    raise ValueError(f"{', '.join(map(str, probe_dirs))}: no probe changed a module's size; "
                     f"nothing to learn from")

  px = base.normalizer.encode_scalar_rows(data["probe_x"])
  ax = base.normalizer.encode_scalar_rows(data["anchor_x"])
  # Anchors keep the policy being tuned where it is: their labels are its own greedy
  # decisions (probe dirs of earlier rounds hold the states of earlier policies).
  anchor_y = base.arch.greedy(base.arch.dist_params(ax)).astype(np.int64)
  ph, ah = data["probe_held"], data["anchor_held"]
  tf.random.set_seed(seed)
  model, names = bc.keras_mlp(arch, px.shape[1], base.arch.w)
  opt = tf.keras.optimizers.Adam(learning_rate)

  @tf.function
  def step(x1, y1, w1, x2, y2):
    with tf.GradientTape() as tape:
      l1 = tf.nn.sparse_softmax_cross_entropy_with_logits(y1, model(x1, training=True))
      l2 = tf.nn.sparse_softmax_cross_entropy_with_logits(y2, model(x2, training=True))
      loss = probe_weight * tf.reduce_sum(w1 * l1) / tf.reduce_sum(w1) + tf.reduce_mean(l2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
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
  weights = {n: v.numpy() for n, v in zip(names, model.trainable_variables)}
  spec = dict(base.spec)
  spec["fine_tuned_from"] = str(policy_dir)
  spec["probe_dirs"] = [str(d) for d in probe_dirs]
  out = policy_io.write_policy_dir(output, spec, weights)
  metrics = {"before": before, "after": after, "probes": int(len(py)),
             "heldout_probes": int(ph.sum()), "anchors": int(len(ay)), "epochs": epochs,
             "learning_rate": learning_rate, "probe_weight": probe_weight,
             "weight_unit": weight_unit, "weight_cap": weight_cap}
  with open(pathlib.Path(out) / "probe_metrics.json", "w") as f:
    json.dump(metrics, f, indent=1)
  print(f"train on probes: held-out probe agreement {before['heldout_probe'][0]:.3f} -> "
        f"{after['heldout_probe'][0]:.3f}, train {before['train_probe'][0]:.3f} -> "
        f"{after['train_probe'][0]:.3f}; the policy keeps its own decision on "
        f"{anchor_keep[0]:.3f} of held-out anchor states; wrote {out}", file=stream)
  return metrics
