"""An evaluation's report: per-key rows, totals, the per-package and per-language tables,
the list of modules that got worse, the plot and summary.json.

The evaluator (mlgo.evaluation.evaluate) compiles; this module only counts and writes, so
the figures every tool prints (total change, per-key geomean, median module, modules more
than 1% worse) are defined in one place.
"""
import csv
import json
import math
import pathlib

from mlgo import problems as problems_lib

REGRESSION_THRESHOLD = 0.01


def pct(policy, default):
  return (policy / default - 1.0) * 100.0 if default else 0.0


def summary_line(problem_name: str, modules: int, keys: int, default: float, policy: float,
                 regressions: int) -> str:
  """Per-module scores (inlining): `modules=N default_text=B policy_text=B ...`;
  per-function scores (regalloc): `modules=N functions=F default_cost=C ...`."""
  p = problems_lib.get_problem(problem_name)
  change = pct(policy, default)
  if p.key == "module":
    return (f"modules={modules} default_{p.score_name}={int(round(default))} "
            f"policy_{p.score_name}={int(round(policy))} change={change:+.2f}% "
            f"regressions={regressions}")
  return (f"modules={modules} {p.key}s={keys} default_{p.score_name}={default:.1f} "
          f"policy_{p.score_name}={policy:.1f} change={change:+.2f}% regressions={regressions}")


def module_changes(rows) -> dict:
  """module -> (default, policy, relative change) summed over the module's keys; the
  +1 keeps modules with (almost) no cost from dominating a median."""
  per = {}
  for r in rows:
    t = per.setdefault(r["module"], [0.0, 0.0, r["package"], r["language"]])
    t[0] += r["default"]
    t[1] += r["policy"]
  return {m: (d, p, (p + 1.0) / (d + 1.0) - 1.0, pkg, lang)
          for m, (d, p, pkg, lang) in per.items()}


def key_geomean(pairs) -> float | None:
  """Geometric mean over keys, given as (default, policy) scores, of (policy + 1) /
  (default + 1), minus 1; keys with no score on either side are left out (None if no key
  is left). Unlike the total, no single hot key (one interpreter or compressor loop)
  decides it: a policy that wins a little in many functions and one that wins a lot in
  one are told apart. The evaluator reports it; selection can keep policies by it."""
  logs = [math.log((p + 1.0) / (d + 1.0)) for d, p in pairs if d > 0 or p > 0]
  return math.exp(sum(logs) / len(logs)) - 1.0 if logs else None


def _median(xs):
  xs = sorted(xs)
  return xs[len(xs) // 2] if xs else 0.0


def _table(rows, group, stream):
  groups = {}
  mods = module_changes(rows)
  for r in rows:
    g = groups.setdefault(r[group], {"n": 0, "d": 0.0, "p": 0.0, "reg": 0, "mods": set()})
    g["n"] += 1
    g["d"] += r["default"]
    g["p"] += r["policy"]
    g["reg"] += r["regression"]
    g["mods"].add(r["module"])
  for g in groups.values():
    ch = [mods[m][2] for m in g["mods"]]
    g["median"] = 100.0 * _median(ch)
    g["mreg"] = sum(c > REGRESSION_THRESHOLD for c in ch)
  w = max([len(group)] + [len(str(k)) for k in groups])
  print(f"{group:<{w}} {'keys':>6} {'default':>12} {'policy':>12} {'change':>8} "
        f"{'regr':>5} {'modules':>7} {'median':>8} {'>1%':>4}", file=stream)
  for k in sorted(groups, key=lambda k: -groups[k]["d"]):
    g = groups[k]
    print(f"{k:<{w}} {g['n']:>6} {g['d']:>12.0f} {g['p']:>12.0f} "
          f"{pct(g['p'], g['d']):>+7.2f}% {g['reg']:>5} {len(g['mods']):>7} "
          f"{g['median']:>+7.2f}% {g['mreg']:>4}", file=stream)
  return {k: {"keys": g["n"], "default": g["d"], "policy": g["p"],
              "change_pct": pct(g["p"], g["d"]), "regressions": g["reg"],
              "modules": len(g["mods"]), "median_module_change_pct": g["median"],
              "modules_regressed": g["mreg"]}
          for k, g in groups.items()}


def _write_regressed_modules(rows, path, stream, top: int = 10) -> list:
  """Modules more than 1% worse than the default, largest growth first: the list a
  user reads first (CSV in full, the top of it on the console)."""
  bad = sorted(((m, *v) for m, v in module_changes(rows).items()
                if v[2] > REGRESSION_THRESHOLD), key=lambda x: -x[3])
  with open(path, "w", newline="") as f:
    wr = csv.writer(f)
    wr.writerow(["module", "package", "language", "default", "policy", "change_pct"])
    for m, d, p, ch, pkg, lang in bad:
      wr.writerow([m, pkg, lang, d, p, round(100.0 * ch, 3)])
  if bad:
    print(f"modules more than {REGRESSION_THRESHOLD:.0%} worse, largest growth first "
          f"({len(bad)}; all in {path.name}):", file=stream)
    for m, d, p, ch, pkg, lang in bad[:top]:
      print(f"  {100.0 * ch:+7.2f}%  {m}  ({pkg}, {lang}; {d:.0f} -> {p:.0f})", file=stream)
  return bad


def _plot(rows, path, title):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  ch = sorted(pct(r["policy"], r["default"]) for r in rows)
  fig, ax = plt.subplots(figsize=(9, 4.5))
  colors = ["tab:red" if c > REGRESSION_THRESHOLD * 100 else
            ("tab:green" if c < 0 else "tab:gray") for c in ch]
  ax.bar(range(len(ch)), ch, color=colors, width=1.0)
  ax.axhline(0, color="black", linewidth=0.5)
  ax.set_xlabel("modules / functions, sorted by change")
  ax.set_ylabel("policy vs default (%)")
  ax.set_title(title)
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)


