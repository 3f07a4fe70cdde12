"""Guarded compiles: the better of the default and a policy, function by function.

A learned register allocator is chaotic per function: a few different evictions in one
hot loop can make that function several times costlier than the default (or cheaper),
and which functions blow up changes from run to run and from package to package. A
guarded compile takes that risk away where the reward can be computed at compile time,
as the allocator's own spill/reload/copy cost can:

  1. the default compile (no channel; its per-function scores may come from a cache,
     e.g. a prepared corpus' baseline or the evaluator's default cache);
  2. the policy compile;
  3. if the policy made some functions cheaper and others costlier, one more compile
     with the tracer plugin's -regalloc-trace-policy-functions=FILE naming the cheaper
     ones: they get the policy's decisions, every other function the default's.
Greedy allocation of one function does not depend on another's, so compile 3 has, per
function, exactly the lower of the two costs; the result checks that and counts any
function where it does not hold (`mismatches`: none is expected).

Several allocations (candidates): the policy and more policies (another policy's
greedy allocation, sampled allocations of the policy: env.policies.PerFunctionSample) are
each compiled once; per function the lowest score among the default's and theirs wins
(ties to the default, then to the earlier one), and the one more compile routes every
function to its winner (env.policies.FunctionRouter on the channel). A search at compile
time: 2 + len(candidates) + 1 compiles, judged by the same static cost.

no_more_spill_code: a candidate may win a function only if its spill code counted
without block frequencies is not larger than the default's. The remarks cost weighs
spill code by LLVM's estimated block frequencies, and those are wrong in places (a loop
called cold that runs hot); most static gains move spill code into blocks called cold.
Two counts: "function" (True), the reward's "spill_code" of the whole function, so only
wins that add no spill code anywhere are kept; "loops", the spill code inside loops at
every nesting depth (mlgo.profiles.loops, read from each allocation's object), so spill
code may move out of loops or within the function's straight-line code, but a win that
puts more spill code into some loop nest (betting on which of the loop's blocks run) is
not kept. Neither made the static guard safe for run time (docs/regalloc.md; for "loops" the
largest measured gains have more spill code in loops: SELECTION_RULES.md, stop 61).
A third rule, "perf", asks a second judge instead of a count: a side may win a function
only if the learned performance model (mlgo.problems.regalloc.perf_reward: estimated
cycles per call from each block's machine code, weighted by llc's block frequencies)
does not call it costlier than the default's. The two judges weigh different things (the
remarks: spill code at fixed weights; the model: every instruction of the block at the
cost profiled programs measured), so a win both agree on is less likely to be one
judge's error. Every judged compile then also writes llc's basic-block address map.
A fourth, "robust", keeps the frequencies but not their trust: a side may win a
function only if its spill code weighted by llc's block frequencies (read from the
object, mlgo.profiles.loops.spill_cost_by_depth) is no larger than the default's however
the estimated trip counts are wrong, by up to ROBUST_FACTOR either way at each loop
level (worst_case_costs). Spill code moved from an inner loop to its outer one then wins
only if the inner loop would still pay for it at a quarter of its estimated trips.
Measured, not safe either: zopfli's inner loop runs more than 4x less often than the
estimate says (SELECTION_RULES.md, stop 67).
A fifth, "trades", forbids only the bet on a ratio of trip counts: a side may not win
a function if it has more spill code than the default's at some loop depth and less at
a deeper one (counts without frequencies, at exact depths, from the objects); spill code
added or removed at every depth, or added only deeper, is left to the remarks cost.

Release use: with policy=None the policy compile is llc's own release advisor (e.g.
`tool_path` = the release prefix's llc with its compiled-in model, `policy_flags` =
["-regalloc-enable-advisor=release"]); no channel and no Python policy. The plugin wraps
that advisor the same way, so the three compiles need nothing else.

Per-module problems (inlining for size): one function's inlining changes its callers
and callees, so the guard is per module: the default compile and the policy compile,
and the object with the smaller score (.text) is kept. Never bigger than clang's own
object, by construction and by the very measure the policy is trained on.

Cost: two or three compiles instead of one. Not a learned result: the figures of a
guarded compile are reported apart from the policy's own.
"""
import dataclasses
import os
import shutil
import tempfile

