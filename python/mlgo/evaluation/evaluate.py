"""Compile a corpus split with a policy and with the default heuristic; compare.

Per key (module for inlining, function for regalloc) we record the default score and
the policy score (lower is better: .text bytes, or weighted regalloc cost).

Regression: a key whose policy score is more than 1% above its default score
(policy > 1.01 * default). Keys where either compile failed are listed in the CSV with
their status and left out of the totals (counted as failed).

Outputs in --output (written by mlgo.evaluation.report): per_key.csv (per module / per
function), summary.json, changes.png (sorted per-key changes), regressed_modules.csv,
and console tables per package and per language; the last printed line is the summary:
  inlining: modules=N default_text=B policy_text=B change=+-X.XX% regressions=K
  regalloc: modules=N functions=F default_cost=C policy_cost=C change=+-X.XX% regressions=K
"""
import hashlib
import json
import os
import pathlib
import sys
import time

from mlgo import problems as problems_lib
from mlgo.env import work
from mlgo.env.guarded import spill_code_rule
from mlgo.evaluation.report import Tally, write_report
from mlgo.util.progress import Progress
from mlgo.workers import make_pool
from mlgo.workers.base import in_submission_order


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
                 guarded: bool = False, candidates=(), no_more_spill_code=None):
  """Work item: default compile and policy compile of one module -> small summaries.
  guarded: the policy side is a guarded compile (mlgo.env.guarded: per function the
  better of the default and the policy, or the best of those and `candidates`, more
  policy objects; no_more_spill_code: the guard's rule of that name) and also reports
  how it was made."""
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
    pol = work.make_policy(ref)
    p = run(pol)
    p["deferred"] = int(getattr(pol, "deferred", 0))   # decisions left to the compiler
    p["deferred_by"] = dict(getattr(pol, "deferred_by", {}))
    return d, p
  from mlgo.env import guarded as guarded_lib  # pylint: disable=import-outside-toplevel
  t0 = time.monotonic()
  prefix = module.name + "::"
  # Scores here are keyed "module::function" (or the module's name); the guard's are the
  # problem's score_fn keys (the function, or "" for the module).
  pol = work.make_policy(ref)
  g = guarded_lib.guarded_compile(
      module, problem, pol, llvm_version=llvm_version, timeout=timeout,
      default_scores={("" if k == module.name else k[len(prefix):]): v
                      for k, v in d["scores"].items()} if d["ok"] else None,
      candidates=candidates, no_more_spill_code=no_more_spill_code)
  p = summary(g.result, t0)
  if g.ok:
    p["scores"] = {(module.name if f == "" else prefix + f): float(v)
                   for f, v in g.scores.items()}
  p.update(guard_compiles=g.compiles, guard_policy_functions=len(g.policy_functions),
           guard_mismatches=g.mismatches,
           guard_per_candidate=[sum(1 for k in g.route.values() if k == i)
                                for i in range(1 + len(candidates))] if candidates else [])
  # Decisions left to the compiler: all from the one policy compile (only inlining
  # policies defer, and the per-module guard compiles the policy once); they count for
  # the guarded result only where it kept that compile.
  deferred = int(getattr(pol, "deferred", 0))
  deferred_by = dict(getattr(pol, "deferred_by", {}))
  kept = g.result is g.policy_result
  p["deferred"], p["deferred_by"] = (deferred, deferred_by) if kept else (0, {})
  # The unguarded policy compile the guard made anyway: the plain evaluation, for free
  # (its seconds are the whole guarded compile's).
  if g.policy_result is not None:
    p["plain"] = summary(g.policy_result, t0)
    p["plain"]["seconds"] = p["seconds"]
    p["plain"]["deferred"], p["plain"]["deferred_by"] = deferred, deferred_by
  return d, p

