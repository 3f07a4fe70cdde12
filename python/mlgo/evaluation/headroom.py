"""How much room a per-module problem (inlining for size) leaves on a corpus.

Before training a policy for a code base, and before believing a trained one, it helps
to know what decisions of the simplest kinds could win there at all. Each module is
compiled with a family of variants:
  - the default with its threshold moved for every call site (`threshold+D`,
    env.policies.ThresholdShift): the global knob of the heuristic;
  - with a policy dir, that policy with its inline logit moved (`policy+S`,
    env.policies.LogitShift; `policy+0` is the policy itself, deferrals included): the
    policy's global knob;
  - with `search=N`, a greedy search over single decisions (`searchN`, search_module):
    from the policy's compile (or the default's), flip one decision at a time, least
    confident first, keep a flip that makes the module smaller, at most N compiles;
and per module the smallest of the default and every variant is kept. That "best per
module" is an oracle (it knows each module's answer); no single compile setting reaches
it, so it is a yardstick, not a result: if it is small, no knob of these kinds pays on
this code, and a learned per-call-site policy has to find gains of another kind.

Writes headroom.csv (per module: default, each variant, the best and which variant),
summary.json, failed.csv (a crashed or hung compile skips that variant of that module
and is counted) and headroom.png; prints one line per variant, the room per package
and the per-module best over all variants and over each kind.
"""
import csv
import json
import os
import pathlib
import sys
import time
import zlib

import numpy as np

from mlgo import problems as problems_lib
from mlgo.env import work
from mlgo.env.policies import LogitShift, PrefixFlip, ThresholdShift
from mlgo.evaluation.evaluate import DefaultCache, cache_key, compile_pair
from mlgo.util.progress import Progress
from mlgo.workers import make_pool
from mlgo.workers.base import in_submission_order

DEFAULT_THRESHOLDS = (-40, -20, -10, 10, 20, 40)
DEFAULT_SHIFTS = (-4.0, -3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 4.0)
# ThresholdShift reads these from the channel's features.
_THRESHOLD_FEATURES = ("cost_estimate", "threshold")


def _pct(new, old):
  return (new / old - 1.0) * 100.0 if old else 0.0


def variants_for(problem, policy=None, thresholds=DEFAULT_THRESHOLDS,
                 shifts=DEFAULT_SHIFTS, ref=None) -> list:
  """[(name, picklable policy)] for `problem` (a Problem); policy: a policy dir or None
  (ref: its work.policy_ref, if already loaded)."""
  out = []
  if thresholds:
    missing = [f for f in _THRESHOLD_FEATURES if f not in problem.feature_names]
    if missing:
      raise ValueError(f"{problem.name}: threshold variants need the features "
                       f"{', '.join(missing)}, which this problem does not send")
    out += [(f"threshold{int(d):+d}", ThresholdShift(int(d))) for d in thresholds]
  if policy is not None and shifts:
    spec, weights, _ = ref or work.policy_ref(str(policy))
    arch = spec["architecture"]
    if int(arch.get("num_actions", 0)) != 2:
      raise ValueError(f"{policy}: logit shifts need a two-action categorical policy, "
                       f"not {arch['type']}")
    out += [(f"policy{float(s):+g}", LogitShift(spec, weights, float(s))) for s in shifts]
  if not out:
    raise ValueError("headroom: no variants (give thresholds, or a policy and shifts)")
  return out


def _problem_for(problem_name: str, policy, ref):
  """The problem the compiles run as: a policy (dir `policy`, loaded as `ref`) of a
  variant problem (inlining_ir2vec of inlining) runs as its own; any other mismatch is
  an error."""
  problem = problems_lib.get_problem(problem_name)
  if problem.key != "module":
    raise ValueError(f"{problem_name}: headroom compares per-module scores (inlining for "
                     f"size); per-function problems (regalloc) have the guarded compile, "
                     f"which already takes the better of the two per function")
  if policy is None:
    return problem
  theirs = ref[0]["problem"]
  if theirs == problem_name:
    return problem
  if problems_lib.get_problem(theirs).variant_of == problem_name:
    return problems_lib.get_problem(theirs)
  raise ValueError(f"{policy}: policy is for problem {theirs!r}, not {problem_name!r}")