from mlgo.env import core, tracer as tracer_lib
from mlgo.env.policies import CompilerDefault, FunctionRouter
from mlgo.profiles import loops as loops_lib
from mlgo.problems import get_problem, regalloc as regalloc_problems
from mlgo.util.cli import SPILL_CODE_RULES

POLICY_FUNCTIONS_OPTION = "-regalloc-trace-policy-functions"
# Scores are sums of block frequencies times weights; the same allocation gives the
# same sum, so anything above float noise is a real difference.
_TOLERANCE = 1e-6


@dataclasses.dataclass
class GuardedResult:
  result: core.CompileResult        # the compile whose object is the guarded one
  scores: dict                      # function ("" for a module) -> score of that object
  default_scores: dict
  policy_scores: dict               # the unguarded policy compile's
  policy_functions: list            # functions that kept the policy's decisions ([""]:
                                    # the module, for per-module problems)
  compiles: int                     # llc runs made here (the default's not counted if cached)
  mismatches: list                  # functions whose guarded score is not the lower one
  policy_result: core.CompileResult | None = None   # the unguarded policy compile, if run:
                                    # an evaluation reports it beside the guarded one
  candidate_scores: list = dataclasses.field(default_factory=list)  # each candidate's
  route: dict = dataclasses.field(default_factory=dict)   # function -> winner (0: the
                                    # policy, k: candidates[k - 1]); empty: no candidates
  object_from: str = "routed"       # the object is "default"'s, "policy"'s or the routed
                                    # compile's (replay_guarded makes it again)

  def record(self) -> dict:
    """What replay_guarded needs to make this allocation again (JSON-safe)."""
    return {"object_from": self.object_from, "policy_functions": list(self.policy_functions),
            "route": dict(self.route)}

  @property
  def ok(self) -> bool:
    return bool(self.result.ok)


def check_problem(problem):
  """Per-function guards need llc and the tracer plugin; per-module ones need nothing."""
  problem = get_problem(problem)
  if problem.key == "module":
    return problem
  if problem.key != "function" or problem.tracer is None or problem.tool != "llc":
    raise ValueError(f"{problem.name}: guarded compiles need per-module scores, or an llc "
                     f"problem with per-function scores and a tracer plugin (regalloc)")
  return problem


def release_advisor(problem, llc) -> dict:
  """guarded_compile's keywords for a policy compiled into `llc` (policy=None): that llc,
  with the problem's release advisor enabled."""
  return {"tool_path": str(llc), "policy_flags": list(get_problem(problem).enable_options)}


def candidate_policies(policy, candidate_dirs=(), samples: int = 0, problem=None) -> list:
  """The more allocations a guard chooses among: the greedy policy of each dir in
  candidate_dirs, then `samples` sampled allocations of `policy` (a policy_io.Policy;
  seeds 1..N, each function sampled with its own seed, so that a routed compile gives a
  function the allocation its own compile gave it). problem: each dir's policy must make
  its decisions (a ValueError naming the dir otherwise)."""
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  from mlgo.env.policies import PerFunctionSample  # pylint: disable=import-outside-toplevel
  from mlgo.problems import same_decisions  # pylint: disable=import-outside-toplevel
  out = []
  for d in candidate_dirs:
    p = policy_io.load_policy(d)
    if problem is not None and not same_decisions(p.problem, problem):
      raise ValueError(f"{d}: policy is for {p.problem}, not {get_problem(problem).name}")
    out.append(p)
  if samples < 0:
    raise ValueError(f"samples must be >= 0, not {samples}")
  out += [PerFunctionSample(policy_io.Policy(policy.spec, policy.arch.w, greedy=False),
                            seed=k) for k in range(1, samples + 1)]
  return out