def evaluate(problem_name: str, corpus_dir, policy, output, split: str = "heldout",
             jobs: int = 2, timeout: float = 300.0, pool_kind: str | None = None,
             stream=None, use_cache: bool = True, guarded: bool = False,
             plain_output=None, plain_stream=None, candidates=(), samples: int = 0,
             no_more_spill_code=None, modules=None) -> dict:
  """corpus_dir: a corpus, or a prepared corpus (llc problems prepare one if given a
  corpus). modules (names): only these modules of the split, each of which must be in it.
  guarded: score guarded compiles of the policy (mlgo.env.guarded) instead of
  the policy's own; with plain_output, the policy's own compiles (which a guarded
  compile makes anyway) are also evaluated, into that directory, printed to
  plain_stream, and their summary is returned under "plain". candidates (policy dirs)
  and samples (sampled allocations of the policy): more allocations for the guard to
  choose from per function (mlgo.env.guarded); no_more_spill_code: the guard's rule of
  that name. Returns the summary (also written to OUTPUT/summary.json)."""
  stream = stream or sys.stdout
  problem = problems_lib.get_problem(problem_name)
  if guarded:
    from mlgo.env import guarded as guarded_lib  # pylint: disable=import-outside-toplevel
    guarded_lib.check_problem(problem)
    if policy == "default":
      raise ValueError("a guarded evaluation needs a policy, not 'default'")
  elif plain_output is not None or candidates or samples or no_more_spill_code:
    raise ValueError("plain_output, candidates, samples and no_more_spill_code go with "
                     "guarded=True")
  corpus = work.corpus_for(corpus_dir, problem, jobs=jobs, stream=sys.stderr)
  wanted = None if modules is None else set(modules)
  if split == "all":
    modules = list(corpus.modules)
  else:
    modules = corpus.split(split)
  if wanted is not None:
    missing = sorted(wanted - {m.name for m in modules})
    if missing:
      raise ValueError(f"{corpus_dir}: {len(missing)} module(s) asked for are not in split "
                       f"{split!r}, e.g. {missing[0]!r}")
    modules = [m for m in modules if m.name in wanted]
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
  cands = []
  if candidates or samples:
    from mlgo.env.guarded import candidate_policies  # pylint: disable=import-outside-toplevel
    from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
    cands = candidate_policies(policy_io.load_policy(policy), candidates, samples,
                               problem_name)
  out = pathlib.Path(output)
  out.mkdir(parents=True, exist_ok=True)
  print(f"evaluating {policy_name} on {len(modules)} {split} modules of {corpus.path} "
        f"({problem_name}, LLVM {corpus.llvm_version})", file=sys.stderr)
  progress = Progress("evaluate", len(modules), stream=sys.stderr)
  main, plain = Tally(), (Tally() if plain_output is not None else None)
  guard = {"compiles": 0, "policy_functions": 0, "mismatches": [],
           "candidates": [str(c) for c in candidates], "samples": int(samples),
           "no_more_spill_code": spill_code_rule(no_more_spill_code),
           "per_candidate": [0] * (1 + len(cands)) if cands else []}
  cache = DefaultCache.for_problem(problem)
  with make_pool(pool_kind, jobs) as pool:
    ids = []
    for m in modules:
      key = cache_key(m, problem_name, corpus.llvm_version)
      cached = cache.get(key) if use_cache else None
      ids.append(pool.submit(compile_pair, m, problem_name, ref, corpus.llvm_version,
                             timeout, cached, guarded, cands, no_more_spill_code))
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
        for i, n in enumerate(p["guard_per_candidate"]):
          guard["per_candidate"][i] += n
      progress.update(node=r.node)
  progress.close()
  if use_cache:
    cache.save()
  summary = write_report(main, problem_name, policy_name, corpus, split, out, stream,
                    guard if guarded else None)
  if plain is not None:
    plain_name = policy_name.removesuffix(" (guarded)")
    summary["plain"] = write_report(plain, problem_name, plain_name, corpus, split,
                               pathlib.Path(plain_output), plain_stream or stream, None)
  return summary
