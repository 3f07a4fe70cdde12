"""How a policy does on code it was not trained on: the held-out split of the training
corpus next to whole corpora of other packages (@extra, @unseen, or any corpus dir).

One `evaluate` per suite (same evaluator, any problem); what is reported is what a user
meets on their own code: the total, the median module, the share of modules more than
1% worse, and every package, so that one hot function cannot carry the figure.

Outputs in OUTPUT: one directory per suite (evaluate's files and its console report in
report.txt), generalization.json, generalization.md (suite and package tables) and
generalization.png (per-package change, one bar per package and suite).
"""
import contextlib
import io
import json
import pathlib
import sys

from mlgo import problems as problems_lib
from mlgo.env.guarded import spill_code_rule
from mlgo.evaluation.evaluate import evaluate

DEFAULT_SUITES = ("heldout", "@extra", "@unseen")
# A package counts as worse when its total is more than this above the default's.
PACKAGE_WORSE_PCT = 0.5


def _suite_corpus(suite: str, opt: str):
  """(corpus dir, split, name) of a suite: "heldout" (the default corpus' held-out
  split), "@SET" (a package set's corpus, all of it) or a corpus directory (all)."""
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  if suite == "heldout":
    return corpus_lib.corpus_arg(None, opt), "heldout", "heldout"
  if suite.startswith("@"):
    return corpus_lib.corpus_arg(suite, opt), "all", suite[1:]
  p = pathlib.Path(suite)
  return p, "all", p.name


def suite_row(name: str, s: dict) -> dict:
  pk = s.get("per_package", {})
  worse = sorted((k for k, v in pk.items() if v["change_pct"] > PACKAGE_WORSE_PCT),
                 key=lambda k: -pk[k]["change_pct"])
  return {"suite": name, "modules": s["modules"], "keys": s["keys"],
          "change_pct": s["change_pct"],
          "median_module_change_pct": s["median_module_change_pct"],
          "key_geomean_change_pct": s.get("key_geomean_change_pct", 0.0),
          "modules_regressed": s.get("modules_regressed", 0),
          "modules_regressed_pct": s.get("modules_regressed_pct", 0.0),
          "keys_improved": s.get("improvements", 0), "keys_regressed": s["regressions"],
          "packages": len(pk), "packages_worse": worse,
          "worst_package": max(pk, key=lambda k: pk[k]["change_pct"]) if pk else None,
          "line": s["line"], "per_package": pk}


def format_line(r: dict) -> str:
  worst = (f", worst package {r['worst_package']} "
           f"{r['per_package'][r['worst_package']]['change_pct']:+.2f}%"
           if r.get("worst_package") and "per_package" in r else "")
  return (f"{r['suite']}: change={r['change_pct']:+.2f}% key_geomean="
          f"{r['key_geomean_change_pct']:+.2f}% median_module="
          f"{r['median_module_change_pct']:+.2f}% modules_worse_1pct="
          f"{r['modules_regressed']}/{r['modules']} ({r['modules_regressed_pct']:.1f}%) "
          f"keys_better/worse={r['keys_improved']}/{r['keys_regressed']} packages_worse_"
          f"{PACKAGE_WORSE_PCT}pct={len(r['packages_worse'])}/{r['packages']}{worst}")


def run(problem_name: str, policy, output, suites=DEFAULT_SUITES, *, jobs: int = 2,
        timeout: float = 300.0, pool_kind: str | None = None, stream=None,
        guarded: bool = False, plain_output=None, plain_stream=None, candidates=(),
        samples: int = 0, no_more_spill_code=None) -> dict:
  """Evaluates `policy` on each suite; returns the report ({"suites": one row per suite,
  ...}, as written to OUTPUT/generalization.json).
  guarded with plain_output: the same compiles also give the policy's own report, written
  to plain_output (its lines to plain_stream) and returned under "plain". candidates,
  samples, no_more_spill_code: more allocations for the guard and its rule (evaluate)."""
  stream = stream or sys.stdout
  problem = problems_lib.get_problem(problem_name)
  out = pathlib.Path(output)
  out.mkdir(parents=True, exist_ok=True)
  both = guarded and plain_output is not None
  pout = pathlib.Path(plain_output) if both else None
  rows, prows = [], []
  for suite in suites:
    corpus_dir, split, name = _suite_corpus(suite, problem.corpus_opt)
    buf, pbuf = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf):
      s = evaluate(problem_name, corpus_dir, policy, out / name, split=split, jobs=jobs,
                   timeout=timeout, pool_kind=pool_kind, stream=buf, guarded=guarded,
                   plain_output=(pout / name) if both else None, plain_stream=pbuf,
                   candidates=candidates, samples=samples,
                   no_more_spill_code=no_more_spill_code)
    (out / name / "report.txt").write_text(buf.getvalue())
    if both:
      (pout / name / "report.txt").write_text(pbuf.getvalue())
      prows.append(suite_row(name, s["plain"]))
      print(format_line(prows[-1]), file=plain_stream or stream, flush=True)
    rows.append(suite_row(name, s))
    print(format_line(rows[-1]), file=stream, flush=True)
  report = write_report(problem_name, policy, guarded, rows, out,
                        {"candidates": [str(c) for c in candidates], "samples": int(samples),
                         "no_more_spill_code": spill_code_rule(no_more_spill_code)}
                        if candidates or samples or no_more_spill_code else None)
  if both:
    report["plain"] = write_report(problem_name, policy, False, prows, pout)
  return report


