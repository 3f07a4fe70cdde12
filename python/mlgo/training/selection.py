"""Which policy of a run is kept: the greedy policy is compiled on a fixed sample of
training modules (never the held-out split) every few iterations, scored against the
default, and the best so far is copied to OUTPUT/best_policy.

validation_metric "total": the total score change of the sample; "module_mean": the mean
over modules of (policy + 1) / (default + 1) - 1 (a corpus total can be one hot function,
e.g. an interpreter loop holding 90% of a sample's regalloc cost); "package_mean": the
mean over packages of each package's total change (every package weighs the same, as
code from a new package would); "key_geomean": the geomean over keys (functions for
regalloc) of (policy + 1) / (default + 1), which no single hot function decides (the
evaluator's own figure, report.key_geomean). validation_regression_weight adds that
many points per percent of validation modules more than 1% worse than the default (what
users of a size or speed policy notice first). validation_packages keeps whole packages
out of training and validates on them (hold_out_packages), so the rule weighs code the
policy never trained on.

validation_hot_modules / validation_hot_limit: a module mean over 200 modules moves by
about a point when one hot module gets a few times costlier, and that is how a kept
regalloc policy ended up tripling an mbedtls program's `main` (on training and held-out
code alike). With both set, the K training modules with the largest known default cost
(hot_set) are compiled too whenever a validation would become the best, and an
iteration that makes one of them more than `limit` times its default ((policy + 1) /
(default + 1), module totals) is not kept (keep_if_best).
"""
import contextlib
import os

import numpy as np

from mlgo.env import work
from mlgo.evaluation.report import key_geomean
from mlgo.util import files
from mlgo.workers import make_pool
from mlgo.workers.base import in_submission_order


def hold_out_packages(train_modules, cfg, where="corpus"):
  """(modules to train on, validation pool, package names) under cfg.validation_packages /
  validation_package_names; with neither, (train_modules, [], []). Named packages must be
  in the training split; a count takes a seeded choice of the packages, and leaves at
  least one package to train on."""
  names = list(getattr(cfg, "validation_package_names", ()) or ())
  count = int(getattr(cfg, "validation_packages", 0) or 0)
  if not names and count <= 0:
    return list(train_modules), [], []
  packages = sorted({m.package for m in train_modules})
  if names:
    missing = [n for n in names if n not in packages]
    if missing:
      raise ValueError(f"{where}: validation_package_names {missing} are not packages of "
                       f"the training split (it has {', '.join(packages)})")
    chosen = sorted(set(names))
  else:
    if count >= len(packages):
      raise ValueError(f"{where}: validation_packages={count} leaves no package to train "
                       f"on (the training split has {len(packages)})")
    rng = np.random.default_rng(cfg.seed + 4242)
    chosen = sorted(packages[i] for i in rng.choice(len(packages), size=count, replace=False))
  keep = set(chosen)
  return ([m for m in train_modules if m.package not in keep],
          [m for m in train_modules if m.package in keep], chosen)


def within_size(modules, cfg) -> list:
  """`modules` without those whose bitcode file is bigger than cfg.max_module_bytes
  (0: all of them); none left is an error naming the cap."""
  cap = cfg.max_module_bytes
  if not cap:
    return list(modules)
  out = [m for m in modules if os.path.getsize(m.bc_path) <= cap]
  if modules and not out:
    raise ValueError(f"PPOConfig.max_module_bytes={cap}: every one of the {len(modules)} "
                     f"training modules is bigger (smallest "
                     f"{min(os.path.getsize(m.bc_path) for m in modules)} bytes)")
  return out


def validation_set(train_modules, state: dict, cfg) -> list:
  """A seeded sample of training modules, chosen once and kept in the state, so every
  validation of a run (the warm start's included) scores the same modules. Modules known
  to have no decisions, or more than max_module_decisions, or bigger than
  max_module_bytes, are left out; a module whose default is not known yet gets it
  compiled by the first validation (validate)."""
  by_name = {m.name: m for m in train_modules}
  chosen = state.get("validation_set")
  if chosen is not None:
    return [by_name[n] for n in chosen if n in by_name]
  nd = state.get("decisions", {})
  cap = cfg.max_module_decisions or float("inf")
  mods = [m for m in within_size(train_modules, cfg) if 0 < nd.get(m.name, 1) <= cap]
  rng = np.random.default_rng(cfg.seed + 12345)
  k = min(cfg.validation_modules, len(mods))
  out = [mods[i] for i in sorted(rng.choice(len(mods), size=k, replace=False))]
  state["validation_set"] = [m.name for m in out]
  return out


