"""The learned block cost model: fit it on profiled programs, and judge it on others.

Data: mlgo.evaluation.block_profiles (per program, per allocation variant, one row per
executed machine basic block). `train` fits mlgo.profiles.cost_model on the programs of
role "model"; `report` judges it on the programs of role "heldout" (never used to fit
it), next to two baselines on the same blocks:
  llvm-mca   llvm-mca-22's steady-state cycles per execution of the block
             (mlgo.profiles.mca), one scale factor fitted on the model programs;
  static     the static spill-weight proxy the regalloc reward used so far, as a block
             cost: instructions + 1 spill + 4 reloads + 4 folded stack operands +
             0.2 copies, one scale factor fitted likewise.
Two questions, two tables:
  1. blocks: error of each predictor's cycles per execution against the measured ones
     (MAPE, median APE, Spearman; and the execution-weighted total of each program);
  2. allocations: for every function of a held-out program whose executed code another
     allocation (policy, sampled) changed, the rank correlation (Spearman) and sign
     agreement of the predicted against the measured relative change of its cycles:
       model (profile)   the model's block cycles weighted by measured executions;
       model (static)    the model weighted by llc's static block frequencies: the
                         performance-model reward exactly as training computes it;
       llvm-mca (profile), and
       remarks (static)  the regalloc reward used so far (SpillReloadCopies remarks).
Writes report.md, report.json and report.png (predicted vs measured change per function).
"""
import json
import pathlib
import sys

import numpy as np

from mlgo.evaluation import block_profiles
from mlgo.evaluation import runtime_programs as rp
from mlgo.profiles import blocks as blocks_lib, cost_model, mca
from mlgo.util.stats import spearman

STATIC_WEIGHTS = {"instructions": 1.0, "spills": 1.0, "reloads": 4.0, "stack_folded": 4.0,
                  "copies": 0.2}


def load(data_dir) -> dict:
  """{(program, variant): {"rows": [...], "functions": {fn: remarks cost}, "role"}}."""
  d = pathlib.Path(data_dir)
  roles = {p.name: getattr(p, "role", "") for p in rp.PROGRAMS}
  out = {}
  for p in sorted(d.glob("*/*/blocks.jsonl")):
    prog, variant = p.parent.parent.name, p.parent.name
    rows = block_profiles.load_rows(p)
    fpath = p.parent / "functions.json"
    funcs = json.loads(fpath.read_text()) if fpath.exists() else {}
    role = roles.get(prog) or (rows[0].get("role", "") if rows else "")
    out[(prog, variant)] = {"rows": rows, "functions": funcs, "role": role,
                            "exe": p.parent / prog}
  if not out:
    raise ValueError(f"{d}: no block profiles (run `perf_model collect` first)")
  return out


def _rows_of(data, role):
  return [r for v in data.values() if v["role"] == role for r in v["rows"]
          if r.get("executions", 0) > 0]


def train(data_dir, model_path, stream=sys.stderr) -> cost_model.CostModel:
  data = load(data_dir)
  rows = _rows_of(data, "model")
  progs = sorted({p for (p, _), v in data.items() if v["role"] == "model"})
  if not rows:
    raise ValueError(f"{data_dir}: no profiles of programs with role 'model'")
  model = cost_model.CostModel.fit(rows, meta={"programs": progs, "blocks": len(rows)})
  model.save(model_path)
  print(f"perf_model: fitted on {len(rows)} executed blocks of {len(progs)} programs "
        f"({', '.join(progs)}):\n{model.describe()}", file=stream)
  return model


def _static_proxy(rows):
  return np.array([sum(w * r.get(k, 0) for k, w in STATIC_WEIGHTS.items()) for r in rows])


def _add_mca(data, roles=("model", "heldout")):
  """Adds each executed row's llvm-mca cycles per execution ("mca", NaN where llvm-mca
  could not model the block), from the build's executable (kept beside its profile)."""
  for entry in data.values():
    if entry["role"] not in roles or not entry["rows"]:
      continue
    by_start = {b.start: b for b in blocks_lib.disassemble(str(entry["exe"]))}
    bl = [by_start.get(r["start"]) for r in entry["rows"]]
    vals = mca.block_throughput([b for b in bl if b is not None])
    it = iter(vals)
    for r, b in zip(entry["rows"], bl):
      v = next(it) if b is not None else None
      r["mca"] = np.nan if v is None else float(v)


