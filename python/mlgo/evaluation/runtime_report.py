"""Reading runtime_check's rows: the verdict over memory layouts, the geometric mean,
the console table and the plot."""
import math

from mlgo.util import stats


SIGNIFICANCE = 0.05



def layout_summary(row, metric: str = "cycles"):
  """None for a row without layouts, else {"layouts": n, "change": policy mean /
  default mean - 1 in percent, "noise": the default's own spread over its layouts (max -
  min, percent of its mean), "p_slower"/"p_faster": one-sided rank-sum p-values,
  "verdict": "slower" / "faster" when that p is below SIGNIFICANCE, else "within layout
  noise"}."""
  lay = row.get("layouts")
  if not lay:
    return None
  d = [m[metric] for m in lay["default"]]
  p = [m[metric] for m in lay["policy"]]
  md, mp = sum(d) / len(d), sum(p) / len(p)
  p_slower, p_faster = stats.rank_sum_p(p, d)
  change = (mp / md - 1) * 100 if md else 0.0
  verdict = "within layout noise"
  if p_slower < SIGNIFICANCE and mp > md:
    verdict = "slower"
  elif p_faster < SIGNIFICANCE and mp < md:
    verdict = "faster"
  return {"layouts": len(d), "change": change,
          "noise": (max(d) - min(d)) / md * 100 if md else 0.0,
          "p_slower": p_slower, "p_faster": p_faster, "verdict": verdict}



def format_table(rows) -> str:
  keys = ("instructions", "d1_misses", "ll_misses", "mispredicts", "cycles")
  lines = [f"{'program':8s} {'metric':13s} {'default':>14s} {'policy':>14s} {'change':>8s}"]
  for r in rows:
    for k in keys:
      d, p = r["default"][k], r["policy"][k]
      ch = (p / d - 1) * 100 if d else 0.0
      lines.append(f"{r['program']:8s} {k:13s} {d:14d} {p:14d} {ch:+7.2f}%")
    for k in sorted(r.get("perf", {}).get("default", {})):
      d, p = r["perf"]["default"][k], r["perf"]["policy"].get(k, 0)
      ch = (p / d - 1) * 100 if d else 0.0
      lines.append(f"{r['program']:8s} {'hw_' + k:13s} {d:14d} {p:14d} {ch:+7.2f}%")
  worse = [r["program"] for r in rows if r["policy"]["cycles"] > r["default"]["cycles"]]
  better = [r["program"] for r in rows if r["policy"]["cycles"] < r["default"]["cycles"]]
  lines.append(f"outputs identical on all {len(rows)} programs; estimated cycles better on "
               f"{len(better)} ({', '.join(better) or '-'}), worse on {len(worse)} "
               f"({', '.join(worse) or '-'}); geomean change {geomean_change(rows):+.2f}%"
               + (" (one layout)" if any(r.get("layouts") for r in rows) else ""))
  summaries = [(r["program"], layout_summary(r)) for r in rows]
  summaries = [(n, x) for n, x in summaries if x]
  if summaries:
    lines.append("")
    lines.append(f"estimated cycles over {summaries[0][1]['layouts']} memory layouts per side "
                 f"(mean; noise: the default's own max-min over its layouts; p: rank-sum)")
    lines.append(f"{'program':16s} {'change':>8s} {'noise':>7s} {'p_slower':>9s} "
                 f"{'p_faster':>9s}  verdict")
    for n, x in summaries:
      lines.append(f"{n:16s} {x['change']:+7.3f}% {x['noise']:6.3f}% {x['p_slower']:9.4f} "
                   f"{x['p_faster']:9.4f}  {x['verdict']}")
    by = {v: [n for n, x in summaries if x["verdict"] == v]
          for v in ("faster", "slower", "within layout noise")}
    lines.append(f"over layouts: faster on {len(by['faster'])} ({', '.join(by['faster']) or '-'})"
                 f", slower on {len(by['slower'])} ({', '.join(by['slower']) or '-'}), within "
                 f"layout noise on {len(by['within layout noise'])} "
                 f"({', '.join(by['within layout noise']) or '-'}); geomean change "
                 f"{geomean_change(rows, over_layouts=True):+.2f}%")
  return "\n".join(lines)



def geomean_change(rows, metric: str = "cycles", over_layouts: bool = False) -> float:
  """Geometric mean over programs of policy / default - 1, in percent (over_layouts:
  of the two sides' means over their layouts, for rows that have them)."""
  ratios = []
  for r in rows:
    if over_layouts and r.get("layouts"):
      d, p = ([m[metric] for m in r["layouts"][side]] for side in ("default", "policy"))
      d, p = sum(d) / len(d), sum(p) / len(p)
    else:
      d, p = r["default"][metric], r["policy"][metric]
    if d:
      ratios.append(p / d)
  if not ratios:
    return 0.0
  return (math.exp(sum(math.log(x) for x in ratios) / len(ratios)) - 1) * 100



def plot(rows, path, metric: str = "cycles"):
  """A PNG of each program's change: with layouts, every layout of each side as a dot
  against the default's mean (the default's dots show the noise) and the policy's mean
  as a bar; without, one bar per program."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(rows) + 2), 4.5))
  for i, r in enumerate(rows):
    lay = r.get("layouts")
    if lay:
      md = sum(m[metric] for m in lay["default"]) / len(lay["default"])
      for side, color, dx in (("default", "tab:gray", -0.15), ("policy", "tab:blue", 0.15)):
        ys = [(m[metric] / md - 1) * 100 for m in lay[side]]
        ax.scatter([i + dx] * len(ys), ys, s=14, color=color,
                   label=side + " (each layout)" if i == 0 else None, zorder=3)
      change = layout_summary(r, metric)["change"]
    else:
      change = (r["policy"][metric] / r["default"][metric] - 1) * 100
    ax.bar(i, change, width=0.6, color="tab:blue", alpha=0.35,
           label="policy mean" if i == 0 else None)
  ax.axhline(0, color="black", linewidth=0.8)
  ax.set_xticks(range(len(rows)))
  ax.set_xticklabels([r["program"] for r in rows], rotation=30, ha="right")
  ax.set_ylabel(f"{metric} vs default (%)")
  ax.set_title(f"runtime_check: estimated {metric}, policy vs default")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)