class Tally:
  """One evaluation's rows (per key), failures and counts while results come in."""

  def __init__(self):
    self.rows, self.failed, self.ok_names = [], [], set()
    self.decisions = self.corrections = self.deferred = 0
    self.deferred_by = {}   # deferral rule -> decisions it left to the compiler

  def add(self, m, d, p, where, missing) -> bool:
    """Adds one module's default (d) and policy (p) summaries; False if either failed."""
    if not d["ok"] or not p["ok"]:
      self.failed.append({"module": m.name, "reason": where + (
          ("default: " + str(d["reason"])) if not d["ok"] else ("policy: " + str(p["reason"])))})
      return False
    self.decisions += p["decisions"]
    self.corrections += p.get("corrections", 0)
    self.deferred += p.get("deferred", 0)
    for rule, n in p.get("deferred_by", {}).items():
      self.deferred_by[rule] = self.deferred_by.get(rule, 0) + n
    self.ok_names.add(m.name)   # compiled by both sides (a module may have no keys)
    keys = list(d["scores"])
    if missing is not None:  # a key absent from one compile has the missing score
      keys += [k for k in p["scores"] if k not in d["scores"]]
    for key in keys:
      if missing is None and key not in p["scores"]:
        continue
      dv = d["scores"].get(key, missing)
      pv = p["scores"].get(key, missing)
      self.rows.append({"key": key, "module": m.name, "package": m.package,
                        "language": m.language, "default": dv, "policy": pv,
                        "change_pct": pct(pv, dv),
                        "regression": int(pv > dv * (1 + REGRESSION_THRESHOLD)),
                        "default_decisions": d["decisions"],
                        "policy_decisions": p["decisions"],
                        "policy_deferred": p.get("deferred", 0),
                        "default_seconds": round(d["seconds"], 3),
                        "policy_seconds": round(p["seconds"], 3)})
    return True


