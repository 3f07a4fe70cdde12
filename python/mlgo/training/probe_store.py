"""Where rollout probes live: DIR/index.json (the probed policy, its feature names, the
modules done and failed) and probes-NNNNN.npz shards, each written atomically, so a
probe run that stops resumes where it was (mlgo.training.rollouts writes them,
probe_tuning and probe_widening read them)."""
import json
import pathlib

import numpy as np


def probe_alternatives(shard) -> np.ndarray:
  """The action each probe of a stored shard tried; stores written before eviction
  probes existed hold inlining flips only: the other answer."""
  if "probe_alternatives" in shard:
    return shard["probe_alternatives"]
  return 1 - shard["probe_actions"]


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
    for key in ("positions", "margins", "probe_actions", "probe_alternatives", "probe_sizes",
                "mismatch"):
      arrays[key] = np.concatenate([r[key] for r in self.pending])
    # True: the probe's score change is its credit in a compile of several flips
    # (multi_flip), not a measured module change.
    arrays["probe_attributed"] = np.concatenate(
        [r.get("probe_attributed", np.zeros(len(r["positions"]), bool)) for r in self.pending])
    # > 0: the probe is one call of a callee whose calls were all flipped in one compile
    # (callee_groups; the number tells that module's compiles apart), 0: a single flip.
    arrays["probe_group"] = np.concatenate(
        [r.get("probe_group", np.zeros(len(r["positions"]), np.int64)) for r in self.pending])
    for key in ("probe_predicted", "probe_key_base", "probe_key_scores"):
      arrays[key] = np.concatenate(
          [r.get(key, np.full(len(r["positions"]), np.nan)) for r in self.pending])
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
      # [callee, majority action, calls flipped, of them the policy's own, measured change]
      if r.get("callees_measured"):
        self.index["done"][r["module"]]["callees"] = [list(c) for c in r["callees_measured"]]
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
