"""How good the IR2Native model is, on code it was not trained on: per test suite (the
default corpus' held-out split, other package sets), MAPE / median APE / Spearman of the
model and of the baselines on the same functions; a table (report.md), the numbers
(report.json) and a scatter plot of predicted against real size (report.png)."""
import json
import pathlib

import numpy as np

from mlgo.ir2native import dataset, model as model_lib

PREDICTORS = ("ir2native", "ir_instructions", "final_ir_instructions", "tti_code_size")


def run(size_model, train_dirs, suites: dict, out_dir) -> dict:
  """suites: {name: (dataset dirs, splits or None)}. Writes report.{md,json,png}."""
  out = pathlib.Path(out_dir)
  out.mkdir(parents=True, exist_ok=True)
  train = dataset.load(train_dirs, splits=("train",))
  rep = {"model": size_model.meta, "training_rows": int(len(train["native_size"])),
         "suites": {}}
  scatter = {}
  for name, (dirs, splits) in suites.items():
    test = dataset.load(dirs, splits=splits, passes=("default",))
    if not len(test["native_size"]):
      continue
    res = model_lib.compare(size_model, train, test)
    scatter[name] = (res.pop("predictions"), test["native_size"])
    res["packages"] = sorted(set(test["package"].tolist()))
    rep["suites"][name] = res
  (out / "report.json").write_text(json.dumps(rep, indent=1))
  (out / "report.md").write_text(markdown(rep))
  _plot(scatter, out / "report.png")
  return rep


def markdown(rep) -> str:
  lines = ["# IR2Native: predicted against real native size per function", "",
           f"Trained on {rep['training_rows']} functions (training split, all passes). "
           "Each suite: the default-heuristic compile of its modules; baselines are one "
           "scale factor fitted on the training rows.", "",
           "| suite | functions | predictor | MAPE | median APE | Spearman |",
           "|---|---:|---|---:|---:|---:|"]
  for name, s in rep["suites"].items():
    for p in PREDICTORS:
      m = s["same_functions"].get(p)
      if m:
        lines.append(f"| {name} | {s['rows_with_final_ir']} | {p} | {m['mape']:.3f} | "
                     f"{m['median_ape']:.3f} | {m['spearman']:.3f} |")
  return "\n".join(lines) + "\n"


def _plot(scatter, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  if not scatter:
    return
  fig, axes = plt.subplots(1, len(scatter), figsize=(5 * len(scatter), 4.5), squeeze=False)
  for ax, (name, (preds, real)) in zip(axes[0], scatter.items()):
    for p, color in (("tti_code_size", "tab:gray"), ("ir2native", "tab:blue")):
      if p in preds:
        ok = np.isfinite(preds[p]) & (preds[p] > 0)
        ax.scatter(real[ok], preds[p][ok], s=3, alpha=0.35, color=color, label=p)
    lim = [1, max(2.0, float(np.max(real)) * 1.5)]
    ax.plot(lim, lim, "k--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("real native bytes")
    ax.set_ylabel("predicted bytes")
    ax.set_title(name)
    ax.legend(loc="upper left", markerscale=4)
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
