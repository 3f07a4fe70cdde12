"""Counterfactual rollouts: per-decision credit for a trained policy, measured.

PPO credits every decision of a key (a module for inlining, a function for eviction)
with one score change, so where a key holds hundreds or thousands of decisions the
signal per decision is almost nothing. A rollout probe measures one decision directly:
compile the module with the greedy policy (score S0), then compile it again answering
decision number i with the problem's alternative (`Problem.probe_alternative`: the other
answer for inlining, the default-equivalent column where an eviction policy departs
from it) and letting the same policy decide everything after it (score Si). Si - S0 is
the exact effect of that one choice, including everything it changes later (the
compiler is deterministic: the first i observations are the same in both compiles,
which is checked). The score is the module's total under the problem's reward (.text
bytes; the allocator's weighted spill cost). Cost-sensitive imitation on these probes
(AggreVaTe: roll in with the policy, try the alternative, roll out with the policy) then
moves the policy towards the better action where it matters, while cloning its own
decisions everywhere else.

This module collects the probes and stores them (probe_store); multi_flip puts several
probes in one compile (inlining, credited per function), probe_widening re-records
them with more features, probe_tuning fine-tunes a policy on them. The store's
`base_size` / `probe_sizes` are those module scores (the names are from when only
.text sizes were probed).

  probe_corpus(...)   -> DIR/probes-NNNNN.npz shards + DIR/index.json (resumable)
"""
import hashlib
import json
import math
import os
import pathlib
import pickle
import shutil
import sys
import time

import numpy as np

from mlgo.evaluation.report import REGRESSION_THRESHOLD
from mlgo.policy import policy_io
from mlgo.training import callee_groups as callee_groups_lib
from mlgo.training import multi_flip
# The probe store is read by fine-tuning, widening and tests as rollouts.ProbeStore.
from mlgo.training.probe_store import ProbeStore, probe_alternatives  # noqa: F401


class FlipPolicy:
  """The greedy `policy`, except decision number `flip_at` (counted over the whole
  compile) gets `alternative(observation, action)`. Remembers the raw observation it
  flipped on (for the determinism check)."""

  def __init__(self, policy, flip_at: int, alternative):
    self.policy = policy
    self.flip_at = flip_at
    self.alternative = alternative
    self.i = 0
    self.flipped_on = None

  def act(self, observation):
    a = self.policy.act(observation)
    if self.i == self.flip_at:
      alt = self.alternative(observation, a)
      if alt is not None:
        a = alt
        self.flipped_on = self.policy.raw_vector(observation)
    self.i += 1
    return a


def module_rng(name: str, seed: int) -> np.random.Generator:
  """The module's own generator: the same draws for `name` in every run and worker."""
  h = int(hashlib.sha1(f"{seed}:{name}".encode()).hexdigest()[:12], 16)
  return np.random.default_rng(h)


def choose_positions(margins: np.ndarray, n_low: int, n_random: int,
                     rng: np.random.Generator, eligible: np.ndarray | None = None) -> np.ndarray:
  """The `n_low` decisions the policy is least sure of (smallest |logit margin|) plus
  `n_random` others drawn uniformly, among the `eligible` ones (default: all): most
  probes go where a flip is plausible, a few check the confident ones."""
  n = len(margins)
  cand = np.arange(n) if eligible is None else np.flatnonzero(eligible)
  if len(cand) == 0:
    return np.zeros(0, np.int64)
  order = cand[np.argsort(np.abs(margins[cand]), kind="stable")]
  low = order[:min(n_low, len(cand))]
  rest = np.setdiff1d(cand, low)
  rand = rng.choice(rest, size=min(n_random, len(rest)), replace=False) if len(rest) else []
  return np.sort(np.concatenate([low, np.asarray(rand, np.int64)])).astype(np.int64)


