"""Compile a corpus split with a policy and with the default heuristic; compare.

Per key (module for inlining, function for regalloc) we record the default score and
the policy score (lower is better: .text bytes, or weighted regalloc cost).

Regression: a key whose policy score is more than 1% above its default score
(policy > 1.01 * default). Keys where either compile failed are listed in the CSV with
their status and left out of the totals (counted as failed).

Outputs in --output: per_key.csv (per module / per function), summary.json,
changes.png (sorted per-key changes), and console tables per package and per language;
the last printed line is the summary:
  inlining: modules=N default_text=B policy_text=B change=+-X.XX% regressions=K
  regalloc: modules=N functions=F default_cost=C policy_cost=C change=+-X.XX% regressions=K
"""
import csv
import hashlib
import json
import math
import os
import pathlib
import sys
import time

from mlgo import problems as problems_lib
from mlgo.env import work
from mlgo.util.progress import Progress
from mlgo.workers import make_pool
from mlgo.workers.base import in_submission_order

REGRESSION_THRESHOLD = 0.01


def cache_key(module, problem_name, llvm_version):
  st = os.stat(module.bc_path)
  flags = getattr(module, "cc1_flags", None) or getattr(module, "llc_flags", [])
  h = hashlib.sha1("\0".join(["v2", problem_name, str(llvm_version), str(module.bc_path),
                               str(st.st_size), str(st.st_mtime_ns)] +
                              list(flags)).encode())
  return h.hexdigest()


class DefaultCache:
  """Default-heuristic results per module (the default does not change between policies),
  keyed by bitcode path/size/mtime, flags, problem and LLVM version."""

  def __init__(self, path):
    self.path = pathlib.Path(path)
    self.data = {}
    if self.path.exists():
      try:
        self.data = json.loads(self.path.read_text())
      except (OSError, ValueError):
        self.data = {}

  @classmethod
  def for_problem(cls, problem):
    """The cache of `problem`'s default compiles under mlgo_home(), one file per problem
    and reward (evaluate and headroom share it)."""
    from mlgo.util.cli import mlgo_home  # pylint: disable=import-outside-toplevel
    tag = f"-{problem.reward_tag()}" if problem.reward_tag else ""
    return cls(mlgo_home() / "eval_cache" / f"default-{problem.name}{tag}.json")

  def get(self, key):
    return self.data.get(key)

  def put(self, key, value):
    self.data[key] = value

  def save(self):
    try:
      self.path.parent.mkdir(parents=True, exist_ok=True)
      tmp = self.path.with_name(self.path.name + f".tmp{os.getpid()}")
      tmp.write_text(json.dumps(self.data))
      os.replace(tmp, self.path)
    except OSError:
      pass  # a read-only home (sandboxed tests) only loses the cache


def compile_pair(module, problem_name, ref, llvm_version, timeout, cached_default=None,
                 guarded: bool = False):
  """Work item: default compile and policy compile of one module -> small summaries.
  guarded: the policy side is a guarded compile (mlgo.env.guarded: per function the
  better of the default and the policy) and also reports how it was made."""
  from mlgo import env  # pylint: disable=import-outside-toplevel
  problem = problems_lib.get_problem(problem_name)

  def summary(r, t0):
    return {"ok": bool(r.ok), "reason": r.reason,
            "scores": problem.scores(module.name, r.reward) if r.ok else {},
            "decisions": int(r.decisions or 0), "corrections": int(r.corrections or 0),
            "seconds": time.monotonic() - t0}

  def run(policy):
    t0 = time.monotonic()
    return summary(env.compile_module(module, problem, policy, llvm_version=llvm_version,
                                      timeout=timeout), t0)
  d = cached_default or run(env.reference_policy(problem))
  if ref == "default":
    return d, d
  if not guarded:
    return d, run(work.make_policy(ref))
  from mlgo.env import guarded as guarded_lib  # pylint: disable=import-outside-toplevel
  t0 = time.monotonic()
  prefix = module.name + "::"
  # Scores here are keyed "module::function" (or the module's name); the guard's are the
  # problem's score_fn keys (the function, or "" for the module).
  g = guarded_lib.guarded_compile(
      module, problem, work.make_policy(ref), llvm_version=llvm_version, timeout=timeout,
      default_scores={("" if k == module.name else k[len(prefix):]): v
                      for k, v in d["scores"].items()} if d["ok"] else None)
  p = summary(g.result, t0)
  if g.ok:
    p["scores"] = {(module.name if f == "" else prefix + f): float(v)
                   for f, v in g.scores.items()}
  p.update(guard_compiles=g.compiles, guard_policy_functions=len(g.policy_functions),
           guard_mismatches=g.mismatches)
  # The unguarded policy compile the guard made anyway: the plain evaluation, for free
  # (its seconds are the whole guarded compile's).
  if g.policy_result is not None:
    p["plain"] = summary(g.policy_result, t0)
    p["plain"]["seconds"] = p["seconds"]
  return d, p


