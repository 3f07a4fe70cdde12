"""Held-out evaluation of a regalloc policy against the default greedy heuristics.

Every module of the chosen split is compiled by llc with the policy (greedy decisions)
in the loop; the default's per-function costs come from the prepared corpus (one plain
llc compile per module). Writes a per-function CSV and a PNG, and returns/prints
`modules=N functions=F default_cost=C policy_cost=C change=+-X.XX% regressions=K`.
A regression is a function whose cost grew by more than 1% (and by more than 0.01).
"""
import concurrent.futures as cf
import csv
import os
import pathlib
import sys

import numpy as np

from mlgo.regalloc import llc_run, networks  # noqa: F401  (registers architectures)
from mlgo.training import policy_io
from mlgo.util.progress import Progress

REGRESSION_REL = 0.01
REGRESSION_ABS = 0.01


def make_decider(problem: str, spec: dict, weights: dict, greedy: bool = True,
                 seed: int | None = None, record_logp: bool = False):
  """The per-decision callback of llc_run.run_llc for a numpy policy."""
  from mlgo.regalloc import model  # pylint: disable=import-outside-toplevel
  pol = policy_io.Policy(spec, weights, greedy=greedy, seed=seed)
  arch = pol.arch
  rng = np.random.default_rng(seed)
  enc_one = model.FastEncoder(spec).encode_one

  def decide(obs):
    enc = enc_one(obs)
    params = arch.dist_params(enc)
    a = arch.greedy(params) if greedy else arch.sample(params, rng)
    a0 = a.reshape(-1)[0]
    if record_logp:
      return a0, {"logp": float(arch.log_prob(params, a.reshape(-1)[:1])[0])}
    return a0
  return decide


def _eval_one(bc_path, llc_flags, problem, spec, weights, llvm_version, timeout):
  dec = make_decider(problem, spec, weights) if spec is not None else None
  return llc_run.run_llc(bc_path, llc_flags, problem, dec, llvm_version=llvm_version,
                         timeout=timeout)


