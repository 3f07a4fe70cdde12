"""Default trace of a prepared regalloc corpus: features + the default heuristic's choices.

Each module is compiled by llc with the ML advisor's interactive channel open (so we get
exactly the features a policy sees) and the tracer plugin keeping the default heuristic
in charge and logging its choice per decision (cc/regalloc_trace). The compile is the
default one, byte for byte.

Stored as one .npz per module under the trace dir (appendable, resumable):
  f/<feature> [N, *shape]  features, as the compiler sent them
  default     [N]          the default's decision (eviction: column, -1 if the
                           default chose a register outside the columns; priority:
                           the default priority)
  func        [N] int32    index into `functions`
  functions   [F] str
Decisions are subsampled per module to at most `max_decisions` (uniformly, seeded), so
huge functions do not dominate and the trace stays small.
"""
import concurrent.futures as cf
import json
import os
import pathlib
import sys
import time

import numpy as np

from mlgo.regalloc import llc_run
from mlgo.util.progress import Progress


def _trace_one(bc_path, llc_flags, problem, llvm_version, timeout):
  return llc_run.run_llc(bc_path, llc_flags, problem, None, trace=True,
                         llvm_version=llvm_version, timeout=timeout)


def _safe(name: str) -> str:
  return name.replace("/", "__")


def generate(prepared, problem: str, out_dir, modules=None, *, jobs: int = 2,
             max_decisions: int = 400, timeout: float = 300.0, seed: int = 0,
             stream=sys.stderr) -> dict:
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  modules = list(modules if modules is not None else prepared.split("train"))
  todo = [m for m in modules if not (out / (_safe(m.name) + ".npz")).exists()
          and not (out / (_safe(m.name) + ".failed")).exists()]
  print(f"regalloc trace ({problem}): {len(todo)} modules to trace "
        f"({len(modules) - len(todo)} already in {out})", file=stream, flush=True)
  progress = Progress("trace", len(todo), stream=stream)
  stats = {"modules": 0, "failed": 0, "decisions": 0, "kept": 0}
  rng = np.random.default_rng(seed)
  with cf.ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
    futs = {ex.submit(_trace_one, m.bc_path, m.llc_flags, problem, prepared.llvm_version,
                      timeout): m for m in todo}
    for fut in cf.as_completed(futs):
      m = futs[fut]
      try:
        res = fut.result()
      except Exception as e:  # a worker crash is a failed module, not a failed trace
        res = llc_run.LlcResult(False, f"{type(e).__name__}: {e}", {}, [])
      if not res.ok:
        (out / (_safe(m.name) + ".failed")).write_text(str(res.reason) + "\n")
        stats["failed"] += 1
        progress.update(failed=1)
        continue
      save_module(out / (_safe(m.name) + ".npz"), res, max_decisions, rng)
      stats["modules"] += 1
      stats["decisions"] += res.decisions
      progress.update(extra=f"{stats['decisions']} decisions")
  progress.close()
  return stats


def save_module(path, res, max_decisions: int, rng):
  trajs = [t for t in res.trajectories if len(t.actions)]
  funcs = [t.name for t in trajs]
  if not trajs:
    np.savez(path, functions=np.array([], dtype=str), func=np.zeros(0, np.int32),
             default=np.zeros(0))
    return
  names = list(trajs[0].features)
  feats = {n: np.concatenate([t.features[n] for t in trajs]) for n in names}
  default = np.concatenate([t.default_actions for t in trajs])
  func = np.concatenate([np.full(len(t.actions), i, np.int32) for i, t in enumerate(trajs)])
  n = len(default)
  if n > max_decisions:
    keep = np.sort(rng.choice(n, max_decisions, replace=False))
    feats = {k: v[keep] for k, v in feats.items()}
    default, func = default[keep], func[keep]
  tmp = str(path) + ".tmp.npz"
  np.savez(tmp, functions=np.array(funcs), func=func, default=default,
           **{f"f/{k}": v for k, v in feats.items()})
  os.replace(tmp, path)


def load(trace_dir, module_names=None):
  """Concatenates the trace (optionally of some modules): features, default, groups."""
  d = pathlib.Path(trace_dir)
  files = sorted(d.glob("*.npz"))
  if module_names is not None:
    want = {_safe(n) + ".npz" for n in module_names}
    files = [f for f in files if f.name in want]
  feats, default, group = {}, [], []
  for gi, f in enumerate(files):
    with np.load(f) as z:
      if len(z["default"]) == 0:
        continue
      for k in z.files:
        if k.startswith("f/"):
          feats.setdefault(k[2:], []).append(z[k])
      default.append(z["default"])
      # A group is one function of one module (held-out agreement is per function).
      group.append(gi * 100000 + z["func"].astype(np.int64))
  if not default:
    return {}, np.zeros(0), np.zeros(0, np.int64)
  return ({k: np.concatenate(v) for k, v in feats.items()}, np.concatenate(default),
          np.concatenate(group))