def _pct(policy, default):
  return (policy / default - 1.0) * 100.0 if default else 0.0


def summary_line(problem_name: str, modules: int, keys: int, default: float, policy: float,
                 regressions: int) -> str:
  """Per-module scores (inlining): `modules=N default_text=B policy_text=B ...`;
  per-function scores (regalloc): `modules=N functions=F default_cost=C ...`."""
  p = problems_lib.get_problem(problem_name)
  change = _pct(policy, default)
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
          f"{_pct(g['p'], g['d']):>+7.2f}% {g['reg']:>5} {len(g['mods']):>7} "
          f"{g['median']:>+7.2f}% {g['mreg']:>4}", file=stream)
  return {k: {"keys": g["n"], "default": g["d"], "policy": g["p"],
              "change_pct": _pct(g["p"], g["d"]), "regressions": g["reg"],
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
  ch = sorted(_pct(r["policy"], r["default"]) for r in rows)
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


def evaluate(problem_name: str, corpus_dir, policy, output, split: str = "heldout",
             jobs: int = 2, timeout: float = 300.0, pool_kind: str | None = None,
             stream=None, use_cache: bool = True, guarded: bool = False,
             plain_output=None, plain_stream=None) -> dict:
  """corpus_dir: a corpus, or a prepared corpus (llc problems prepare one if given a
  corpus). guarded: score guarded compiles of the policy (mlgo.env.guarded) instead of
  the policy's own; with plain_output, the policy's own compiles (which a guarded
  compile makes anyway) are also evaluated, into that directory, printed to
  plain_stream, and their summary is returned under "plain". Returns the summary (also
  written to OUTPUT/summary.json)."""
  stream = stream or sys.stdout
  problem = problems_lib.get_problem(problem_name)
  if guarded:
    from mlgo.env import guarded as guarded_lib  # pylint: disable=import-outside-toplevel
    guarded_lib.check_problem(problem)
    if policy == "default":
      raise ValueError("a guarded evaluation needs a policy, not 'default'")
  elif plain_output is not None:
    raise ValueError("plain_output goes with guarded=True (the plain evaluation is the "
                     "guarded one's by-product)")
  corpus = work.corpus_for(corpus_dir, problem, jobs=jobs, stream=sys.stderr)
  if split == "all":
    modules = list(corpus.modules)
  else:
    modules = corpus.split(split)
  if not modules:
    raise ValueError(f"{corpus_dir}: no modules in split {split!r} "
                     f"(corpus has {len(corpus.modules)} modules)")
  if policy == "default":
    ref, policy_name = "default", "default"
  else:
    ref = work.policy_ref(str(policy), greedy=True)
    if ref[0]["problem"] != problem_name and problems_lib.same_decisions(ref[0]["problem"],
                                                                         problem_name):
      # Same decisions, another reward (e.g. an eviction policy trained on the
      # performance model): it runs as it is, scored by the reward asked for.
      print(f"evaluate: {policy} is an {ref[0]['problem']} policy; scoring it as "
            f"{problem_name}", file=sys.stderr)
      ref[0]["problem"] = problem_name
    elif problems_lib.get_problem(ref[0]["problem"]).variant_of == problem_name:
      # A variant (same decisions and reward, more features, e.g. inlining_ir2vec of
      # inlining): run it as the policy needs; the default side is the same.
      print(f"evaluate: {policy} is an {ref[0]['problem']} policy; evaluating as "
            f"{ref[0]['problem']}", file=sys.stderr)
      problem_name = ref[0]["problem"]
      problem = problems_lib.get_problem(problem_name)
    if ref[0]["problem"] != problem_name:
      raise ValueError(f"{policy}: policy is for problem {ref[0]['problem']!r}, "
                       f"not {problem_name!r}")
    policy_name = str(policy) + (" (guarded)" if guarded else "")
  out = pathlib.Path(output)
  out.mkdir(parents=True, exist_ok=True)
  print(f"evaluating {policy_name} on {len(modules)} {split} modules of {corpus.path} "
        f"({problem_name}, LLVM {corpus.llvm_version})", file=sys.stderr)
  progress = Progress("evaluate", len(modules), stream=sys.stderr)
  main, plain = _Tally(), (_Tally() if plain_output is not None else None)
  guard = {"compiles": 0, "policy_functions": 0, "mismatches": []}
  cache = DefaultCache.for_problem(problem)
  with make_pool(pool_kind, jobs) as pool:
    ids = []
    for m in modules:
      key = cache_key(m, problem_name, corpus.llvm_version)
      cached = cache.get(key) if use_cache else None
      ids.append(pool.submit(compile_pair, m, problem_name, ref, corpus.llvm_version,
                             timeout, cached, guarded))
    # Tallied in submission order: the same policy gives the same files, rows and sums
    # whichever compile finishes first.
    for r in in_submission_order(pool.results(), ids):
      m = r.item[0]
      if not r.ok:
        reason = (r.error or "cancelled").strip().splitlines()[-1][:300]
        for t in (main, plain):
          if t is not None:
            t.failed.append({"module": m.name, "reason": reason})
        progress.update(failed=1, node=r.node)
        continue
      d, p = r.value
      if d["ok"]:
        cache.put(cache_key(m, problem_name, corpus.llvm_version), d)
      if plain is not None:
        plain.add(m, d, p.get("plain") or {"ok": False, "reason": p["reason"]}, r.where(),
                  problem.missing_score)
      if not main.add(m, d, p, r.where(), problem.missing_score):
        progress.update(failed=1, node=r.node)
        continue
      if guarded:
        guard["compiles"] += p["guard_compiles"]
        guard["policy_functions"] += p["guard_policy_functions"]
        guard["mismatches"] += [f"{m.name}::{f}" for f in p["guard_mismatches"]]
      progress.update(node=r.node)
  progress.close()
  if use_cache:
    cache.save()
  summary = _report(main, problem_name, policy_name, corpus, split, out, stream,
                    guard if guarded else None)
  if plain is not None:
    plain_name = policy_name.removesuffix(" (guarded)")
    summary["plain"] = _report(plain, problem_name, plain_name, corpus, split,
                               pathlib.Path(plain_output), plain_stream or stream, None)
  return summary


class _Tally:
  """One evaluation's rows (per key), failures and counts while results come in."""

  def __init__(self):
    self.rows, self.failed, self.ok_names = [], [], set()
    self.decisions = self.corrections = 0

  def add(self, m, d, p, where, missing) -> bool:
    """Adds one module's default (d) and policy (p) summaries; False if either failed."""
    if not d["ok"] or not p["ok"]:
      self.failed.append({"module": m.name, "reason": where + (
          ("default: " + str(d["reason"])) if not d["ok"] else ("policy: " + str(p["reason"])))})
      return False
    self.decisions += p["decisions"]
    self.corrections += p.get("corrections", 0)
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
                        "change_pct": _pct(pv, dv),
                        "regression": int(pv > dv * (1 + REGRESSION_THRESHOLD)),
                        "default_decisions": d["decisions"],
                        "policy_decisions": p["decisions"],
                        "default_seconds": round(d["seconds"], 3),
                        "policy_seconds": round(p["seconds"], 3)})
    return True