def write_report(problem_name, policy, guarded, rows, out, guard_choice=None) -> dict:
  """generalization.json, .md and .png of one report in `out`; returns the report.
  guard_choice: the guard's more allocations ({"candidates": dirs, "samples": n})."""
  report = {"problem": problem_name, "policy": str(policy), "guarded": guarded,
            "suites": rows, "package_worse_pct": PACKAGE_WORSE_PCT}
  if guard_choice:
    report["guard_choice"] = guard_choice
  (out / "generalization.json").write_text(json.dumps(report, indent=1) + "\n")
  (out / "generalization.md").write_text(markdown(report))
  plot(report, out / "generalization.png")
  return report


def markdown(report: dict) -> str:
  guarded, more = "", report.get("guard_choice") or {}
  rule = {"function": ", none adding spill code", True: ", none adding spill code",
          "loops": ", none adding spill code to a loop",
          "perf": ", none the performance model estimates slower"}.get(
              more.get("no_more_spill_code"), "")
  if more.get("candidates") or more.get("samples"):
    guarded = (f" (guarded: per function the best of the default, the policy, "
               f"{', '.join(more['candidates']) or 'no other policy'} and "
               f"{more['samples']} sampled allocations{rule})")
  elif report.get("guarded"):
    guarded = f" (guarded: per function the better of the two{rule})"
  lines = [f"# {report['problem']}: {report['policy']}{guarded} vs the default", "",
           "| suite | modules | change | geomean per key | median module | "
           "modules >1% worse | packages worse than +0.5% |",
           "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
  for r in report["suites"]:
    lines.append(f"| {r['suite']} | {r['modules']} | {r['change_pct']:+.2f}% | "
                 f"{r['key_geomean_change_pct']:+.2f}% | "
                 f"{r['median_module_change_pct']:+.2f}% | {r['modules_regressed']} "
                 f"({r['modules_regressed_pct']:.1f}%) | "
                 f"{', '.join(r['packages_worse']) or 'none'} |")
  lines += ["", "| suite | package | modules | change | median module | modules >1% worse |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
  for r in report["suites"]:
    for pkg, v in sorted(r["per_package"].items(), key=lambda kv: kv[1]["change_pct"]):
      lines.append(f"| {r['suite']} | {pkg} | {v.get('modules', '')} | "
                   f"{v['change_pct']:+.2f}% | {v.get('median_module_change_pct', 0):+.2f}% "
                   f"| {v.get('modules_regressed', '')} |")
  return "\n".join(lines) + "\n"


def plot(report: dict, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  bars = [(r["suite"], pkg, v["change_pct"]) for r in report["suites"]
          for pkg, v in sorted(r["per_package"].items(), key=lambda kv: kv[1]["change_pct"])]
  if not bars:
    return
  colors = {}
  palette = ["tab:blue", "tab:orange", "tab:purple", "tab:brown", "tab:olive"]
  fig, ax = plt.subplots(figsize=(max(8, 0.28 * len(bars)), 4.8))
  for i, (suite, _pkg, ch) in enumerate(bars):
    c = colors.setdefault(suite, palette[len(colors) % len(palette)])
    ax.bar(i, ch, color=c, label=suite if list(colors).index(suite) == len(colors) - 1
           and not any(b[0] == suite for b in bars[:i]) else None)
  ax.set_xticks(range(len(bars)))
  ax.set_xticklabels([b[1] for b in bars], rotation=75, fontsize=7)
  ax.axhline(0, color="black", linewidth=0.5)
  ax.axhline(PACKAGE_WORSE_PCT, color="tab:red", linewidth=0.5, linestyle="--")
  ax.set_ylabel("change vs default (%), lower is better")
  ax.set_title(f"{report['problem']}: per-package change by suite")
  ax.legend()
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
