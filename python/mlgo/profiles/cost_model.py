"""A learned cost model of a machine basic block, fitted on profiled runs of real programs.

The estimate is runtime_check's cycle formula, per execution of the block:

    cycles = instructions + 10 * L1 misses + 100 * LL misses + 15 * mispredicts

`instructions` is read off the block (a block runs whole); the three event counts per
execution are what the profile measures and the static features cannot: each is a
non-negative linear function of the block's features (mlgo.profiles.blocks.FEATURES plus
a constant), fitted by non-negative least squares on the blocks of the training
programs, each block weighted by sqrt(executions) so that hot blocks count without one
interpreter loop owning the fit. The weights are therefore rates: "a reload from a stack
slot misses L1 0.1% of the time, another load 3%", "a conditional branch mispredicts
4% of the time". Non-negative weights keep the model monotone: more spill code never
makes a block cheaper, which a reward needs.

A function's cost is the sum over its blocks of rel_freq(block) * cycles(block), with
the block's frequency relative to the entry either measured (executions / entry
executions) or, in training compiles without a profile, llc's static estimate from the
basic-block address map (mlgo.profiles.bbmap): estimated cycles per call.
"""
import json
import os
import pathlib

import numpy as np

from mlgo.profiles import blocks as blocks_lib

VERSION = 1
HEADS = {  # name -> (profile events summed, cycles per event)
    "l1_misses": (("I1mr", "D1mr", "D1mw"), 10.0),
    "ll_misses": (("ILmr", "DLmr", "DLmw"), 100.0),
    "mispredicts": (("Bcm", "Bim"), 15.0),
}
INPUTS = blocks_lib.FEATURES + ("const",)


class ModelError(ValueError):
  pass


def feature_matrix(rows) -> np.ndarray:
  """[n, len(INPUTS)] of block feature dicts (rows of blocks.join or Block.features())."""
  x = np.array([[float(r.get(k, 0.0)) for k in blocks_lib.FEATURES] for r in rows],
               dtype=np.float64).reshape(len(rows), len(blocks_lib.FEATURES))
  return np.hstack([x, np.ones((len(rows), 1))])


def measured_per_execution(rows) -> dict:
  """{head: [n] events per execution, "instructions": Ir per execution, "cycles": the
  formula} of profiled rows (executions > 0)."""
  ex = np.array([max(1, r["executions"]) for r in rows], dtype=np.float64)
  out = {h: np.array([sum(r.get(e, 0) for e in evs) for r in rows], np.float64) / ex
         for h, (evs, _) in HEADS.items()}
  out["instructions"] = np.array([r["Ir"] for r in rows], np.float64) / ex
  out["cycles"] = out["instructions"] + sum(HEADS[h][1] * out[h] for h in HEADS)
  return out


def nnls(a: np.ndarray, b: np.ndarray, iters: int = 500) -> np.ndarray:
  """argmin ||a w - b||, w >= 0 (cyclic coordinate descent; a has few columns)."""
  g = a.T @ a
  c = a.T @ b
  w = np.zeros(a.shape[1])
  for _ in range(iters):
    prev = w.copy()
    for j in range(len(w)):
      if g[j, j] <= 0:
        continue
      w[j] = max(0.0, w[j] + (c[j] - g[j] @ w) / g[j, j])
    if np.max(np.abs(w - prev)) <= 1e-12 * (1 + np.max(np.abs(w))):
      break
  return w


class CostModel:
  def __init__(self, weights: dict, meta: dict | None = None):
    self.weights = {h: np.asarray(weights[h], np.float64) for h in HEADS}
    for h, w in self.weights.items():
      if w.shape != (len(INPUTS),) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ModelError(f"head {h}: need {len(INPUTS)} finite non-negative weights")
    self.meta = dict(meta or {})

  @classmethod
  def fit(cls, rows, meta=None) -> "CostModel":
    rows = [r for r in rows if r.get("executions", 0) > 0]
    if len(rows) < len(INPUTS):
      raise ModelError(f"{len(rows)} executed blocks: too few to fit {len(INPUTS)} inputs")
    x = feature_matrix(rows)
    y = measured_per_execution(rows)
    sw = np.sqrt(np.array([r["executions"] for r in rows], np.float64))[:, None]
    weights = {h: nnls(x * sw, y[h] * sw[:, 0]) for h in HEADS}
    return cls(weights, meta)

  def predict_events(self, x: np.ndarray) -> dict:
    return {h: x @ w for h, w in self.weights.items()}

  def predict(self, x: np.ndarray) -> np.ndarray:
    """Estimated cycles per execution of each block ([n, len(INPUTS)] inputs)."""
    ev = self.predict_events(x)
    return x[:, INPUTS.index("instructions")] + sum(HEADS[h][1] * ev[h] for h in HEADS)

  def predict_rows(self, rows) -> np.ndarray:
    return self.predict(feature_matrix(rows)) if rows else np.zeros(0)

  def function_costs(self, blocks) -> dict:
    """{function: sum of rel_freq * cycles} over Blocks that carry an address-map
    frequency (functions without a map are left out)."""
    mapped = [b for b in blocks if b.rel_freq is not None]
    if not mapped:
      return {}
    cyc = self.predict_rows([b.features() for b in mapped])
    out = {}
    for b, c in zip(mapped, cyc):
      out[b.function] = out.get(b.function, 0.0) + float(b.rel_freq) * float(c)
    return out

  def describe(self) -> str:
    lines = []
    for h, w in self.weights.items():
      terms = [f"{w[i]:.4g} {n}" for i, n in enumerate(INPUTS) if w[i] > 0]
      lines.append(f"{h} per execution = " + (" + ".join(terms) or "0"))
    return "\n".join(lines)

  def save(self, path):
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": VERSION, "inputs": list(INPUTS),
           "penalties": {h: c for h, (_, c) in HEADS.items()},
           "weights": {h: [float(v) for v in w] for h, w in self.weights.items()},
           "meta": self.meta}
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    os.replace(tmp, p)

  @classmethod
  def load(cls, path) -> "CostModel":
    p = pathlib.Path(path)
    try:
      doc = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
      raise ModelError(f"{p}: not a cost model: {e}") from e
    if doc.get("version") != VERSION or doc.get("inputs") != list(INPUTS):
      raise ModelError(f"{p}: cost model version {doc.get('version')} with inputs "
                       f"{doc.get('inputs')}; this code reads version {VERSION} with "
                       f"{list(INPUTS)} (retrain with `perf_model train`)")
    try:
      return cls(doc["weights"], doc.get("meta"))
    except (KeyError, ModelError) as e:
      raise ModelError(f"{p}: {e}") from e


def shipped_model_path() -> pathlib.Path:
  """MLGO_PERF_MODEL, else models/perf_model/cost_model.json of the checkout/runfiles."""
  env = os.environ.get("MLGO_PERF_MODEL")
  if env:
    return pathlib.Path(env)
  from mlgo.util import cli  # pylint: disable=import-outside-toplevel
  rel = "models/perf_model/cost_model.json"
  cands = cli.runfile_candidates(rel)
  root = cli.repo_root()
  if root is not None:
    cands.append(root / rel)
  for c in cands:
    if c.exists():
      return c
  raise ModelError(f"no cost model: set MLGO_PERF_MODEL or train one into {rel} "
                   f"(`bazel run //tools:perf_model -- train`)")


_LOADED = {}


def load_cached(path=None) -> CostModel:
  p = str(path or shipped_model_path())
  if p not in _LOADED:
    _LOADED[p] = CostModel.load(p)
  return _LOADED[p]