# The rules that read each allocation's object.
_OBJECT_RULES = ("loops", "perf", "robust", "trades")
# "robust": how far off LLVM's estimated trip counts may be, per loop level, for a win
# to count (mlgo.profiles.loops.worst_case_costs).
ROBUST_FACTOR = 4.0


def spill_code_rule(value):
  """no_more_spill_code's value as a rule name: None, "function" (True), or one of
  SPILL_CODE_RULES."""
  if value in (None, False):
    return None
  if value is True:
    return "function"
  if value not in SPILL_CODE_RULES:
    raise ValueError(f"no_more_spill_code: {value!r} is not one of "
                     f"{', '.join(SPILL_CODE_RULES)}")
  return value


def _grows(side, default) -> bool:
  """Whether a side's spill-code count is above the default's: numbers, or dicts of
  counts (any entry above; an entry one side lacks is 0)."""
  if isinstance(side, dict) or isinstance(default, dict):
    side, default = side or {}, default or {}
    return any(_grows(v, default.get(k, 0.0)) for k, v in side.items())
  return side > default + _TOLERANCE * max(1.0, default)


def _exact_depths(cumulative) -> list:
  """Spill code at loop depth exactly 1, 2, ... from spill_code_in_loops' counts at
  depth >= D."""
  deepest = max([int(k.rsplit("_", 1)[1]) for k in cumulative] or [0])
  at_least = [cumulative.get(f"loop_depth_{d}", 0) for d in range(1, deepest + 2)]
  return [at_least[i] - at_least[i + 1] for i in range(deepest)]


def _trades(side, default) -> bool:
  """Whether a side (spill_code_in_loops' dict for one function) has more spill code
  than the default's at some loop depth and less at a deeper one: a win that rests on
  the estimated ratio of the two loops' trip counts."""
  a, b = _exact_depths(side or {}), _exact_depths(default or {})
  n = max(len(a), len(b))
  a, b = a + [0] * (n - len(a)), b + [0] * (n - len(b))
  return any(a[i] > b[i] and any(a[j] < b[j] for j in range(i + 1, n)) for i in range(n))


def lowest_scores(default_scores: dict, scores: list, missing: float = 0.0,
                  counts=None, vetoed=None) -> dict:
  """{function: index into `scores` of the lowest}, for the functions where one of them
  is strictly below the default's (ties to the default, then to the earlier one).
  counts: (the default's, [one per score dict]) spill-code counts per function (a number,
  or a dict of counts); a side whose count for a function is above the default's (any
  entry, for dicts) cannot win it; vetoed(side's count, default's count): another test
  in place of "above" (the "trades" rule's)."""
  vetoed = vetoed or _grows
  route = {}
  for f in set(default_scores).union(*scores):
    best = default_scores.get(f, missing)
    for k, sc in enumerate(scores):
      p = sc.get(f, missing)
      if counts is not None and vetoed(counts[1][k].get(f, 0.0), counts[0].get(f, 0.0)):
        continue
      if p < best - _TOLERANCE * max(1.0, abs(p)):
        route[f], best = k, p
  return route


class _UnreadableObject(Exception):
  """An allocation's object whose loops cannot be read: that compile failed."""


def _spill_code(problem, rule, result, obj) -> dict:
  """Per function, what `rule` compares with the default's: spill-code counts (by loop
  depth for "loops" and "trades"), the frequency-weighted spill code at each corner of
  the trip-count errors for "robust", or estimated cycles per call for "perf"."""
  if rule in ("loops", "trades"):
    try:
      return loops_lib.spill_code_in_loops(obj)
    except (OSError, ValueError) as e:
      raise _UnreadableObject(f"cannot read the loops of the object: {e}") from e
  if rule == "robust":
    try:
      by_depth = loops_lib.spill_cost_by_depth(obj)
    except (OSError, ValueError) as e:
      raise _UnreadableObject(f"cannot read the loops and frequencies of the object: "
                              f"{e}") from e
    return {fn: dict(enumerate(loops_lib.worst_case_costs(c, ROBUST_FACTOR)))
            for fn, c in by_depth.items()}
  if rule == "perf":
    try:
      return regalloc_problems.perf_reward({"object": obj})["functions"]
    except (OSError, ValueError) as e:
      raise _UnreadableObject(f"cannot score the object with the performance model: "
                              f"{e}") from e
  counts = result.reward.get("spill_code") if isinstance(result.reward, dict) else None
  if counts is None:
    raise ValueError(f"{problem.name}: its reward has no frequency-free spill-code count "
                     f"(no_more_spill_code needs the remarks reward)")
  return counts


