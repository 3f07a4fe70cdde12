"""Sharded, appendable on-disk trajectory dataset (the default trace, collected data).

Layout of a dataset dir:
  index.json         {"version", "problem", "features": [{name,dtype,shape}],
                      "shards": [{"file", "decisions", "trajectories"}],
                      "modules": {name: {...per-module info: ok, reason, reward, decisions}}}
  shard-00000.npz    arrays:  f/<feature> [N, *shape]   per decision
                              action [N], default_action [N] (if known)
                              traj [N] int32             trajectory index within the shard
                              traj_module [T] str, traj_context [T] str
Writers append shards and rewrite index.json atomically (write temp + rename), so a
killed writer leaves a consistent dataset with the shards listed so far. Readers stream
one shard at a time.
"""
import json
import os
import pathlib

import numpy as np

from mlgo.util.files import write_json_atomic

VERSION = 1




class DatasetWriter:
  """Buffers trajectories and flushes a shard every `shard_decisions` decisions."""

  def __init__(self, path, problem: str, features, shard_decisions: int = 50_000):
    self.path = pathlib.Path(path)
    self.path.mkdir(parents=True, exist_ok=True)
    self.shard_decisions = shard_decisions
    idx = self.path / "index.json"
    if idx.exists():
      with open(idx) as f:
        self.index = json.load(f)
      if self.index.get("problem") != problem:
        raise ValueError(f"{idx}: dataset is for problem {self.index.get('problem')!r}, "
                         f"not {problem!r}")
    else:
      self.index = {"version": VERSION, "problem": problem,
                    "features": [_spec_json(s) for s in features], "shards": [],
                    "modules": {}}
    self.feature_names = [f["name"] for f in self.index["features"]]
    self._buf = []
    self._buf_n = 0

  @property
  def modules(self) -> dict:
    return self.index["modules"]

  def add(self, module: str, trajectories, module_info: dict):
    """trajectories: objects with .context, .features (dict), .actions, .default_actions."""
    for t in trajectories:
      n = len(t.actions)
      if n == 0:
        continue
      self._buf.append((module, t))
      self._buf_n += n
    self.index["modules"][module] = module_info
    if self._buf_n >= self.shard_decisions:
      self.flush()

  def flush(self):
    if self._buf:
      arrays = {}
      for name in self.feature_names:
        arrays["f/" + name] = np.concatenate([np.asarray(t.features[name]) for _, t in self._buf])
      arrays["action"] = np.concatenate([_actions(t) for _, t in self._buf])
      if all(t.default_actions is not None for _, t in self._buf):
        arrays["default_action"] = np.concatenate(
            [np.asarray(t.default_actions).reshape(len(t.actions)) for _, t in self._buf])
      arrays["traj"] = np.concatenate([np.full(len(t.actions), i, np.int32)
                                       for i, (_, t) in enumerate(self._buf)])
      arrays["traj_module"] = np.array([m for m, _ in self._buf])
      arrays["traj_context"] = np.array([str(t.context) for _, t in self._buf])
      fname = f"shard-{len(self.index['shards']):05d}.npz"
      tmp = self.path / (fname + ".tmp.npz")
      np.savez(tmp, **arrays)
      os.replace(tmp, self.path / fname)
      self.index["shards"].append({"file": fname, "decisions": int(self._buf_n),
                                   "trajectories": len(self._buf)})
      self._buf, self._buf_n = [], 0
    write_json_atomic(self.path / "index.json", self.index, indent=1)

  def close(self):
    self.flush()


def _actions(t):
  """Actions as [n] (scalar actions) or [n, *shape] (vector actions)."""
  a = np.asarray(t.actions)
  if a.ndim > 1 and int(np.prod(a.shape[1:])) == 1:
    a = a.reshape(len(a))
  return a


def _spec_json(s):
  if isinstance(s, dict):
    return s
  return {"name": s.name, "dtype": np.dtype(s.dtype).name, "shape": list(s.shape)}


class Dataset:
  """Reader: `index`, `shards()` iterates dicts of arrays, one shard at a time."""

  def __init__(self, path):
    self.path = pathlib.Path(path)
    idx = self.path / "index.json"
    if not idx.exists():
      raise FileNotFoundError(f"{self.path}: not a trajectory dataset (no index.json)")
    with open(idx) as f:
      self.index = json.load(f)
    if self.index.get("version") != VERSION:
      raise ValueError(f"{idx}: unsupported dataset version {self.index.get('version')!r}")

  @property
  def problem(self) -> str:
    return self.index["problem"]

  @property
  def features(self) -> list:
    return self.index["features"]

  @property
  def modules(self) -> dict:
    return self.index["modules"]

  @property
  def num_decisions(self) -> int:
    return sum(s["decisions"] for s in self.index["shards"])

  def shards(self):
    for s in self.index["shards"]:
      with np.load(self.path / s["file"]) as z:
        yield {k: z[k] for k in z.files}


class Datasets:
  """Several datasets of one problem read as one: e.g. a teacher's trace and the traces
  of its students' own compiles (distillation rounds, bc.train_bc). Module names may
  repeat across them; `modules` keeps the last one's entry."""

  def __init__(self, paths):
    self.parts = [Dataset(p) for p in paths]
    if not self.parts:
      raise ValueError("no dataset given")
    first = self.parts[0]
    names = [f["name"] for f in first.features]
    for d in self.parts[1:]:
      if d.problem != first.problem:
        raise ValueError(f"{d.path}: a dataset for {d.problem!r}, but {first.path} is for "
                         f"{first.problem!r}")
      if [f["name"] for f in d.features] != names:
        raise ValueError(f"{d.path}: its features differ from {first.path}'s")
    self.path = first.path

  @property
  def problem(self) -> str:
    return self.parts[0].problem

  @property
  def features(self) -> list:
    return self.parts[0].features

  @property
  def modules(self) -> dict:
    out = {}
    for d in self.parts:
      out.update(d.modules)
    return out

  @property
  def num_decisions(self) -> int:
    return sum(d.num_decisions for d in self.parts)

  def shards(self):
    for d in self.parts:
      yield from d.shards()


def open_traces(paths):
  """One dataset dir, or several read as one (Datasets)."""
  if isinstance(paths, (list, tuple)):
    return Datasets(paths) if len(paths) != 1 else Dataset(paths[0])
  return Dataset(paths)