def grows_past(size: float, default_size: float, growth: float) -> bool:
  """Whether a compile of `size` is more than the fraction `growth` bigger than clang's:
  the one test of the floor, for where a search starts and which modules a collection
  adds (self_imitation.collect_search), so the two always agree."""
  return size > default_size * (1.0 + growth)


def search_module(module, problem_name: str, ref, budget: int, llvm_version: int,
                  timeout: float, seed: int = 0, keep_trajectory: bool = False,
                  max_seconds: float | None = None,
                  floor_default: float | None = None,
                  max_bytes: float | None = None) -> dict:
  """Work item: greedy search over single decisions, at most `budget` compiles. From the
  compile of `ref` (a policy ref, or "default"), try flipping one decision at a time
  (least confident first for a policy; a seeded random order for the default), with the
  decisions before it replayed and `ref` deciding after it (PrefixFlip). A flip that
  makes the module smaller is kept, and the search goes on after it (an earlier flip
  would hand the later decisions back to `ref`). `max_seconds`: no flip is tried once
  that much wall time has gone (counting the start compile; a module whose compile takes
  minutes gets a few tries, not `budget`). `max_bytes`: the same kind of cap, but
  deterministic: the search compiles at most `max_bytes` bytes of bitcode in all (every
  compile counts the module's .bc size), so a module gets max_bytes // size compiles
  (at most `budget`, at least the start compile). Compile time grows about linearly with
  bitcode size, so this bounds a big module's search as a time cap does, and the same
  command gives the same compiles on any machine. floor_default=G (a policy `ref`):
  clang's own compile is made too, and where the policy's is bigger than it by more than the
  fraction G (0: any growth; 0.01: the "more than 1% bigger" users count) the search
  starts from clang's instead (clang deciding after each flip), so what the search keeps
  never grows past clang's answer by more than G. Returns {"ok", "size", "start_size"
  (the policy's compile), "compiles", "kept", "decisions", "stopped" ("budget", "time",
  "bytes" or "tried": every flip after the last kept one), "start" ("policy" or
  "default"), with floor_default "default_size"} (and with keep_trajectory the searched compile's
  "trajectory", the decisions to imitate: self_imitation.collect_search) or {"ok": False,
  "reason"}."""
  from mlgo import env  # pylint: disable=import-outside-toplevel
  problem = problems_lib.get_problem(problem_name)
  rng = np.random.default_rng([seed, zlib.crc32(module.name.encode())])
  deadline = None if max_seconds is None else time.monotonic() + max_seconds
  cap = budget
  if max_bytes is not None:
    cap = min(budget, max(1, int(max_bytes // max(1, os.path.getsize(module.bc_path)))))

  def compile_with(policy):
    r = env.compile_module(module, problem, policy, llvm_version=llvm_version,
                           timeout=timeout)
    if not r.ok:
      return None, None, r.reason
    traj = r.trajectories[0] if r.trajectories else None
    return sum(problem.score_fn(r.reward).values()), traj, None

  base = work.make_policy(ref, problem=problem)   # greedy: the same answers every compile

  def least_sure_first(traj):   # |logit difference| of each decision, smallest first
    lg = base.dist_params_batch(traj.features)["logits"]
    return np.argsort(np.abs(lg[:, 1] - lg[:, 0]), kind="stable")

  size, traj, why = compile_with(base)
  if size is None:
    return {"ok": False, "reason": f"start compile: {why}"}
  start_size, compiles, kept, lo = size, 1, 0, 0
  tried, stopped = set(), None
  from_default = ref == "default"
  extra = {}
  if floor_default is not None and not from_default:
    clang = work.make_policy("default", problem=problem)
    d_size, d_traj, why = compile_with(clang)
    compiles += 1
    if d_size is None:
      return {"ok": False, "reason": f"default compile: {why}"}
    extra["default_size"] = d_size
    if grows_past(size, d_size, floor_default):
      size, traj, base, from_default = d_size, d_traj, clang, True
  order = least_sure_first(traj) if not from_default and traj is not None else None
  while compiles < cap and traj is not None and len(traj.actions):
    if deadline is not None and time.monotonic() >= deadline:
      stopped = "time"
      break
    # The default has no logits: a fresh seeded draw each try (a random untried decision).
    todo = order if not from_default else rng.permutation(len(traj.actions))
    cand = [int(i) for i in todo if i >= lo and int(i) not in tried]
    if not cand:
      break
    at = cand[0]
    tried.add(at)
    s2, t2, _ = compile_with(PrefixFlip(traj.actions, at, base))
    compiles += 1
    if s2 is not None and s2 < size:
      size, traj, lo, kept, tried = s2, t2, at + 1, kept + 1, set()
      if not from_default:
        order = least_sure_first(traj)
  if stopped is None and compiles >= cap:
    stopped = "budget" if compiles >= budget else "bytes"
  stopped = stopped or "tried"
  out = {"ok": True, "size": size, "start_size": start_size, "compiles": compiles,
         "kept": kept, "decisions": len(traj.actions) if traj is not None else 0,
         "stopped": stopped, "start": "default" if from_default else "policy", **extra}
  if keep_trajectory:
    out["trajectory"] = traj
  return out


def run(problem_name: str, corpus_dir, output, *, policy=None, split: str = "heldout",
        thresholds=DEFAULT_THRESHOLDS, shifts=DEFAULT_SHIFTS, variants=None, jobs: int = 2,
        timeout: float = 300.0, pool_kind: str | None = None, use_cache: bool = True,
        search: int = 0, search_seconds: float | None = None,
        search_bytes: float | None = None, stream=None) -> dict:
  """Compiles every module of `split` with the default and each variant (module
  docstring); `variants` ([(name, policy)]) replaces the ones built from thresholds,
  policy and shifts; search > 0 adds the greedy search with that many compiles a module
  (from the policy's compile, or the default's without a policy), each search stopping
  after `search_seconds` of wall time, or after `search_bytes` bytes of bitcode compiled
  (deterministic; search_module), if given. Returns the summary
  (also OUTPUT/summary.json)."""
  stream = stream or sys.stdout
  ref = work.policy_ref(str(policy)) if policy is not None else None   # loaded once
  problem = _problem_for(problem_name, policy, ref)
  if search < 0:
    raise ValueError(f"headroom: search budget {search} < 0")
  if search_bytes is not None and search_bytes <= 0:
    raise ValueError(f"headroom: search_bytes {search_bytes}: a positive number of bytes")
  if variants is None:   # none asked for is an error only without a search
    knobs = bool(thresholds) or (policy is not None and bool(shifts))
    variants = (variants_for(problem, policy, thresholds, shifts, ref=ref)
                if knobs or not search else [])
  variants = list(variants)
  search_ref = ref or "default"
  if search:   # a work item of its own kind, listed and reported like a variant
    variants.append((f"search{search}", ("search", search_ref)))
  names = [n for n, _ in variants]
  if len(set(names)) != len(names):
    raise ValueError(f"headroom: variant names repeat: {names}")
  corpus = work.corpus_for(corpus_dir, problem, jobs=jobs, stream=sys.stderr)
  modules = list(corpus.modules) if split == "all" else corpus.split(split)
  if not modules:
    raise ValueError(f"{corpus_dir}: no modules in split {split!r} "
                     f"(corpus has {len(corpus.modules)} modules)")
  out = pathlib.Path(output)
  out.mkdir(parents=True, exist_ok=True)
  cache = DefaultCache.for_problem(problem)
  print(f"headroom: {len(modules)} {split} modules of {corpus.path}, {len(variants)} "
        f"variants ({problem.name})", file=sys.stderr)
  failed = []
  defaults = {}
  with make_pool(pool_kind, jobs) as pool:
    # 1. The default of each module (from evaluate's cache where it has it).
    todo = []
    for m in modules:
      hit = cache.get(cache_key(m, problem.name, corpus.llvm_version)) if use_cache else None
      if hit is not None and hit["ok"]:
        defaults[m.name] = hit
      else:
        todo.append(m)
    if todo:
      progress = Progress("headroom: default", len(todo), stream=sys.stderr)
      ids = [pool.submit(compile_pair, m, problem.name, "default", corpus.llvm_version,
                         timeout) for m in todo]
      for r in in_submission_order(pool.results(), ids):
        m = r.item[0]
        d = r.value[0] if r.ok else {"ok": False, "reason": (r.error or "cancelled")}
        if d["ok"]:
          defaults[m.name] = d
          cache.put(cache_key(m, problem.name, corpus.llvm_version), d)
        else:
          failed.append({"module": m.name, "variant": "default", "reason": _last_line(d)})
        progress.update(failed=int(not d["ok"]), node=r.node)
      progress.close()
      if use_cache:
        cache.save()
    # 2. Every variant of every module whose default compiled.
    ok_modules = [m for m in modules if m.name in defaults]
    scores = {m.name: {} for m in ok_modules}
    progress = Progress("headroom", len(ok_modules) * len(variants), stream=sys.stderr)
    ids = []
    for m in ok_modules:
      for _, pol in variants:
        if isinstance(pol, tuple) and pol[0] == "search":
          ids.append(pool.submit(search_module, m, problem.name, pol[1], search,
                                 corpus.llvm_version, timeout, 0, False, search_seconds,
                                 None, search_bytes))
        else:
          ids.append(pool.submit(compile_pair, m, problem.name, pol, corpus.llvm_version,
                                 timeout, defaults[m.name]))
    slots = [(m, name) for m in ok_modules for name in names]
    pos = {tid: i for i, tid in enumerate(ids)}
    searched = {"compiles": 0, "kept": 0, "stopped_by_time": 0, "stopped_by_bytes": 0}
    for r in in_submission_order(pool.results(), ids):
      m, name = slots[pos[r.task_id]]
      p = r.value if r.ok else {"ok": False, "reason": (r.error or "cancelled")}
      if isinstance(p, tuple):   # compile_pair's (default, policy)
        p = p[1]
      if p["ok"] and "size" in p:   # search_module's
        scores[m.name][name] = float(p["size"])
        searched["compiles"] += p["compiles"]
        searched["kept"] += p["kept"]
        searched["stopped_by_time"] += int(p["stopped"] == "time")
        searched["stopped_by_bytes"] += int(p["stopped"] == "bytes")
        progress.extra = f"search: {searched['kept']} flips kept"
      elif p["ok"]:
        scores[m.name][name] = sum(p["scores"].values())
      else:
        failed.append({"module": m.name, "variant": name, "reason": _last_line(p)})
      progress.update(failed=int(not p["ok"]), node=r.node)
    progress.close()
  rows = []
  for m in ok_modules:
    d = sum(defaults[m.name]["scores"].values())
    best, best_name = d, "default"
    for name in names:     # ties keep the earlier: the default, then the listed order
      v = scores[m.name].get(name)
      if v is not None and v < best:
        best, best_name = v, name
    rows.append({"module": m.name, "package": m.package, "language": m.language,
                 "default": d, "best": best, "best_variant": best_name,
                 **{n: scores[m.name].get(n) for n in names}})
  summary = _summary(problem, corpus, split, rows, names, failed)
  if search:
    summary["search"] = dict(searched, budget=search, max_seconds=search_seconds,
                             max_bytes=search_bytes,
                             start="default" if search_ref == "default" else str(policy))
  _write(out, rows, names, failed, summary)
  _print(summary, stream)
  return summary


def _last_line(result) -> str:
  """A failed result's reason, its last line (a traceback's is the error), cut short."""
  lines = str(result["reason"]).strip().splitlines()
  return (lines[-1] if lines else "no reason given")[:300]


def _oracle(rows, names, key=None) -> dict:
  """Per module the smallest of the default and the variants in `names`; totals."""
  d = b = 0.0
  smaller = 0
  for r in rows:
    if key is not None and not key(r):
      continue
    best = min([r["default"]] + [r[n] for n in names if r[n] is not None])
    d += r["default"]
    b += best
    smaller += best < r["default"]
  return {"default": d, "best": b, "change_pct": _pct(b, d), "modules_smaller": smaller}


def _summary(problem, corpus, split, rows, names, failed) -> dict:
  per_variant = {}
  for n in names:
    done = [r for r in rows if r[n] is not None]
    d = sum(r["default"] for r in done)
    v = sum(r[n] for r in done)
    per_variant[n] = {"modules": len(done), "change_pct": _pct(v, d),
                      "modules_smaller": sum(r[n] < r["default"] for r in done),
                      "modules_bigger": sum(r[n] > r["default"] for r in done),
                      "best_in": sum(r["best_variant"] == n for r in rows),
                      "failed": sum(f["variant"] == n for f in failed)}
  oracles = {"all": _oracle(rows, names)}
  groups = {g: [n for n in names if n.startswith(g)] for g in ("threshold", "policy", "search")}
  groups = {g: ns for g, ns in groups.items() if ns}
  if len(groups) > 1:
    oracles.update({g: _oracle(rows, ns) for g, ns in groups.items()})
  for lang in sorted({r["language"] for r in rows}):
    oracles[f"all, {lang}"] = _oracle(rows, names, key=lambda r, l=lang: r["language"] == l)
  per_package = {pkg: _oracle(rows, names, key=lambda r, p=pkg: r["package"] == p)
                 for pkg in sorted({r["package"] for r in rows})}
  return {"problem": problem.name, "score": problem.score_name, "corpus": str(corpus.path),
          "split": split, "modules": len(rows),
          "default_failed": sum(f["variant"] == "default" for f in failed),
          "variant_failures": sum(f["variant"] != "default" for f in failed),
          "variants": per_variant, "best_per_module": oracles, "per_package": per_package}


def _write(out, rows, names, failed, summary):
  with open(out / "headroom.csv", "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=["module", "package", "language", "default", "best",
                                       "best_variant", *names])
    wr.writeheader()
    wr.writerows(rows)
  if failed:
    with open(out / "failed.csv", "w", newline="") as f:
      wr = csv.DictWriter(f, fieldnames=["module", "variant", "reason"])
      wr.writeheader()
      wr.writerows(failed)
  (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
  _plot(summary, out / "headroom.png")


def _print(s, stream):
  print(f"{'variant':<16} {'modules':>7} {'change':>8} {'smaller':>7} {'bigger':>6} "
        f"{'best in':>7} {'failed':>6}", file=stream)
  for n, v in s["variants"].items():
    print(f"{n:<16} {v['modules']:>7} {v['change_pct']:>+7.2f}% {v['modules_smaller']:>7} "
          f"{v['modules_bigger']:>6} {v['best_in']:>7} {v['failed']:>6}", file=stream)
  if s["default_failed"] or s["variant_failures"]:
    print(f"failed compiles: {s['default_failed']} defaults (module left out), "
          f"{s['variant_failures']} variants (see failed.csv)", file=stream)
  if len(s["per_package"]) > 1:   # where the room is, largest first
    w = max(len(k) for k in s["per_package"])
    for pkg, o in sorted(s["per_package"].items(), key=lambda kv: kv[1]["change_pct"]):
      print(f"  {pkg:<{w}}  best per module {o['change_pct']:+7.2f}%  "
            f"({o['modules_smaller']} modules smaller)", file=stream)
  for k, o in s["best_per_module"].items():
    print(f"best per module ({k}): change={o['change_pct']:+.2f}% "
          f"modules_smaller={o['modules_smaller']}", file=stream)
  o = s["best_per_module"]["all"]
  print(f"headroom: modules={s['modules']} default_{s['score']}={int(round(o['default']))} "
        f"best_{s['score']}={int(round(o['best']))} change={o['change_pct']:+.2f}%",
        file=stream, flush=True)


def _plot(s, path):
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  color = {"threshold": "tab:blue", "policy": "tab:orange", "search": "tab:purple"}
  bars = [(n, v["change_pct"], next((c for g, c in color.items() if n.startswith(g)),
                                     "tab:gray"))
          for n, v in s["variants"].items()]
  bars += [(f"best per module ({k})", o["change_pct"], "tab:green")
           for k, o in s["best_per_module"].items() if "," not in k]
  fig, ax = plt.subplots(figsize=(7, 0.3 * len(bars) + 1.2))
  ax.barh(range(len(bars)), [b[1] for b in bars], color=[b[2] for b in bars])
  ax.set_yticks(range(len(bars)))
  ax.set_yticklabels([b[0] for b in bars], fontsize=8)
  ax.invert_yaxis()
  ax.axvline(0, color="black", linewidth=0.5)
  ax.set_xlabel(f"total {s['score']} change vs the default (%), lower is better")
  ax.set_title(f"{s['problem']}: headroom on {s['modules']} {s['split']} modules")
  fig.tight_layout()
  fig.savefig(path, dpi=100)
  plt.close(fig)