def guarded_compile(module, problem, policy, *, default_scores: dict | None = None,
                    llvm_version: int = 22, timeout: float = core.DEFAULT_TIMEOUT,
                    output_path=None, tool_path=None, policy_flags=(),
                    policy_functions=None, candidates=(),
                    no_more_spill_code=False) -> GuardedResult:
  """Compiles `module` guarded (module docstring). default_scores: the default's
  scores if known, as the problem's score_fn gives them (skips compile 1). policy None:
  the policy is whatever `policy_flags` enable in the compiler (tool_path: another llc,
  e.g. a release prefix's). policy_functions (per-function problems): the functions
  that keep the policy's decisions, chosen elsewhere (e.g. by measured run time:
  evaluation.measured_guard) instead of by the lower score; every other function of
  the module gets the default's, and `mismatches` then lists functions whose score is
  not the chosen side's. candidates (per-function problems): more policies to choose
  from per function (module docstring); a failed candidate compile fails the guarded
  compile. no_more_spill_code: the module docstring's rule, False, True ("function"),
  "loops" or "perf" (the default is then compiled here even if default_scores are given,
  for its counts; "perf" needs the cost model, a ValueError otherwise). Never raises for
  compile failures: a failed compile is the result (result.ok False, reason set)."""
  if policy is None and not policy_flags:
    raise ValueError("guarded_compile: no policy and no policy_flags")
  if policy is None:
    policy = CompilerDefault()   # no channel: the compiler's release advisor decides
  policy_flags = list(policy_flags)
  problem = check_problem(problem)
  candidates = list(candidates)
  if candidates and (problem.key == "module" or policy_functions is not None
                     or policy_flags or tool_path):
    raise ValueError("guarded_compile: candidates go with a per-function problem, a "
                     "Python policy and no explicit policy_functions")
  rule = spill_code_rule(no_more_spill_code)
  vetoed = _trades if rule == "trades" else _grows
  if rule and (problem.key == "module" or policy_functions is not None):
    raise ValueError("guarded_compile: no_more_spill_code goes with a per-function "
                     "problem and no explicit policy_functions")
  if rule:
    default_scores = None          # compiled here: its spill-code counts are needed
  judge_flags = []
  if rule == "perf":
    regalloc_problems.load_perf_model()   # a missing model stops here, not per module
  if rule in ("perf", "robust"):
    # The flags the performance-model reward itself compiles with (the block address map).
    judge_flags = list(regalloc_problems.PERF_REWARD["reward_flags"])
  if problem.key == "module":
    return _guarded_module(module, problem, policy, default_scores, llvm_version, timeout,
                           output_path, tool_path, policy_flags)
  missing = problem.missing_score if problem.missing_score is not None else 0.0
  with tempfile.TemporaryDirectory(prefix="mlgo-guard-") as tmp:
    # The "loops" and "perf" rules read every allocation's object.
    keep = rule in _OBJECT_RULES
    objs = {k: os.path.join(tmp, k + ".o") if output_path or keep else None
            for k in ("default", "policy", "guarded")}
    cand_objs = [os.path.join(tmp, f"candidate{i}.o") if keep else None
                 for i in range(len(candidates))]
    compiles = 0
    default_result = None
    if default_scores is None:
      default_result = core.compile_module(module, problem, CompilerDefault(),
                                           llvm_version=llvm_version, timeout=timeout,
                                           output_path=objs["default"], tool_path=tool_path,
                                           extra_flags=judge_flags)
      compiles += 1
      if not default_result.ok:
        return GuardedResult(default_result, {}, {}, {}, [], compiles, [])
      default_scores = dict(problem.score_fn(default_result.reward))
    pol = core.compile_module(module, problem, policy, llvm_version=llvm_version,
                              timeout=timeout, output_path=objs["policy"],
                              tool_path=tool_path, extra_flags=policy_flags + judge_flags)
    compiles += 1
    if not pol.ok:
      return GuardedResult(pol, {}, default_scores, {}, [], compiles, [], pol)
    policy_scores = dict(problem.score_fn(pol.reward))
    keys = set(default_scores) | set(policy_scores)
    candidate_scores, route, counts = [], {}, None
    try:
      if rule:
        counts = (_spill_code(problem, rule, default_result, objs["default"]),
                  [_spill_code(problem, rule, pol, objs["policy"])])
    except _UnreadableObject as e:
      return GuardedResult(dataclasses.replace(pol, ok=False, reason=str(e)), {},
                           default_scores, policy_scores, [], compiles, [], pol)
    for cand, cand_obj in zip(candidates, cand_objs):
      c = core.compile_module(module, problem, cand, llvm_version=llvm_version,
                              timeout=timeout, output_path=cand_obj, extra_flags=judge_flags)
      compiles += 1
      if not c.ok:
        return GuardedResult(c, {}, default_scores, policy_scores, [], compiles, [], pol)
      candidate_scores.append(dict(problem.score_fn(c.reward)))
      keys |= set(candidate_scores[-1])
      if counts is not None:
        try:
          counts[1].append(_spill_code(problem, rule, c, cand_obj))
        except _UnreadableObject as e:
          return GuardedResult(dataclasses.replace(c, ok=False, reason=str(e)), {},
                               default_scores, policy_scores, [], compiles, [], pol)
    if policy_functions is None:
      route = lowest_scores(default_scores, [policy_scores] + candidate_scores, missing,
                            counts, vetoed)
      chosen = sorted(route)
      lower = {f: ([policy_scores] + candidate_scores)[route[f]].get(f, missing)
                  if f in route else default_scores.get(f, missing) for f in keys}
      policy_is_best = (not any(route.values()) and
                        all(policy_scores.get(f, missing) <= lower[f] for f in keys) and
                        (counts is None or not any(vetoed(counts[1][0].get(f, 0.0),
                                                     counts[0].get(f, 0.0)) for f in keys)))
      if any(route.values()):
        policy = FunctionRouter([policy] + candidates, route)
    else:   # the expected score per function is the chosen side's
      chosen = sorted(f for f in keys if f in policy_functions)
      lower = {f: (policy_scores if f in policy_functions else default_scores
                   ).get(f, missing) for f in keys}
      # Equal scores do not mean equal code: every function not chosen must be the
      # default's, so the selected compile is always made (unless nothing is chosen).
      policy_is_best = False
    if policy_is_best:            # the policy compile is already the best of both
      final, scores, obj, object_from = pol, policy_scores, objs["policy"], "policy"
    elif not chosen and default_result is not None:
      final, scores, obj = default_result, default_scores, objs["default"]
      object_from = "default"
    else:
      # One more compile (with an empty list when the default came from a cache and
      # the policy kept nothing: the object must still be the default's).
      final = _routed_compile(module, problem, policy, chosen, tmp, llvm_version, timeout,
                              objs["guarded"], tool_path, policy_flags)
      compiles += 1
      if not final.ok:
        return GuardedResult(final, {}, default_scores, policy_scores, chosen, compiles, [],
                             pol, candidate_scores, route)
      scores, obj, object_from = dict(problem.score_fn(final.reward)), objs["guarded"], "routed"
    if output_path:
      shutil.copyfile(obj, output_path)
  mismatches = sorted(f for f in set(scores) | keys
                      if abs(scores.get(f, missing) - lower.get(f, missing))
                      > _TOLERANCE * max(1.0, abs(lower.get(f, missing))))
  return GuardedResult(final, scores, default_scores, policy_scores, chosen, compiles,
                       mismatches, pol, candidate_scores, route, object_from)