def _report(t: _Tally, problem_name, policy_name, corpus, split, out, stream,
            guard=None) -> dict:
  """Writes one evaluation's files (per_key.csv, failed.csv, changes.png,
  regressed_modules.csv, summary.json) and console tables; returns its summary."""
  problem = problems_lib.get_problem(problem_name)
  out.mkdir(parents=True, exist_ok=True)
  rows, failed = sorted(t.rows, key=lambda r: r["key"]), t.failed
  fields = ["key", "module", "package", "language", "default", "policy", "change_pct",
            "regression", "default_decisions", "policy_decisions", "default_seconds",
            "policy_seconds"]
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
          f" vs default, {split} ({_pct(psum, dsum):+.2f}% total)")
  mods = module_changes(rows)
  module_change_list = sorted(v[2] for v in mods.values())
  regressed_modules = _write_regressed_modules(rows, out / "regressed_modules.csv", stream)
  summary = {"problem": problem_name, "policy": policy_name, "corpus": str(corpus.path),
             "split": split, "modules": ok_modules, "keys": len(rows), "failed": len(failed),
             "key": problem.key, "default": dsum, "policy_score": psum,
             "change_pct": _pct(psum, dsum), "regressions": regressions,
             "improvements": sum(int(r["policy"] < r["default"] * (1 - REGRESSION_THRESHOLD))
                                 for r in rows),
             "median_module_change_pct": 100.0 * _median(module_change_list),
             "key_geomean_change_pct": 100.0 * (key_geomean(
                 (r["default"], r["policy"]) for r in rows) or 0.0),
             "modules_regressed": len(regressed_modules),
             "modules_regressed_pct": (100.0 * len(regressed_modules) / len(mods)
                                       if mods else 0.0),
             "decisions": t.decisions, "corrections": t.corrections,
             "regression_definition": f"policy score > {1 + REGRESSION_THRESHOLD:.2f} x default",
             "per_package": per_package, "per_language": per_language}
  if guard is not None:
    summary["guarded"] = guard
  with open(out / "summary.json", "w") as f:
    json.dump(summary, f, indent=1)
  if failed:
    print(f"{len(failed)} modules failed to compile (see {out / 'failed.csv'}); "
          f"left out of the totals", file=stream)
  print(f"{problem.key}s improved by more than {REGRESSION_THRESHOLD:.0%}: "
        f"{summary['improvements']}, regressed: {regressions}; per-{problem.key} geomean "
        f"{summary['key_geomean_change_pct']:+.2f}%; median module change "
        f"{summary['median_module_change_pct']:+.2f}%; {t.decisions} decisions, "
        f"{t.corrections} corrected answers", file=stream)
  if guard is not None:
    unit = problem.key + "s"
    print(f"guarded: {guard['compiles']} policy-side {problem.tool} compiles for {ok_modules} "
          f"modules; {guard['policy_functions']} {unit} kept the policy's decisions, the rest "
          f"the default's; {len(guard['mismatches'])} {unit} not at the lower of the two "
          f"scores{' (' + ', '.join(guard['mismatches'][:3]) + ')' if guard['mismatches'] else ''}",
          file=stream)
  line = summary_line(problem_name, ok_modules, len(rows), dsum, psum, regressions)
  print(line, file=stream, flush=True)
  summary["line"] = line
  return summary
