"""Self-imitation: fine-tune a policy on the best compiles found around it. Per function
for problems scored per function (regalloc: collect, best of N compiles); per module by
a greedy search for problems scored per module (the size inliner: collect_search).

A guarded compile (mlgo.env.guarded) shows that, per function, the cheaper of two whole
allocations is reliably better than either; mixing the decisions of two allocations
inside one function is not (a consensus of seeds was +27% on held out). This trains a
policy on exactly such whole-function choices:

1. Compile each training module with the default (tracer labels), with the policy
   greedy, and with `samples` seeded samples of the policy.
2. Per function keep the one compile whose cost is lowest (ties go to the default, then
   to the greedy policy), and store that compile's decisions for that function.
3. Clone the stored decisions (bc.train_bc): the student learns the default's choice
   wherever no candidate beat it, and a candidate's whole allocation where one did.

A round can start from the last round's student (tools/self_imitate --rounds). Functions
are independent under the greedy allocator (one function's decisions never change
another's cost), so a dataset of per-function winners from different compiles is the
trajectory set of one allocation that exists: the guarded compile of all candidates.

Measured for eviction (docs/regalloc.md, "Best-of-N self-imitation"): a clone of such choices loses
on new code. With the default as a candidate it mixes the default's strategy and the
policy's inside functions (no input tells a decision which one its function got);
without it (default_candidate=False) it gains only on the packages it trained on. A tool
to measure with, not a recipe.
"""
import sys
import time
import zlib

import numpy as np

from mlgo.env import work
from mlgo.training import dataset, trace
from mlgo.util.progress import Progress
from mlgo.workers import make_pool
from mlgo.workers.base import in_submission_order

DEFAULT, GREEDY = "default", "greedy"


def candidate_names(samples: int) -> list:
  return [DEFAULT, GREEDY] + [f"sample{i + 1}" for i in range(samples)]


def choose_per_key(candidates: dict, missing_score, margin: float = 0.0) -> dict:
  """candidates: {name: {key: score}} in preference order (the default first). Returns
  {key: (winner, its score, the first candidate's score)} for every key any candidate
  scored.
  A non-default candidate wins a key only if its cost is below the default's by more
  than `margin` (relative, on cost + 1, the reward's own offset); among those, the
  lowest cost, the earlier candidate on ties. A key a candidate did not score has the
  problem's missing score (regalloc: 0, no spill code)."""
  names = list(candidates)
  keys = set()
  for sc in candidates.values():
    keys.update(sc)
  out = {}
  for k in sorted(keys):
    def score(n):
      s = candidates[n].get(k, missing_score)
      return np.inf if s is None else float(s)
    d = score(names[0])
    best, best_s = names[0], d
    for n in names[1:]:
      s = score(n)
      if s < best_s and (not np.isfinite(d) or (s + 1.0) < (d + 1.0) * (1.0 - margin)):
        best, best_s = n, s
    out[k] = (best, best_s, d)
  return out


def tempered_weights(weights: dict, temperature: float) -> dict:
  """A categorical policy's weights with its logits divided by `temperature` (the output
  layer and any additive prior scaled), so sampling them samples at that temperature:
  below 1 the samples stay nearer the greedy choice."""
  if temperature <= 0:
    raise ValueError(f"temperature must be > 0, not {temperature}")
  return {k: (np.asarray(v) / temperature if k.startswith("out/") or "prior" in k
              else v) for k, v in weights.items()}