def _routed_compile(module, problem, policy, chosen, tmp, llvm_version, timeout, output_path,
                    tool_path=None, policy_flags=()):
  """The compile in which exactly the functions in `chosen` keep `policy`'s decisions
  (the tracer plugin's policy-functions list, written into tmp) and every other function
  gets the default's."""
  listing = os.path.join(tmp, "policy_functions.txt")
  with open(listing, "w", encoding="utf-8") as f:
    f.write("".join(fn + "\n" for fn in chosen))
  flags = [f"-load={tracer_lib.plugin_path(llvm_version)}",
           f"{POLICY_FUNCTIONS_OPTION}={listing}"]
  return core.compile_module(module, problem, policy, llvm_version=llvm_version,
                             timeout=timeout, extra_flags=flags + list(policy_flags),
                             output_path=output_path, tool_path=tool_path)


def replay_guarded(module, problem, policy, record: dict, *, candidates=(),
                   llvm_version: int = 22, timeout: float = core.DEFAULT_TIMEOUT,
                   output_path=None) -> core.CompileResult:
  """One compile that makes again the allocation a guarded compile chose
  (GuardedResult.record(): the default's, the policy's, or the routed one with the same
  functions and winners), for a module that may differ in flags that act after register
  allocation (e.g. block alignment: runtime_check's code layouts). `policy` and
  `candidates` must be the guarded compile's own. One llc run instead of 2 + candidates."""
  problem = check_problem(problem)
  kind = record.get("object_from")
  if kind in ("default", "policy"):
    return core.compile_module(module, problem,
                               CompilerDefault() if kind == "default" else policy,
                               llvm_version=llvm_version, timeout=timeout,
                               output_path=output_path)
  if kind != "routed":
    raise ValueError(f"replay_guarded: object_from {kind!r} is not default, policy or routed")
  route = {f: int(k) for f, k in record.get("route", {}).items()}
  if any(route.values()):
    policy = FunctionRouter([policy] + list(candidates), route)
  with tempfile.TemporaryDirectory(prefix="mlgo-replay-") as tmp:
    return _routed_compile(module, problem, policy, record.get("policy_functions", []), tmp,
                           llvm_version, timeout, output_path)