def write_report(t: Tally, problem_name, policy_name, corpus, split, out, stream,
            guard=None) -> dict:
  """Writes one evaluation's files (per_key.csv, failed.csv, changes.png,
  regressed_modules.csv, summary.json) and console tables; returns its summary."""
  problem = problems_lib.get_problem(problem_name)
  out.mkdir(parents=True, exist_ok=True)
  rows, failed = sorted(t.rows, key=lambda r: r["key"]), t.failed
  fields = ["key", "module", "package", "language", "default", "policy", "change_pct",
            "regression", "default_decisions", "policy_decisions", "policy_deferred",
            "default_seconds", "policy_seconds"]
  with open(out / "per_key.csv", "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=fields)
    wr.writeheader()
    wr.writerows(rows)
  if failed:
    with open(out / "failed.csv", "w", newline="") as f:
      wr = csv.DictWriter(f, fieldnames=["module", "reason"])
      wr.writeheader()
      wr.writerows(failed)
  ok_modules = len(t.ok_names)
  dsum = sum(r["default"] for r in rows)
  psum = sum(r["policy"] for r in rows)
  regressions = sum(r["regression"] for r in rows)
  print("", file=stream)
  per_package = _table(rows, "package", stream) if rows else {}
  print("", file=stream)
  per_language = _table(rows, "language", stream) if rows else {}
  print("", file=stream)
  if rows:
    name = pathlib.Path(policy_name.removesuffix(" (guarded)")).name
    _plot(rows, out / "changes.png",
          f"{problem_name}: {name}{' guarded' if guard is not None else ''}"
          f" vs default, {split} ({pct(psum, dsum):+.2f}% total)")
  mods = module_changes(rows)
  module_change_list = sorted(v[2] for v in mods.values())
  regressed_modules = _write_regressed_modules(rows, out / "regressed_modules.csv", stream)
  summary = {"problem": problem_name, "policy": policy_name, "corpus": str(corpus.path),
             "split": split, "modules": ok_modules, "keys": len(rows), "failed": len(failed),
             "key": problem.key, "default": dsum, "policy_score": psum,
             "change_pct": pct(psum, dsum), "regressions": regressions,
             "improvements": sum(int(r["policy"] < r["default"] * (1 - REGRESSION_THRESHOLD))
                                 for r in rows),
             "median_module_change_pct": 100.0 * _median(module_change_list),
             "key_geomean_change_pct": 100.0 * (key_geomean(
                 (r["default"], r["policy"]) for r in rows) or 0.0),
             "modules_regressed": len(regressed_modules),
             "modules_regressed_pct": (100.0 * len(regressed_modules) / len(mods)
                                       if mods else 0.0),
             "decisions": t.decisions, "corrections": t.corrections,
             "deferred": t.deferred, "deferred_by": dict(sorted(t.deferred_by.items())),
             "regression_definition": f"policy score > {1 + REGRESSION_THRESHOLD:.2f} x default",
             "per_package": per_package, "per_language": per_language}
  if guard is not None:
    summary["guarded"] = guard
  line = summary_line(problem_name, ok_modules, len(rows), dsum, psum, regressions)
  summary["line"] = line   # in summary.json too: the one line a script reads
  with open(out / "summary.json", "w") as f:
    json.dump(summary, f, indent=1)
  if failed:
    print(f"{len(failed)} modules failed to compile (see {out / 'failed.csv'}); "
          f"left out of the totals", file=stream)
  print(f"{problem.key}s improved by more than {REGRESSION_THRESHOLD:.0%}: "
        f"{summary['improvements']}, regressed: {regressions}; per-{problem.key} geomean "
        f"{summary['key_geomean_change_pct']:+.2f}%; median module change "
        f"{summary['median_module_change_pct']:+.2f}%; {t.decisions} decisions, "
        f"{t.corrections} corrected answers"
        + (f", {t.deferred} deferred to the compiler" if t.deferred else "")
        + (" (" + ", ".join(f"{n} by {rule}" for rule, n in sorted(t.deferred_by.items()))
           + ")" if t.deferred_by else ""), file=stream)
  if guard is not None:
    unit = problem.key + "s"
    per = guard.get("per_candidate") or []
    kept = (f"{guard['policy_functions']} {unit} kept a policy's decisions (the policy / each "
            f"candidate: {' / '.join(str(n) for n in per)})" if per else
            f"{guard['policy_functions']} {unit} kept the policy's decisions")
    print(f"guarded: {guard['compiles']} policy-side {problem.tool} compiles for {ok_modules} "
          f"modules; {kept}, the rest the default's; {len(guard['mismatches'])} {unit} not "
          f"at the lowest score{' (' + ', '.join(guard['mismatches'][:3]) + ')' if guard['mismatches'] else ''}",
          file=stream)
  print(line, file=stream, flush=True)
  return summary