def evaluate(prepared, problem: str, policy_dir, out_dir=None, *, split: str = "heldout",
             jobs: int = 2, timeout: float = 300.0, stream=sys.stderr, modules=None) -> dict:
  if policy_dir in (None, "default"):
    spec, weights = None, None
  else:
    pol = policy_io.load_policy(policy_dir)
    if pol.problem != problem:
      raise ValueError(f"{policy_dir}: policy is for {pol.problem}, not {problem}")
    spec, weights = pol.spec, pol.arch.w
  mods = list(modules if modules is not None else prepared.split(split))
  if not mods:
    raise ValueError(f"{prepared.corpus_path}: no modules in split {split!r}")
  rows, failures = [], []
  progress = Progress(f"evaluate {problem}", len(mods), stream=stream)
  decisions = corrections = 0
  with cf.ProcessPoolExecutor(max_workers=max(1, jobs)) as ex:
    futs = {ex.submit(_eval_one, m.bc_path, m.llc_flags, problem, spec, weights,
                      prepared.llvm_version, timeout): m for m in mods}
    for fut in cf.as_completed(futs):
      m = futs[fut]
      try:
        res = fut.result()
      except Exception as e:
        res = llc_run.LlcResult(False, f"{type(e).__name__}: {e}", {}, [])
      if not res.ok:
        failures.append((m.name, res.reason))
        progress.update(failed=1)
        continue
      decisions += res.decisions
      corrections += res.corrections
      for fn in sorted(set(m.baseline) | set(res.functions)):
        d = float(m.baseline.get(fn, 0.0))
        p = float(res.functions.get(fn, 0.0))
        rows.append({"module": m.name, "function": fn, "package": m.package,
                     "language": m.language, "default_cost": d, "policy_cost": p})
      progress.update()
  progress.close()
  rows.sort(key=lambda r: (r["module"], r["function"]))
  dtot = sum(r["default_cost"] for r in rows)
  ptot = sum(r["policy_cost"] for r in rows)
  regress = [r for r in rows if r["policy_cost"] > r["default_cost"] * (1 + REGRESSION_REL)
             and r["policy_cost"] - r["default_cost"] > REGRESSION_ABS]
  improved = [r for r in rows if r["policy_cost"] < r["default_cost"] * (1 - REGRESSION_REL)
              and r["default_cost"] - r["policy_cost"] > REGRESSION_ABS]
  change = (ptot / dtot - 1.0) if dtot > 0 else 0.0
  summary = {"modules": len(mods) - len(failures), "functions": len(rows),
             "default_cost": dtot, "policy_cost": ptot, "change": change,
             "regressions": len(regress), "improvements": len(improved),
             "failed": len(failures), "decisions": decisions, "corrections": corrections}
  line = (f"modules={summary['modules']} functions={summary['functions']} "
          f"default_cost={dtot:.1f} policy_cost={ptot:.1f} change={change * 100:+.2f}% "
          f"regressions={len(regress)}")
  summary["line"] = line
  by_lang = {}
  for r in rows:
    t = by_lang.setdefault(r["language"], [0.0, 0.0])
    t[0] += r["default_cost"]
    t[1] += r["policy_cost"]
  summary["by_language"] = {k: {"default_cost": v[0], "policy_cost": v[1],
                                "change": (v[1] / v[0] - 1) if v[0] else 0.0}
                            for k, v in by_lang.items()}
  if out_dir is not None:
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "functions.csv", "w", newline="") as f:
      w = csv.DictWriter(f, fieldnames=["module", "function", "package", "language",
                                        "default_cost", "policy_cost", "change"])
      w.writeheader()
      for r in rows:
        ch = (r["policy_cost"] / r["default_cost"] - 1) if r["default_cost"] > 0 else (
            0.0 if r["policy_cost"] == 0 else float("inf"))
        w.writerow(dict(r, change=f"{ch:+.4f}"))
    if failures:
      with open(out / "failures.txt", "w") as f:
        for n, why in failures:
          f.write(f"{n}\t{why}\n")
    _plot(rows, out / "functions.png", problem, line)
    summary["csv"] = str(out / "functions.csv")
    summary["png"] = str(out / "functions.png")
  return summary


def format_report(summary: dict) -> str:
  lines = []
  for lang, v in sorted(summary.get("by_language", {}).items()):
    lines.append(f"  {lang:4s} default_cost={v['default_cost']:.1f} "
                 f"policy_cost={v['policy_cost']:.1f} change={v['change'] * 100:+.2f}%")
  lines.append(f"  improved functions: {summary.get('improvements', 0)}, regressed: "
               f"{summary['regressions']}, failed modules: {summary.get('failed', 0)}, "
               f"decisions: {summary.get('decisions', 0)}, corrections: "
               f"{summary.get('corrections', 0)}")
  lines.append(summary["line"])
  return "\n".join(lines)


def _plot(rows, path, problem, title):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  diffs = np.array([r["policy_cost"] - r["default_cost"] for r in rows])
  base = np.array([r["default_cost"] for r in rows])
  fig, ax = plt.subplots(1, 2, figsize=(12, 4.5))
  sel = base > 0
  rel = np.sort((diffs[sel] / base[sel]) * 100)
  ax[0].plot(rel, marker=".", linestyle="none", markersize=2)
  ax[0].axhline(0, color="k", linewidth=0.5)
  ax[0].set_ylabel("policy vs default cost (%)")
  ax[0].set_xlabel("functions (sorted)")
  ax[0].set_ylim(max(-100, rel.min() - 5) if len(rel) else -1, min(200, rel.max() + 5) if len(rel) else 1)
  order = np.argsort(diffs)
  ax[1].plot(np.cumsum(diffs[order]))
  ax[1].set_ylabel("cumulative cost difference")
  ax[1].set_xlabel("functions (sorted by difference)")
  fig.suptitle(f"{problem}: {title}", fontsize=9)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)