def _module_scores(problem, corpus, modules, spec, weights, default_scores, cfg, state,
                   pool):
  """Compiles the greedy policy on `modules`: ([(module, policy total, default total,
  [(default, policy) per key])] in the modules' order, leaving out failed compiles;
  compile CPU seconds). Modules without a known default (state["default_modules"]) get
  the default compiled first; its scores are added to default_scores."""
  ref = (spec, weights, True)
  cpu = 0.0
  out = []
  have_default = set(state.get("default_modules", [])) if state is not None else None
  # The default's keys of each module, grouped once (not scanned per result).
  names = {m.name for m in modules}
  keys_of = {}
  for k, d in default_scores.items():
    name = problem.module_of(k)
    if name in names:
      keys_of.setdefault(name, []).append((k, d))
  with (contextlib.nullcontext(pool) if pool is not None
        else make_pool(cfg.pool, cfg.jobs)) as pool:
    tid = {}
    for i in work.largest_first(modules):   # big modules start first
      m = modules[i]
      tid[i] = pool.submit(work.compile_one, m, problem.name, ref, None,
                           corpus.llvm_version, cfg.compile_timeout,
                           have_default is not None and m.name not in have_default)
    # Summed in the modules' order: the figure that picks the kept policy must not
    # change in its last bits with which compile finished first.
    for r in in_submission_order(pool.results(), [tid[i] for i in range(len(modules))]):
      cpu += r.seconds
      if not (r.ok and r.value[0].ok):
        continue   # a failed module is left out of both totals
      name = r.item[0].name
      dres = r.value[1]
      if dres is not None and dres.ok:
        state.setdefault("default_modules", []).append(name)
        state.setdefault("decisions", {})[name] = int(dres.decisions or 0)
        for k, d in problem.scores(name, dres.reward).items():
          default_scores[k] = d
          keys_of.setdefault(name, []).append((k, d))
      scores = problem.scores(name, r.value[0].reward)
      p_m = d_m = 0.0
      keys = []
      for k, d in keys_of.get(name, ()):
        if k in scores or problem.missing_score is not None:
          p_k = scores.get(k, problem.missing_score or 0.0)
          p_m += p_k
          d_m += d
          keys.append((d, p_k))
      out.append((r.item[0], p_m, d_m, keys))
  return out, cpu


def validate(problem, corpus, modules, spec: dict, weights: dict, default_scores: dict, cfg,
             state: dict | None = None, pool=None):
  """(change vs default in % by cfg.validation_metric, compile CPU seconds). Modules
  without a known default (state["default_modules"]) get the default compiled first; its
  scores are added to default_scores (and the module to the state's default_modules).
  `pool`: workers to compile on (kept open); None starts and stops a pool of cfg.jobs."""
  if cfg.validation_metric not in ("module_mean", "package_mean", "total", "key_geomean"):
    raise ValueError(f"validation_metric {cfg.validation_metric!r}: expected total, "
                     "module_mean, package_mean or key_geomean")
  rows, cpu = _module_scores(problem, corpus, modules, spec, weights, default_scores, cfg,
                             state, pool)
  ratios = [(p_m + 1.0) / (d_m + 1.0) - 1.0 for _, p_m, d_m, _ in rows]
  if cfg.validation_metric == "module_mean":
    val = float(np.mean(ratios)) * 100.0 if ratios else float("nan")
  elif cfg.validation_metric == "package_mean":
    pkg = {}   # package -> [policy, default]
    for m, p_m, d_m, _ in rows:
      t = pkg.setdefault(getattr(m, "package", "") or "", [0.0, 0.0])
      t[0] += p_m
      t[1] += d_m
    ch = [(p / d - 1.0) * 100.0 for p, d in pkg.values() if d > 0]
    val = float(np.mean(ch)) if ch else float("nan")
  elif cfg.validation_metric == "total":
    pol, dft = sum(r[1] for r in rows), sum(r[2] for r in rows)
    val = (pol / dft - 1.0) * 100.0 if dft else float("nan")
  else:
    g = key_geomean([k for r in rows for k in r[3]])
    val = g * 100.0 if g is not None else float("nan")
  if ratios and getattr(cfg, "validation_regression_weight", 0.0):
    regressed = sum(r > 0.01 for r in ratios)
    val += cfg.validation_regression_weight * 100.0 * regressed / len(ratios)
  return val, cpu