def probe_budget(decisions: int, max_probes: int, per_compile: int = 1) -> int:
  """Probes for a module of `decisions` call sites: every one of a small module, about
  sqrt(n)/2 compiles' worth of a large one (its compile is slow, but it holds most of
  the bytes); with several flips a compile, that many times more probes."""
  if decisions <= 0:
    return 0
  return int(min(decisions, max_probes,
                 max(4, math.ceil(per_compile * math.sqrt(decisions) / 2))))


def policy_digest(spec: dict, weights: dict, annotator=None) -> str:
  """A digest of a policy's spec and weights: two dirs holding the same policy (a chain
  round whose guard kept its probed policy goes on with a copy) share it. With a credit
  annotator, its kind and state too (an IR2Native annotator carries its model)."""
  h = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode())
  if annotator is not None:
    h.update(f"{type(annotator).__module__}.{type(annotator).__name__}".encode())
    h.update(pickle.dumps(annotator))
  for k in sorted(weights):
    a = np.ascontiguousarray(weights[k])
    h.update(f"{k}:{a.dtype}:{a.shape}".encode())
    h.update(a.tobytes())
  return h.hexdigest()[:20]


class GreedyCache:
  """The greedy compiles of one policy, one pickled CompileResult a module, in
  DIR/<digest of the policy and annotator>/: a greedy compile is deterministic (the flips'
  determinism check relies on it), so probing the same policy again with new seeds needs
  only the flip compiles. Keyed within the digest by the module's bitcode and flags and
  the LLVM version. Only good compiles are kept; an unreadable entry is compiled
  again. Opening it for a policy removes the other digests' dirs (one policy's compiles
  at a time: a chain probes a policy again only while its guard keeps it)."""

  def __init__(self, root, spec: dict, weights: dict, annotator=None):
    root = pathlib.Path(root)
    self.dir = root / policy_digest(spec, weights, annotator)
    if root.is_dir():
      for d in root.iterdir():
        if d != self.dir and len(d.name) == 20 and all(c in "0123456789abcdef" for c in d.name):
          shutil.rmtree(d, ignore_errors=True)
    self.dir.mkdir(parents=True, exist_ok=True)

  @staticmethod
  def path(cache_dir, module, problem_name: str, llvm_version: int) -> pathlib.Path:
    from mlgo.evaluation.evaluate import cache_key  # pylint: disable=import-outside-toplevel
    return pathlib.Path(cache_dir) / f"{cache_key(module, problem_name, llvm_version)}.pkl"

  @staticmethod
  def load(path):
    try:
      with open(path, "rb") as f:
        got = pickle.load(f)
      return got if getattr(got, "ok", False) else None
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError,
            ImportError, IndexError, TypeError):  # cut, garbage, or from older code
      return None

  @staticmethod
  def store(path, result):
    tmp = pathlib.Path(f"{path}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
      pickle.dump(result, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def probe_module(module, spec: dict, weights: dict, max_probes: int, random_fraction: float,
                 anchors: int, llvm_version: int, timeout: float, seed: int,
                 annotator=None, flips_per_compile: int = 1, flip_compiles: int = 0,
                 greedy_cache=None, callee_groups: int = 0):
  """Runs in a worker: one greedy compile and its flip probes. Returns a dict of arrays
  (or {"failed": reason} when the greedy compile itself fails). With a credit annotator
  (mlgo.credit), each probe also gets the credit's predicted size change of its flip
  (`probe_predicted`: minus the decision's delta where the greedy compile inlined, NaN
  where it did not): the measured flips then check the per-decision credit. A credit
  that compares compiles of one module (function_size: it has `complete`) annotates each
  flip too, and its prediction is the flipped decision's credit in the pair (flip,
  greedy compile): what the flip did to its caller and its callee's survival.
  flips_per_compile > 1 (function_size credit only): up to that many flips share a
  compile (mlgo.training.multi_flip) and each probe's score change is its credit
  (`probe_attributed`), not the module's measured change. flip_compiles > 0 (with
  flips_per_compile > 1): instead of a probe budget, a compile budget of
  min(flip_compiles, ceil(sqrt(decisions) / 2)) flip compiles, each packed with as many
  flips as the functions allow (multi_flip.packed_positions).
  callee_groups > 0 (function_size credit: it names every decision's callee): up to that
  many more compiles, each answering every call to one callee the other way
  (mlgo.training.callee_groups); those that gained become probes with probe_group > 0
  (all are listed in "callees_measured")."""
  from mlgo import env, problems  # pylint: disable=import-outside-toplevel
  problem = problems.get_problem(spec["problem"])

  missing = problem.missing_score if problem.missing_score is not None else np.nan

  def scored(result):
    """(the module's total score, {key: score}) of a compile."""
    per_key = problem.scores(module.name, result.reward)
    return float(sum(per_key.values())), per_key

  policy = policy_io.Policy(spec, weights, greedy=True)
  kept = (GreedyCache.path(greedy_cache, module, problem.name, llvm_version)
          if greedy_cache else None)
  base = GreedyCache.load(kept) if kept else None
  reused = base is not None
  if not reused:
    base = env.compile_module(module, problem, policy, llvm_version=llvm_version,
                              timeout=timeout, annotator=annotator)
    if not base.ok:
      return {"failed": f"greedy compile: {base.reason}"}
    if kept:
      GreedyCache.store(kept, base)
  base_seconds = base.seconds
  names = policy.input_names
  # Every decision of the compile in order: one trajectory per function (eviction) or
  # one for the module (inlining); FlipPolicy counts decisions the same way.
  trajs = [t for t in base.trajectories if len(t.actions)]
  n = sum(len(t.actions) for t in trajs)
  # Raw rows as float64: exact for the int64 counts, and holds float features (IR2Vec).
  feats = (np.concatenate([np.concatenate([np.asarray(t.features[f], np.float64).reshape(
      len(t.actions), -1) for f in names], axis=1) for t in trajs])
           if n else np.zeros((0, sum(policy.sizes)), np.float64))
  actions = (np.concatenate([np.asarray(t.actions, np.int64).reshape(-1) for t in trajs])
             if n else np.zeros(0, np.int64))
  # The alternative at each decision (-1: the problem tries none there).
  alts = np.full(n, -1, np.int64)
  keys = []    # the key (module, or module::function) each decision is credited to
  j = 0
  for t in trajs:
    keys += [problem.trajectory_key(module.name, t)] * len(t.actions)
    for i in range(len(t.actions)):
      alt = problem.probe_alternative({f: t.features[f][i] for f in names}, t.actions[i])
      alts[j] = -1 if alt is None else int(np.asarray(alt).reshape(-1)[0])
      j += 1
  eligible = alts >= 0
  rng = module_rng(module.name, seed)
  margins = np.zeros(n)
  if n:
    lg = policy.arch.dist_params(policy.normalizer.encode_scalar_rows(feats))["logits"]
    # A policy that defers takes clang's decision there whatever its network says: a flip
    # there would teach the network where it is not asked. Probe only its own decisions.
    eligible &= ~policy.deferred_rows(feats, lg)
    if lg.shape[1] == 2:
      margins = lg[:, 1] - lg[:, 0]   # inlining: signed, > 0 leans to inline
    else:                            # how far the policy's choice leads the alternative
      r = np.arange(n)
      margins = np.where(eligible, lg[r, actions] - lg[r, np.maximum(alts, 0)], np.inf)
  groups = None
  if flip_compiles > 0:
    c = min(flip_compiles, max(1, math.ceil(math.sqrt(int(eligible.sum())) / 2)))
    pos, groups = multi_flip.packed_positions(
        margins, eligible, *multi_flip.decision_names(base), c, flips_per_compile,
        random_fraction, rng)
  else:
    k = probe_budget(int(eligible.sum()), max_probes, flips_per_compile)
    n_rand = int(round(k * random_fraction))
    pos = choose_positions(margins, k - n_rand, n_rand, rng, eligible)
  sizes = np.full(len(pos), np.nan)
  base_total, base_keys = scored(base)
  key_base = np.array([base_keys.get(keys[p], missing) for p in pos], np.float64)
  key_scores = np.full(len(pos), np.nan)
  mismatch = np.zeros(len(pos), bool)
  failures = []
  # A flip can make the compile slower (more inlining); allow generous time.
  flip_timeout = min(timeout, max(60.0, 6 * base_seconds))
  pair_credit = annotator is not None and hasattr(annotator, "complete")
  if flips_per_compile > 1 and not pair_credit:
    raise ValueError("several flips a compile need the function_size credit")
  predicted = np.full(len(pos), np.nan)
  feats_flipped = feats[pos].copy()
  attributed = np.zeros(len(pos), bool)
  groups_measured = []
  if flips_per_compile > 1:
    # Several flips a compile, each credited by its own functions.
    groups_measured = multi_flip.probe_groups(
        module, problem, policy, base, pos, feats, actions, annotator, flips_per_compile,
        lambda r: scored(r)[0] - base_total, failures,
        compile_kw={"llvm_version": llvm_version, "timeout": flip_timeout},
        out={"mismatch": mismatch, "attributed": attributed, "predicted": predicted,
             "features": feats_flipped}, groups=groups)
    sizes[attributed] = base_total + predicted[attributed]
    key_scores[attributed] = key_base[attributed] + predicted[attributed]
  for j, p in enumerate(pos if flips_per_compile == 1 else ()):
    fp = FlipPolicy(policy, int(p), problem.probe_alternative)
    r = env.compile_module(module, problem, fp, llvm_version=llvm_version,
                           timeout=flip_timeout, annotator=annotator if pair_credit else None)
    if not r.ok:
      failures.append(f"flip {int(p)}: {str(r.reason)[:160]}")
      continue
    if fp.flipped_on is None or not np.array_equal(
        np.asarray(fp.flipped_on, np.float64), feats[p]):
      mismatch[j] = True  # the roll-in diverged: this probe measures nothing
      continue
    sizes[j], per_key = scored(r)
    key_scores[j] = per_key.get(keys[p], missing)
    if pair_credit:
      d = multi_flip.pair_deltas(annotator, r, base)
      predicted[j] = float(d[int(p)]) if d is not None and int(p) < len(d) else np.nan
  take = rng.choice(n, size=min(anchors, n), replace=False) if n else np.zeros(0, np.int64)
  deltas = None if pair_credit else (base.annotations or {}).get("decision_delta")
  if deltas and len(deltas[0]) == n:
    d = np.asarray(deltas[0], np.float64)[pos]
    predicted = np.where(actions[pos] == 1, -d, np.nan)
  probes = {"positions": pos, "margins": margins[pos], "probe_features": feats_flipped,
            "probe_actions": actions[pos], "probe_alternatives": alts[pos],
            "probe_sizes": sizes, "probe_predicted": predicted, "probe_key_base": key_base,
            "probe_key_scores": key_scores, "mismatch": mismatch,
            "probe_attributed": attributed, "probe_group": np.zeros(len(pos), np.int64)}
  callees_measured, callee_compiles = [], 0
  if callee_groups > 0:
    # Drawn after the single probes and anchors: those stay what they are without groups.
    if not pair_credit:
      raise ValueError("callee probes need the function_size credit (callee names)")
    chosen = callee_groups_lib.choose(callee_groups_lib.candidates(
        multi_flip.decision_names(base)[1], actions, eligible), callee_groups, rng)
    callee_compiles = len(chosen)
    callees_measured = callee_groups_lib.probe_callees(
        module, problem, policy, chosen, base_total, lambda r: scored(r)[0], failures,
        {"llvm_version": llvm_version, "timeout": flip_timeout})
    # Single flips at the calls of a callee whose all-calls flip gained, saying the one
    # call alone does not: not trained on (mismatch), counted as superseded.
    over = callee_groups_lib.superseded(pos, sizes - base_total, callees_measured)
    probes["mismatch"] = mismatch | over
    more = callee_groups_lib.records([(g, d) for g, d in callees_measured if d < 0], feats,
                                     actions, alts, margins, base_total,
                                     lambda p: base_keys.get(keys[p], missing))
    probes = {k: np.concatenate([v, more[k]]) for k, v in probes.items()}
  return {**probes, "module": module.name, "language": getattr(module, "language", ""),
          "base_size": base_total, "decisions": n, "base_seconds": base_seconds,
          "groups_measured": groups_measured,
          "callees_measured": [(g.callee, int(g.major), len(g.flip), len(g.own), float(d))
                               for g, d in callees_measured],
          "callee_compiles": callee_compiles,
          "callee_superseded": int(over.sum()) if callee_groups > 0 else 0,
          "anchor_features": feats[take], "anchor_actions": actions[take],
          "failures": failures, "greedy_reused": reused}


def credit_agreement(store) -> dict:
  """How well the credit's predicted flip effects match the measured ones, over the
  probes with a prediction (ir2native: inlined decisions; function_size: all): Spearman rank correlation and how often the sign agrees
  (among probes that changed the size)."""
  from mlgo.ir2native import model as model_lib  # pylint: disable=import-outside-toplevel
  pred, real = [], []
  for sh in store.shards():
    if "probe_predicted" not in sh:
      continue
    base = sh["base_size"][sh["probe_module"]]
    d = sh["probe_sizes"] - base
    ok = np.isfinite(d) & np.isfinite(sh["probe_predicted"]) & ~sh["mismatch"]
    pred.append(sh["probe_predicted"][ok])
    real.append(d[ok])
  if not pred or not sum(len(p) for p in pred):
    return {"credit_probes": 0}
  pred, real = np.concatenate(pred), np.concatenate(real)
  moved = real != 0
  return {"credit_probes": int(len(real)),
          "credit_spearman": round(model_lib.spearman(pred, real), 3),
          "credit_sign": round(float(np.mean(np.sign(pred[moved]) == np.sign(real[moved])))
                               if moved.any() else float("nan"), 3)}


class GreedyFigure:
  """The probed policy's greedy size against the default's, summed over the modules
  seen so far: a probe round's running view of the policy's training-split figure.
  Modules without a default size are left out of both sums."""

  def __init__(self, default_sizes: dict):
    self.defaults = default_sizes
    self.policy = self.default = 0.0
    self.modules = self.regressed = 0

  def add(self, module: str, size: float):
    d = self.defaults.get(module)
    if d is None or not math.isfinite(size):
      return
    self.policy += size
    self.default += d
    self.modules += 1
    self.regressed += int(size > (1 + REGRESSION_THRESHOLD) * d)

  def change_pct(self) -> float:
    return 100.0 * (self.policy - self.default) / self.default if self.default else 0.0

  def text(self) -> str:
    return (f"greedy {self.change_pct():+.2f}% vs default over {self.modules} modules "
            f"({self.regressed} >1% bigger)")


def probe_corpus(corpus_dir, policy_dir, output, *, split: str = "train",
                 max_probes: int = 16, random_fraction: float = 0.25, anchors: int = 200,
                 max_modules: int | None = None, jobs: int | None = None,
                 timeout: float = 300.0, seed: int = 0, pool: str | None = None,
                 credit_model: str | None = None, credit_kind: str = "ir2native",
                 flips_per_compile: int = 1, flip_compiles: int = 0,
                 default_sizes: dict | None = None, greedy_cache=None,
                 callee_groups: int = 0, stream=sys.stderr) -> dict:
  """Probes every module of `split` (or a seeded sample of `max_modules`) with the
  greedy policy of `policy_dir`. Failed or hung compiles are skipped and counted.
  credit_model: an IR2Native model dir; the probes then also measure how well its
  per-decision credit predicts each flip (stats "credit_spearman", "credit_sign").
  credit_kind="function_size" (no model) measures the measured per-function credit the
  same way. flips_per_compile > 1 (with credit_kind="function_size"): that many flips
  share a compile, each credited by its own functions (mlgo.training.multi_flip); the
  stats then compare the summed credits with each compile's measured change.
  flip_compiles > 0: a fixed number of flip compiles a module (at most that many, fewer
  for small modules), each packed with up to flips_per_compile flips, in place of
  max_probes (see probe_module).
  default_sizes (module -> the default heuristic's size): the progress line and the
  stats then also give the greedy policy's running change against the default, over
  the modules done so far (resumed ones included): the figure a probe chain reads for
  this policy once the round ends.
  greedy_cache: a dir (GreedyCache) keeping this policy's greedy compiles for the next
  probe of the same policy, which then reuses them (stats "greedy_reused"; the
  compiles counted are the ones made).
  callee_groups > 0 (with credit_kind="function_size"): per module, up to that many
  more compiles, each flipping every call to one callee at once (mlgo.training.
  callee_groups; stats "callee_compiles", "callee_probes", "callee_better" (compiles
  whose change was a gain) and "callee_change" (their summed measured change))."""
  from mlgo import problems as problems_lib  # pylint: disable=import-outside-toplevel
  from mlgo.env import work  # pylint: disable=import-outside-toplevel
  from mlgo.util.progress import Progress  # pylint: disable=import-outside-toplevel
  from mlgo.workers import make_pool  # pylint: disable=import-outside-toplevel
  policy = policy_io.load_policy(policy_dir)
  if flips_per_compile < 1:
    raise ValueError(f"flips_per_compile must be at least 1, not {flips_per_compile}")
  if flips_per_compile > 1 and credit_kind != "function_size":
    raise ValueError("several flips a compile (flips_per_compile > 1) are credited by "
                     "the function_size credit; pass credit_kind='function_size'")
  if flip_compiles < 0:
    raise ValueError(f"flip_compiles must be >= 0, not {flip_compiles}")
  if flip_compiles and flips_per_compile < 2:
    raise ValueError("flip_compiles packs several flips a compile: it needs "
                     "flips_per_compile > 1")
  if callee_groups < 0:
    raise ValueError(f"callee_groups must be >= 0, not {callee_groups}")
  if callee_groups and credit_kind != "function_size":
    raise ValueError("callee probes (callee_groups > 0) find each call's callee through "
                     "the function_size credit; pass credit_kind='function_size'")
  problem = problems_lib.get_problem(policy.problem)
  if callee_groups and not problem.name.startswith("inlining"):
    raise ValueError(f"callee probes are for inlining, not {policy.problem!r}")
  if problem.probe_alternative is None:
    raise ValueError(f"{policy_dir}: problem {policy.problem!r} has no rollout probes "
                     f"(no alternative action to try; mlgo.problems.base.Problem)")
  # llc problems compile the corpus' prepared (optimized-once) modules.
  corpus = work.corpus_for(corpus_dir, policy.problem, jobs=jobs or 2, stream=stream)
  store = ProbeStore(output, policy.input_names, policy_dir)
  annotator = None
  if credit_model or credit_kind == "function_size":
    from mlgo import credit  # pylint: disable=import-outside-toplevel
    annotator = credit.make_annotator(credit_kind, credit_model or "",
                                      problem)
  modules = work.select_modules(corpus, split)
  if not modules:
    raise ValueError(f"{corpus_dir}: no modules in split {split!r}")
  if max_modules and len(modules) > max_modules:
    rng = np.random.default_rng(seed)
    modules = [modules[i] for i in sorted(rng.choice(len(modules), max_modules, replace=False))]
  for why in getattr(corpus, "problems", []):
    print(f"rollout probes: unusable corpus entry skipped: {why}", file=stream)
  todo = [m for m in modules if m.name not in store.index["done"]]
  print(f"rollout probes: {len(todo)} of {len(modules)} modules to do "
        f"({len(modules) - len(todo)} already in {output})", file=stream)
  prog = Progress("probes", len(todo), stream=stream)
  greedy = GreedyFigure(default_sizes) if default_sizes else None
  if greedy:
    for name, v in store.index["done"].items():
      greedy.add(name, float(v["base_size"]))
  stats = {"modules": 0, "failed": 0, "unusable": len(getattr(corpus, "problems", [])),
           "probes": 0, "better": 0, "worse": 0, "same": 0, "mismatch": 0,
           "probe_failures": 0, "compiles": 0, "greedy_reused": 0}
  if callee_groups:
    stats.update(callee_compiles=0, callee_probes=0, callee_better=0, callee_change=0.0,
                 callee_superseded=0)
  cache_dir = (str(GreedyCache(greedy_cache, policy.spec, policy.arch.w, annotator).dir)
               if greedy_cache else None)
  groups = []   # (summed credits, measured module change, flips) of multi-flip compiles
  t0 = time.monotonic()
  with make_pool(pool, jobs) as p:
    for m in todo:
      p.submit(probe_module, m, policy.spec, policy.arch.w, max_probes, random_fraction,
               anchors, corpus.llvm_version, timeout, seed, annotator, flips_per_compile,
               flip_compiles, cache_dir, callee_groups)
    for r in p.results():
      name = r.item[0].name
      if not r.ok or "failed" in (r.value or {}):
        why = r.value["failed"] if r.ok else (r.error or "cancelled").strip().splitlines()[-1]
        store.mark_failed(name, why)
        stats["failed"] += 1
        prog.update(failed=1, node=r.node)
        continue
      rec = r.value
      d = rec["probe_sizes"] - rec["base_size"]
      ok = np.isfinite(d)
      stats["modules"] += 1
      stats["probes"] += int(ok.sum())
      stats["better"] += int((d[ok] < 0).sum())
      stats["worse"] += int((d[ok] > 0).sum())
      stats["same"] += int((d[ok] == 0).sum())
      stats["mismatch"] += int(rec["mismatch"].sum()) - rec["callee_superseded"]
      stats["probe_failures"] += len(rec["failures"])
      groups += rec["groups_measured"]
      stats["greedy_reused"] += int(rec["greedy_reused"])
      stats["compiles"] += (0 if rec["greedy_reused"] else 1) + (
          len(rec["groups_measured"]) if flips_per_compile > 1
          else int((rec["probe_group"] == 0).sum())) + rec["callee_compiles"]
      if callee_groups:
        stats["callee_compiles"] += rec["callee_compiles"]
        stats["callee_probes"] += int((rec["probe_group"] > 0).sum())   # gains only
        stats["callee_better"] += sum(1 for *_, d in rec["callees_measured"] if d < 0)
        stats["callee_change"] += sum(d for *_, d in rec["callees_measured"])
        stats["callee_superseded"] += rec["callee_superseded"]
      store.add(rec)
      if len(store.pending) >= 25:
        store.flush()
      el = time.monotonic() - t0
      extra = (f"{stats['probes']} probes ({stats['better']} better, "
               f"{stats['worse']} worse), {stats['compiles'] / max(el, 1e-9):.1f} compiles/s")
      if callee_groups:
        extra += (f", {stats['callee_better']} of {stats['callee_compiles']} callee flips "
                  f"gain ({stats['callee_change']:+.0f} bytes)")
      if greedy:
        greedy.add(name, float(rec["base_size"]))
        extra += f", {greedy.text()}"
      prog.update(extra=extra, node=r.node)
  store.flush()
  store.save()  # the failures, also when nothing was left to flush
  prog.close()
  stats["seconds"] = time.monotonic() - t0
  if annotator is not None and flips_per_compile == 1:
    stats.update(credit_agreement(store))
  if groups:
    stats.update(multi_flip.group_agreement(groups))
  if greedy and greedy.modules:
    stats.update(greedy_modules=greedy.modules, greedy_change_pct=greedy.change_pct(),
                 greedy_regressed=greedy.regressed)
  print("rollout probes: " + " ".join(f"{k}={v if isinstance(v, int) else round(v, 1)}"
                                      for k, v in stats.items()), file=stream)
  return stats