def collect(corpus_dir, problem_name: str, policy_dir, output, samples: int = 3,
            jobs: int = 2, timeout: float = 300.0, seed: int = 0, split: str = "train",
            max_decisions_per_module: int = 0, margin: float = 0.0, modules=None,
            temperature: float = 1.0, default_candidate: bool = True,
            pool_kind: str | None = None, stream=sys.stderr) -> dict:
  """Writes the per-function winners' trajectories as a dataset in `output` (appendable:
  modules already there are skipped, so a killed run resumes). Module info keeps each
  candidate's total and the winners' counts. temperature: the samples' (1: the policy's
  own distribution). default_candidate=False: the default is compiled for the report
  only, and each function's winner is the greedy compile or a sample (the student keeps
  the policy's own strategy; ties go to the greedy compile)."""
  from mlgo import problems as problems_lib  # pylint: disable=import-outside-toplevel
  problem = problems_lib.get_problem(problem_name)
  if problem.key == "module":
    raise ValueError(f"{problem_name}: best-of-N self-imitation needs a problem scored per "
                     "function (its keys are modules, so candidates cannot be mixed)")
  policy = work.load_policy_for(policy_dir, problem_name)
  default_ref = "trace" if problem.tracer else "default"
  greedy_ref = (policy.spec, policy.arch.w, True)
  sample_ref = (policy.spec, tempered_weights(policy.arch.w, temperature), False)
  names = candidate_names(samples)
  corpus = work.corpus_for(corpus_dir, problem, jobs=jobs, stream=stream)
  mods = work.select_modules(corpus, split, modules)
  recipe = {"policy": str(policy_dir), "samples": samples, "seed": seed, "margin": margin,
            "max_decisions_per_module": max_decisions_per_module}
  if temperature != 1.0 or not default_candidate:   # older datasets' recipes stay valid
    recipe.update(temperature=temperature, default_candidate=default_candidate)
  writer, todo = _open_dataset(output, problem, corpus, mods, recipe)
  print(f"best-of-{len(names)} collection: {len(todo)} modules to compile "
        f"({len(mods) - len(todo)} already in {output}), {len(names)} compiles each "
        f"(default, greedy, {samples} samples), problem={problem_name}, jobs={jobs}",
        file=stream)
  progress = Progress("best-of", len(todo), stream=stream)
  stats = {"modules": 0, "failed": 0, "decisions": 0, "seconds": 0.0,
           "totals": {n: 0.0 for n in names + ["best"]}, "wins": {n: 0 for n in names}}
  t0 = time.monotonic()
  with make_pool(pool_kind, jobs) as pool:
    ids = []
    for m in todo:
      mseed = zlib.crc32(m.name.encode()) ^ (seed * 7919)
      ids.append(pool.submit(work.compile_one, m, problem_name, default_ref, None,
                             corpus.llvm_version, timeout))
      ids.append(pool.submit(work.compile_one, m, problem_name, greedy_ref, None,
                             corpus.llvm_version, timeout))
      for i in range(samples):
        ids.append(pool.submit(work.compile_one, m, problem_name, sample_ref,
                               [mseed & 0x7FFFFFFF, i], corpus.llvm_version, timeout))
    block = []
    for r in in_submission_order(pool.results(), ids):
      block.append(r)
      if len(block) < len(names):
        continue
      module = block[0].item[0]
      info = {"package": module.package, "language": module.language}
      bad = [(n, r) for n, r in zip(names, block) if not r.ok or not r.value[0].ok]
      block_results = {n: r.value[0] for n, r in zip(names, block) if r.ok and r.value[0].ok}
      block = []
      if DEFAULT not in block_results:   # bad[0] is then the default's compile
        n, r = bad[0]
        info.update(ok=False, reason=f"{n}: " + r.failure(r.value[0].reason if r.ok else ""))
        stats["failed"] += 1
        writer.add(module.name, [], info)
        progress.update(failed=1, node=r.node)
        continue
      chosen_trajs, info_extra = _choose_module(problem, module.name, names, block_results,
                                                margin, stats, default_candidate)
      info.update(ok=True, **info_extra,
                  failed_candidates=[n for n, _ in bad])
      sub_rng = np.random.default_rng([seed, zlib.crc32(module.name.encode())])
      kept = trace._subsample(chosen_trajs, max_decisions_per_module, sub_rng)  # pylint: disable=protected-access
      writer.add(module.name, kept, info)
      stats["modules"] += 1
      stats["decisions"] += sum(len(t.actions) for t in kept)
      tot = stats["totals"]
      change = (tot["best"] - tot[DEFAULT]) / tot[DEFAULT] * 100 if tot[DEFAULT] else 0.0
      gchange = (tot[GREEDY] - tot[DEFAULT]) / tot[DEFAULT] * 100 if tot[DEFAULT] else 0.0
      progress.update(extra=f"best-of {change:+.2f}% (greedy {gchange:+.2f}%) vs default")
  writer.close()
  progress.close()
  stats["seconds"] = time.monotonic() - t0
  tot = stats["totals"]
  summary = ", ".join(f"{n} {(tot[n] - tot[DEFAULT]) / tot[DEFAULT] * 100:+.2f}%"
                      for n in names[1:] + ["best"]) if tot[DEFAULT] else "no cost"
  print(f"best-of collection written to {output}: {stats['modules']} modules ok, "
        f"{stats['failed']} failed, {stats['decisions']} decisions kept; total cost vs the "
        f"default: {summary}; functions won: "
        + ", ".join(f"{n} {c}" for n, c in stats["wins"].items())
        + f"; {stats['seconds']:.0f}s", file=stream)
  return stats