def hot_checks(cfg) -> bool:
  return bool(getattr(cfg, "validation_hot_modules", 0)) and \
      float(getattr(cfg, "validation_hot_limit", 0.0) or 0.0) > 0.0


def hot_set(modules, state: dict, cfg, problem) -> list:
  """The cfg.validation_hot_modules modules with the largest known default total
  (state["default_scores"]; modules whose default is not known are not candidates),
  chosen once and kept in the state like the validation set."""
  by_name = {m.name: m for m in modules}
  chosen = state.get("hot_set")
  if chosen is not None:
    return [by_name[n] for n in chosen if n in by_name]
  totals = {}
  for k, d in state.get("default_scores", {}).items():
    name = problem.module_of(k)
    if name in by_name:
      totals[name] = totals.get(name, 0.0) + float(d)
  order = sorted(totals, key=lambda n: (-totals[n], n))[:int(cfg.validation_hot_modules)]
  out = [by_name[n] for n in order]
  state["hot_set"] = [m.name for m in out]
  return out


def needs_hot_check(state: dict, val: float, cfg) -> bool:
  """Whether a validation scoring `val` needs the hot modules compiled: only one that
  would be kept does (the best so far, or any while every one so far was refused)."""
  if not hot_checks(cfg) or val != val:
    return False
  best = state.get("best_validation")
  return best is None or bool(best.get("refused")) or val < best["change_pct"]


def hot_check(problem, corpus, modules, spec: dict, weights: dict, default_scores: dict,
              cfg, state: dict | None = None, pool=None):
  """(the largest (policy + 1) / (default + 1) over `modules`' totals, the module it is
  in, compile CPU seconds); (1.0, None, cpu) when no module compiled."""
  rows, cpu = _module_scores(problem, corpus, modules, spec, weights, default_scores, cfg,
                             state, pool)
  worst, where = 1.0, None
  for m, p_m, d_m, _ in rows:
    r = (p_m + 1.0) / (d_m + 1.0)
    if where is None or r > worst:
      worst, where = r, m.name
  return worst, where, cpu


def keep_if_best(state: dict, output, val: float, iteration: int, policy_dir,
                 worst: float | None = None, limit: float = 0.0):
  """OUTPUT/best_policy becomes a copy of `policy_dir` if `val` is the best (lowest) yet.
  Every validation is kept in state["validation_history"] (iteration -> value), so a
  final policy can also be built from the best few (mlgo.training.pipeline).
  `worst` (hot_check's ratio) above `limit` > 0 refuses the iteration: it is kept only
  while every iteration so far was refused, and then only with a smaller worst ratio."""
  if val != val:
    return   # NaN: nothing was validated
  state.setdefault("validation_history", {})[str(iteration)] = float(val)
  refused = worst is not None and limit > 0 and worst > limit
  if worst is not None:
    state.setdefault("hot_history", {})[str(iteration)] = float(worst)
  if refused:
    state.setdefault("hot_refused", []).append(int(iteration))
  best = state.get("best_validation")
  if best is None:
    better = True
  elif best.get("refused"):
    better = not refused or worst < best["worst_hot_ratio"]
  else:
    better = not refused and val < best["change_pct"]
  if better:
    state["best_validation"] = {"iteration": iteration, "change_pct": val}
    if worst is not None:
      state["best_validation"].update(worst_hot_ratio=float(worst), refused=refused)
    files.replace_dir_with_copy(policy_dir, output / "best_policy")


def best_iterations(history: dict, k: int, refused=()) -> list:
  """The k iterations of `history` (iteration, as int or str -> validation value, e.g. a
  state's validation_history) with the best (lowest) values, best first; ties go to the
  earlier iteration. Iterations in `refused` (a state's hot_refused) are left out."""
  out = {int(i) for i in refused}
  order = sorted((it for it in history if int(it) not in out),
                 key=lambda it: (history[it], int(it)))
  return [int(it) for it in order[:k]]