def _mca_rows(rows):
  return np.array([r.get("mca", np.nan) for r in rows], np.float64)


def _errors(pred, meas, ex) -> dict:
  ok = np.isfinite(pred)
  ape = np.abs(pred[ok] - meas[ok]) / np.maximum(meas[ok], 1e-9)
  tot_p, tot_m = float((pred[ok] * ex[ok]).sum()), float((meas[ok] * ex[ok]).sum())
  wape = float((np.abs(pred[ok] - meas[ok]) * ex[ok]).sum() / max(1e-9, tot_m))
  return {"blocks": int(ok.sum()), "mape": float(ape.mean()), "median_ape": float(np.median(ape)),
          "weighted_ape": wape,
          "spearman": spearman(pred[ok], meas[ok]),
          "weighted_total_error": tot_p / tot_m - 1 if tot_m else float("nan")}


def _scale(pred, meas, ex):
  ok = np.isfinite(pred)
  return float((meas[ok] * ex[ok]).sum() / max(1e-9, (pred[ok] * ex[ok]).sum()))


def _per_function(rows, block_cost, weight):
  out = {}
  for r, c, w in zip(rows, block_cost, weight):
    if np.isfinite(c):
      out[r["function"]] = out.get(r["function"], 0.0) + float(c) * float(w)
  return out


def _measured(rows):
  """(measured cycles per execution, executions) of profiled rows."""
  return (cost_model.measured_per_execution(rows)["cycles"],
          np.array([r["executions"] for r in rows], float))


def _function_costs(entry, model, k_mca=None) -> dict:
  """Per function of one build: its executed code (sorted block feature tuples) and its
  cycles measured and as each predictor has them."""
  rows = [r for r in entry["rows"] if r.get("executions", 0) > 0]
  m, ex = _measured(rows)
  pr = model.predict_rows(rows)
  calls, code = {}, {}
  for r in rows:
    if r.get("mbb") == 0:
      calls[r["function"]] = calls.get(r["function"], 0) + r["executions"]
    code.setdefault(r["function"], []).append(tuple(r.get(k, 0) for k in blocks_lib.FEATURES))
  # llc's static frequency (relative to the entry) times the function's measured calls.
  static = np.array([(r.get("rel_freq") or 0.0) * calls.get(r["function"], 0) for r in rows])
  res = {"code": {f: sorted(v) for f, v in code.items()},
         "measured": _per_function(rows, m, ex),
         "model (profile)": _per_function(rows, pr, ex),
         "model (static)": _per_function(rows, pr, static)}
  if k_mca is not None:
    res["llvm-mca (profile)"] = _per_function(rows, k_mca * _mca_rows(rows), ex)
  return res