def _guarded_module(module, problem, policy, default_scores, llvm_version, timeout,
                    output_path, tool_path, policy_flags) -> GuardedResult:
  """The per-module guard: the policy's object unless it is bigger than the default's."""
  def run(pol, flags):
    r = core.compile_module(module, problem, pol, llvm_version=llvm_version, timeout=timeout,
                            output_path=output_path, tool_path=tool_path, extra_flags=flags)
    return r, (dict(problem.score_fn(r.reward)) if r.ok else {})
  compiles = 0
  dres = None
  if default_scores is None:
    dres, default_scores = run(CompilerDefault(), [])
    compiles += 1
    if not dres.ok:
      return GuardedResult(dres, {}, {}, {}, [], compiles, [])
  pres, policy_scores = run(policy, policy_flags)
  compiles += 1
  if not pres.ok:
    return GuardedResult(pres, {}, default_scores, {}, [], compiles, [], pres)
  if sum(policy_scores.values()) <= sum(default_scores.values()):   # ties: no recompile
    return GuardedResult(pres, policy_scores, default_scores, policy_scores, [""], compiles,
                         [], pres)
  # The default wins. Its object is the guarded one: compiled (again) when an object is
  # asked for (the policy compile overwrote output_path) or its result came from a cache.
  if dres is None or output_path:
    dres, scores = run(CompilerDefault(), [])
    compiles += 1
    if not dres.ok:
      return GuardedResult(dres, {}, default_scores, policy_scores, [], compiles, [], pres)
  else:
    scores = default_scores
  mismatches = [] if scores == default_scores else [""]
  return GuardedResult(dres, scores, default_scores, policy_scores, [], compiles, mismatches,
                       pres)