def _open_dataset(output, problem, corpus, mods, recipe):
  """The dataset to append to (refusing one collected with another recipe) and the
  modules of `mods` it does not hold yet."""
  writer = dataset.DatasetWriter(output, problem.name, problem.features)
  old = writer.index.get("self_imitation")
  if old is not None and old != recipe:
    raise ValueError(f"{output}: collected with {old}, not {recipe} (give another output dir)")
  writer.index["self_imitation"] = recipe
  # The stored decisions are the ones to imitate: BC must not take the trajectories'
  # default_action (the inliner's channel sends the default's answer with every decision).
  writer.index["labels"] = "action"
  writer.index.setdefault("corpus", str(corpus.path))
  writer.index.setdefault("llvm_version", corpus.llvm_version)
  return writer, [m for m in mods if not writer.modules.get(m.name, {}).get("ok")]


def _choose_module(problem, module_name, names, results, margin, stats,
                   default_candidate: bool = True):
  """The winners' trajectories of one module and what to record about them."""
  present = [n for n in names if n in results]
  scores = {n: problem.scores(module_name, results[n].reward) for n in present}
  trajs = {n: {problem.trajectory_key(module_name, t): t for t in results[n].trajectories}
           for n in present}
  fallback = DEFAULT
  if not default_candidate:
    fallback = GREEDY if GREEDY in present else DEFAULT
    choosers = [n for n in present if n != DEFAULT] or [DEFAULT]
    choice = choose_per_key({n: scores[n] for n in choosers}, problem.missing_score, margin)
    # A key only the default scored (no spill code in any policy compile): cost 0 there.
    for k in set(scores.get(DEFAULT, {})) - set(choice):
      choice[k] = (fallback, problem.missing_score or 0.0, scores[DEFAULT][k])
  else:
    choice = choose_per_key(scores, problem.missing_score, margin)
  keys_with_decisions = set()
  for n in present:
    keys_with_decisions.update(trajs[n])
  chosen, wins, elsewhere = [], {n: 0 for n in names}, {}
  for k, (winner, _, _) in choice.items():
    if k in keys_with_decisions:
      wins[winner] += 1
    if winner != fallback:
      elsewhere[k] = winner
    t = trajs[winner].get(k)
    if t is not None:
      chosen.append(t)
  # A function with decisions but no cost in any compile (no spill code either way):
  # the fallback's decisions (the default's, or the greedy policy's without the default
  # as a candidate).
  for k in sorted(keys_with_decisions - set(choice)):
    t = trajs[fallback].get(k)
    if t is not None:
      chosen.append(t)
  totals = {n: float(sum(scores[n].values())) for n in present}
  best_total = float(sum(s for _, s, _ in choice.values()))
  for n in present:
    stats["totals"][n] += totals[n]
  for n in names:
    if n not in present:   # a failed candidate counts as the default's cost
      stats["totals"][n] += totals[DEFAULT]
  stats["totals"]["best"] += best_total
  for n, c in wins.items():
    stats["wins"][n] += c
  return chosen, {"totals": totals, "best_total": best_total,
                  "wins": {n: c for n, c in wins.items() if c},
                  "fallback": fallback, "won_elsewhere": elsewhere}