def report(data_dir, model_path, out_dir, stream=sys.stderr) -> dict:
  data = load(data_dir)
  model = cost_model.CostModel.load(model_path)
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  # Baseline scales from the model programs (what the model saw).
  train_rows = _rows_of(data, "model")
  held_rows = _rows_of(data, "heldout")
  if not held_rows:
    raise ValueError(f"{data_dir}: no profiles of programs with role 'heldout'")
  tm, tex = _measured(train_rows)
  has_mca = all(v["exe"].exists() for v in data.values())
  if has_mca:
    _add_mca(data)
  k_static = _scale(_static_proxy(train_rows), tm, tex)
  k_mca = _scale(_mca_rows(train_rows), tm, tex) if has_mca else float("nan")
  hm, hex_ = _measured(held_rows)
  preds = {"model": model.predict_rows(held_rows),
           "static proxy": k_static * _static_proxy(held_rows)}
  if has_mca:
    preds["llvm-mca"] = k_mca * _mca_rows(held_rows)
  block_table = {name: _errors(p, hm, hex_) for name, p in preds.items()}

  # Allocations: per-function relative change, default vs every other variant.
  changes = {k: [] for k in ("measured", "model (profile)", "model (static)",
                             "llvm-mca (profile)", "remarks (static)")}
  programs = sorted({p for (p, _), v in data.items() if v["role"] == "heldout"})
  for prog in programs:
    base = data.get((prog, "default"))
    if base is None:
      continue
    b = _function_costs(base, model, k_mca if has_mca else None)
    for (p2, variant), entry in data.items():
      if p2 != prog or variant == "default":
        continue
      o = _function_costs(entry, model, k_mca if has_mca else None)
      for fn, m0 in b["measured"].items():
        m1 = o["measured"].get(fn)
        # Only functions whose code the other allocation changed: elsewhere a measured
        # change is code layout (cache sets, branch history), which no block model sees.
        if m1 is None or m0 <= 0 or b["code"].get(fn) == o["code"].get(fn):
          continue
        changes["measured"].append(m1 / m0 - 1)
        for k in ("model (profile)", "model (static)", "llvm-mca (profile)"):
          if k in b and k in o and b[k].get(fn) and o[k].get(fn) is not None:
            changes[k].append(o[k][fn] / b[k][fn] - 1)
          else:
            changes[k].append(np.nan)
        r0 = base["functions"].get(fn, 0.0)
        r1 = entry["functions"].get(fn, 0.0)
        changes["remarks (static)"].append((r1 + 1) / (r0 + 1) - 1)
  meas = np.array(changes["measured"])
  alloc_table = {}
  for k, v in changes.items():
    if k == "measured":
      continue
    v = np.array(v, float)
    ok = np.isfinite(v)
    if not ok.any():
      continue
    nz = ok & (meas != 0) & (v != 0)
    alloc_table[k] = {"functions": int(ok.sum()),
                      "spearman": spearman(v[ok], meas[ok]),
                      "sign_agreement": float(np.mean(np.sign(v[nz]) == np.sign(meas[nz])))
                      if nz.any() else float("nan"),
                      "predicted_unchanged": float(np.mean(v[ok] == 0))}
  rep = {"model": str(model_path), "model_meta": model.meta,
         "heldout_programs": programs,
         "training_programs": sorted({p for (p, _), v in data.items() if v["role"] == "model"}),
         "blocks": block_table, "allocations": alloc_table,
         "functions_changed": int(len(meas)),
         "scales": {"static proxy": k_static, "llvm-mca": k_mca}}
  (out / "report.json").write_text(json.dumps(rep, indent=1) + "\n")
  (out / "report.md").write_text(format_report(rep) + "\n")
  _plot(changes, out / "report.png")
  print(format_report(rep), file=stream)
  return rep


def format_report(rep) -> str:
  lines = [f"Block cost model on held-out programs ({', '.join(rep['heldout_programs'])}); "
           f"fitted on {', '.join(rep['training_programs'])}.", "",
           "| predictor | blocks | MAPE | median APE | exec-weighted APE | Spearman | "
           "exec-weighted total |", "|---|---|---|---|---|---|---|"]
  for k, e in rep["blocks"].items():
    lines.append(f"| {k} | {e['blocks']} | {e['mape']:.3f} | {e['median_ape']:.3f} | "
                 f"{e['weighted_ape']:.3f} | {e['spearman']:.3f} | "
                 f"{e['weighted_total_error']:+.2%} |")
  lines += ["", f"Per-function change between allocations ({rep['functions_changed']} "
            f"function/allocation pairs whose code the allocation changed):", "",
            "| predictor | functions | Spearman | sign agreement (both nonzero) | "
            "predicted no change |", "|---|---|---|---|---|"]
  for k, e in rep["allocations"].items():
    lines.append(f"| {k} | {e['functions']} | {e['spearman']:.3f} | "
                 f"{e['sign_agreement']:.1%} | {e['predicted_unchanged']:.1%} |")
  return "\n".join(lines)


def _plot(changes, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  keys = [k for k in changes if k != "measured" and len(changes[k])]
  fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 4), squeeze=False)
  meas = np.array(changes["measured"]) * 100
  for ax, k in zip(axes[0], keys):
    v = np.array(changes[k], float) * 100
    ok = np.isfinite(v)
    ax.scatter(meas[ok], v[ok], s=8, alpha=0.6)
    lim = max(1e-3, np.nanmax(np.abs(np.concatenate([meas[ok], v[ok]]))) if ok.any() else 1)
    ax.plot([-lim, lim], [-lim, lim], "k--", lw=0.8)
    ax.set_title(k)
    ax.set_xlabel("measured change of the function's cycles (%)")
    ax.set_ylabel("predicted change (%)")
    ax.set_xscale("symlog")
    ax.set_yscale("symlog")
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