def collect_search(corpus_dir, problem_name: str, policy_dir, output, budget: int = 64,
                   jobs: int = 2, timeout: float = 300.0, seed: int = 0,
                   split: str = "train", sampling_rate: float = 1.0, anchors: bool = True,
                   modules=None, pool_kind: str | None = None, max_seconds: float | None = None,
                   floor_default: float | None = None, max_bytes: float | None = None,
                   stream=sys.stderr) -> dict:
  """The per-module form, for problems scored per module (the size inliner): per module
  the greedy search of mlgo.evaluation.headroom (from the policy's compile, flip one
  decision at a time, keep a flip when the module gets smaller; at most `budget`
  compiles). The searched compile is one coherent trajectory, the policy's own answers
  but for the kept flips, so nothing is mixed; its decisions are stored to imitate.
  anchors: modules the search did not shrink store the policy's own decisions too (the
  student keeps what it did there). `sampling_rate`: a seeded share of the split's
  modules. `max_seconds`: a module's search stops after that much wall time (a module
  whose compile takes minutes would hold a worker for hours). `max_bytes`: the same bound
  made deterministic, at most that many bytes of bitcode compiled a module (module size x
  compiles; headroom.search_module), so the collection does not depend on the machine's
  speed or load. floor_default=G: never
  imitate a compile more than the fraction G bigger than clang's (a search starts from
  clang's compile where the policy's is, headroom.search_module), and besides the
  sample, every module of the split that the policy makes more than G bigger than clang
  is searched (one policy compile of each module finds them, clang's sizes from
  evaluate's cache): the modules a size inliner's users notice first are the ones its
  clone has to see. Appendable and resumable like collect()."""
  import random  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import headroom  # pylint: disable=import-outside-toplevel
  ref = work.policy_ref(str(policy_dir))
  problem = headroom._problem_for(problem_name, policy_dir, ref)  # pylint: disable=protected-access
  if budget < 2:
    raise ValueError(f"search budget {budget}: at least 2 compiles (the start and a flip)")
  corpus = work.corpus_for(corpus_dir, problem, jobs=jobs, stream=stream)
  mods = work.select_modules(corpus, split, modules)
  split_mods = mods
  if sampling_rate < 1.0:
    rng = random.Random(seed)
    mods = [m for m in mods if rng.random() < sampling_rate]
  recipe = {"policy": str(policy_dir), "search": budget, "seed": seed, "anchors": anchors,
            "sampling_rate": sampling_rate}
  # Absent when unset: collections made before these options existed still resume.
  if max_seconds is not None:
    recipe["max_seconds"] = max_seconds
  if max_bytes is not None:
    if max_bytes <= 0:
      raise ValueError(f"max_bytes {max_bytes}: a positive number of bytes")
    recipe["max_bytes"] = max_bytes
  if floor_default is not None:
    if floor_default < 0:
      raise ValueError(f"floor_default {floor_default}: a growth fraction >= 0")
    recipe["floor_default"] = floor_default
  writer, todo = _open_dataset(output, problem, corpus, mods, recipe)
  t0 = time.monotonic()
  stats = {"modules": 0, "failed": 0, "improved": 0, "kept": 0, "compiles": 0,
           "decisions": 0, "start_size": 0.0, "size": 0.0, "seconds": 0.0,
           "stopped_by_time": 0, "stopped_by_bytes": 0, "from_default": 0, "grown_added": 0}
  with make_pool(pool_kind, jobs) as pool:
    if floor_default is not None:
      sampled = {m.name for m in mods}
      grown = _grown_modules(pool, problem, corpus, ref, timeout, stream, floor_default,
                             [m for m in split_mods if m.name not in sampled
                              and not writer.modules.get(m.name, {}).get("ok")])
      stats["grown_added"] = len(grown)
      todo += grown
    already = len(mods) - (len(todo) - stats["grown_added"])
    print(f"search collection: {len(todo)} modules to search ({already} already in {output}"
          + (f"; {stats['grown_added']} of them added for growing under the policy"
             if floor_default is not None else "")
          + f"), at most {budget} compiles each, problem={problem.name}, jobs={jobs}",
          file=stream)
    progress = Progress("search", len(todo), stream=stream)
    ids = [pool.submit(headroom.search_module, m, problem.name, ref, budget,
                       corpus.llvm_version, timeout, seed, True, max_seconds, floor_default,
                       max_bytes)
           for m in todo]
    for r in in_submission_order(pool.results(), ids):
      module = r.item[0]
      info = {"package": module.package, "language": module.language}
      res = dict(r.value) if r.ok else {"ok": False}
      if not res.get("ok"):
        info.update(ok=False, reason=r.failure(str(res.get("reason", ""))))
        stats["failed"] += 1
        writer.add(module.name, [], info)
        progress.update(failed=1, node=r.node)
        continue
      traj = res.pop("trajectory", None)
      res.pop("ok")
      improved = res["size"] < res["start_size"]
      info.update(ok=True, improved=improved, **res)
      writer.add(module.name, [traj] if traj is not None and (improved or anchors) else [],
                 info)
      stats["modules"] += 1
      stats["improved"] += int(improved)
      stats["stopped_by_time"] += int(res["stopped"] == "time")
      stats["stopped_by_bytes"] += int(res["stopped"] == "bytes")
      stats["from_default"] += int(res.get("start") == "default")
      for k in ("kept", "compiles", "start_size", "size"):
        stats[k] += res[k]
      stats["decisions"] += res["decisions"] if (improved or anchors) else 0
      change = (stats["size"] / stats["start_size"] - 1) * 100 if stats["start_size"] else 0.0
      progress.update(extra=f"searched {change:+.2f}% vs the policy, {stats['kept']} flips kept",
                      node=r.node)
  writer.close()
  progress.close()
  stats["seconds"] = time.monotonic() - t0
  change = (stats["size"] / stats["start_size"] - 1) * 100 if stats["start_size"] else 0.0
  print(f"search collection written to {output}: {stats['modules']} modules ok "
        f"({stats['improved']} smaller), {stats['failed']} failed, {stats['kept']} flips "
        f"kept in {stats['compiles']} compiles ({stats['stopped_by_time']} searches stopped "
        f"by --search_seconds, {stats['stopped_by_bytes']} by --search_bytes); "
        f"searched {change:+.2f}% against the policy's "
        f"own compiles" + (f"; {stats['from_default']} searches started from clang's smaller "
                           f"compile, {stats['grown_added']} modules added for growing"
                           if floor_default is not None else "")
        + f"; {stats['seconds']:.0f}s",
        file=stream)
  return stats


def _grown_modules(pool, problem, corpus, ref, timeout, stream, growth: float,
                   modules) -> list:
  """The modules of `modules` whose policy compile is more than the fraction `growth`
  bigger than clang's (clang's sizes from evaluate's cache where it has them). A module
  that fails to compile either way is not added (the search would only fail on it
  again)."""
  from mlgo.evaluation import headroom  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation.evaluate import DefaultCache, cache_key, compile_pair  # pylint: disable=import-outside-toplevel
  if not modules:
    return []
  cache = DefaultCache.for_problem(problem)
  progress = Progress("search: modules the policy grows", len(modules), stream=stream)
  ids = [pool.submit(compile_pair, m, problem.name, ref, corpus.llvm_version, timeout,
                     cache.get(cache_key(m, problem.name, corpus.llvm_version)))
         for m in modules]
  grown = []
  for r in in_submission_order(pool.results(), ids):
    module = r.item[0]
    d, p = r.value if r.ok else ({"ok": False}, {"ok": False})
    if d["ok"]:
      cache.put(cache_key(module, problem.name, corpus.llvm_version), d)
    ok = d["ok"] and p["ok"]
    if ok and headroom.grows_past(sum(p["scores"].values()), sum(d["scores"].values()),
                                  growth):
      grown.append(module)
    progress.update(failed=int(not ok), node=r.node,
                    extra=f"{len(grown)} grown")
  progress.close()
  cache.save()
  return grown
