"""Register allocation problems for llc's greedy allocator: eviction and priority.

Input: middle-end-optimized bitcode (e.g. `clang -O2 -emit-llvm -c`, or a corpus module
run through clang's optimization pipeline) compiled by llc with optional llc flags.

regalloc_eviction: `-regalloc-enable-advisor=release
-regalloc-evict-interactive-channel-base=BASE`. When the allocator considers evicting,
llc sends 20 tensors of shape [1,33] (columns 0..31: one per candidate physical
register, described by the live ranges that interfere with it; column 32: the virtual
register being allocated) plus `progress` [1], and reads one int64: the column whose
interference to evict, 32 meaning "evict nothing". `mask` marks the columns that may be
chosen. An unmasked answer crashes LLVM 22, so the environment never sends one: any
invalid answer is replaced by the default-equivalent choice and counted in
`CompileResult.corrections`.
  Default-equivalent choice (the channel does not send the default advisor's pick):
  among valid columns 0..31, the one with the fewest broken hints (`nr_broken_hints`),
  ties broken by the lowest `use_def_density` (a spill-weight proxy), then the lowest
  index; if that column's density is not below the candidate's own (column 32) and
  column 32 is valid, 32. This follows the structure of LLVM's default rule (minimize
  broken hints, then the heaviest evicted weight, and only evict lighter ranges) but is
  an approximation, not the default advisor's exact decision.

regalloc_priority: `-regalloc-enable-priority-advisor=release
-regalloc-priority-interactive-channel-base=BASE`. Per live range llc sends li_size
(int64), stage (int64), weight (float32), each [1], and reads one float32: the priority
(llc truncates it to unsigned; larger is allocated first).
  Default-equivalent choice: float(li_size). LLVM's default priority is the live range
  size plus bits for register class priority, hints and local/global ranges, which the
  channel does not expose; size is its main term for global ranges.

Neither channel sends the default advisor's own decision, so the default's scores come
from a compile without the channel (`default_on_channel=False`), and its decisions, for
the default trace and behavioral cloning, from the tracer plugin (cc/regalloc_trace,
`Tracer`), which keeps the default in charge and logs its answer per decision.

Training: one score per function (key "module::function"), reward
clip(1 - (cost + 1) / (baseline + 1), -1, 1); networks: the masked column scorer
(eviction) and a Normal over log2(priority) (priority), mlgo.policy.regalloc_architectures.

Reward (both problems), per function, lower is better:
  cost(f) = 1.0 * TotalSpillsCost + 4.0 * TotalReloadsCost
          + 1.0 * TotalFoldedSpillsCost + 4.0 * TotalFoldedReloadsCost
          + 0.2 * TotalCopiesCost
read from the greedy allocator's `SpillReloadCopies` remark of `f` (function-wide, not the
per-loop `LoopSpillReloadCopies`), produced with `-pass-remarks-output=FILE
-pass-remarks-filter=regalloc`. Each Total*Cost is the count of such instructions
weighted by their block's frequency relative to the entry block. The weights are LLVM's
RegAllocScore ones: stores 1, loads 4, copies 0.2; an instruction that folds both a
reload and a spill (read-modify-write of a stack slot) counts 4 + 1 = 5, RegAllocScore's
load-store weight. Unlike RegAllocScore this counts only allocator-introduced spill
code (loads/stores the program had anyway are policy-independent) and no
rematerializations (the remarks do not report them). A function without a remark has
no spill code: cost 0. Reported as {"functions": {name: cost}, "total": sum,
"spill_code": {name: count}}, where count(f) is the same weighted sum over the remark's
unweighted counts (NumSpills, NumReloads, NumFoldedSpills, NumFoldedReloads,
NumVRCopies): the spill code without block frequencies, which a guard can require not
to grow (mlgo.env.guarded, no_more_spill_code).

Performance-model reward (the variants regalloc_eviction_perf, regalloc_priority_perf:
same decisions, same features, another reward): llc also writes its basic-block address
map with static block frequencies (mlgo.profiles.bbmap), and a function's cost is its
estimated cycles per call,
  cost(f) = sum over f's machine basic blocks b of rel_freq(b) * cycles(b),
with cycles(b) the learned block cost model (mlgo.profiles.cost_model: instructions plus
L1/LL miss and mispredict penalties predicted from the block's instruction mix, fitted
on profiled runs of real programs). It sees everything the allocation changes in a
block (spills, reloads, folded stack operands, copies, callee-saved pushes), at the
cost the profiles measured, not fixed weights. The model is models/perf_model/
cost_model.json of the checkout, or the file MLGO_PERF_MODEL names.
"""
import dataclasses
import re

import numpy as np

from mlgo.policy import regalloc_architectures
from mlgo.profiles import bbmap, blocks as blocks_lib, cost_model
from mlgo.problems.base import ActionSpec, Problem, Tracer, first, spec

N_COLUMNS = 33
CANDIDATE_COLUMN = 32
_INT_FEATURES = ("mask", "is_free", "is_hint", "is_local", "max_stage", "min_stage")
EVICTION_FEATURE_NAMES = [
    "mask", "is_free", "nr_urgent", "nr_broken_hints", "is_hint", "is_local",
    "nr_rematerializable", "nr_defs_and_uses", "weighed_reads_by_max",
    "weighed_writes_by_max", "weighed_read_writes_by_max", "weighed_indvars_by_max",
    "hint_weights_by_max", "start_bb_freq_by_max", "end_bb_freq_by_max",
    "hottest_bb_freq_by_max", "liverange_size", "use_def_density", "max_stage",
    "min_stage", "progress",
]

COST_WEIGHTS = {
    "TotalSpillsCost": 1.0,
    "TotalReloadsCost": 4.0,
    "TotalFoldedSpillsCost": 1.0,
    "TotalFoldedReloadsCost": 4.0,
    "TotalCopiesCost": 0.2,
}
# The same weights on the instruction counts, without block frequencies.
COUNT_WEIGHTS = {
    "NumSpills": 1.0,
    "NumReloads": 4.0,
    "NumFoldedSpills": 1.0,
    "NumFoldedReloads": 4.0,
    "NumVRCopies": 0.2,
}
REMARKS_FILTER = "regalloc"
# Divided by the function's largest value (or, for the density, a spill weight per
# instruction): in a function with deep loops these span many decades below 1, where
# slog cannot tell 1e-9 from 3e-5 (mlgo.policy.normalization, "log").
EVICTION_LOG_SCALE_FEATURES = (
    "weighed_reads_by_max", "weighed_writes_by_max", "weighed_read_writes_by_max",
    "weighed_indvars_by_max", "hint_weights_by_max", "start_bb_freq_by_max",
    "end_bb_freq_by_max", "hottest_bb_freq_by_max", "use_def_density")


def _eviction_features():
  out = []
  for n in EVICTION_FEATURE_NAMES:
    if n == "progress":
      out.append(spec(n, np.float32, (1,)))
    else:
      out.append(spec(n, np.int64 if n in _INT_FEATURES else np.float32, (1, N_COLUMNS)))
  return out


def _prepare_same(obs, llvm_version):
  return obs, None


def eviction_default(obs: dict) -> np.int64:
  """The default-equivalent column (module docstring)."""
  mask, hints, density = (np.asarray(obs[n]).reshape(1, -1)
                          for n in ("mask", "nr_broken_hints", "use_def_density"))
  return regalloc_architectures.default_rule_columns(mask != 0, hints, density)[0]


def eviction_probe_alternative(obs, action):
  """A rollout probe's alternative: the default-equivalent column where the policy
  chose another (its departures from the default are what a probe checks), else none."""
  d = eviction_default(obs)
  return None if int(d) == int(np.asarray(action).reshape(-1)[0]) else d


def eviction_validate(action, obs):
  """(a masked-valid column, corrected?)."""
  mask = obs["mask"].reshape(-1)
  try:
    a = int(np.asarray(action).reshape(-1)[0])
  except (TypeError, ValueError, OverflowError):
    a = -1
  if 0 <= a < N_COLUMNS and mask[a]:
    return np.int64(a), False
  return eviction_default(obs), True


def priority_default(obs: dict) -> np.float32:
  return np.float32(first(obs["li_size"]))


def priority_validate(action, obs):
  """Priorities must be finite, non-negative floats that fit llc's unsigned cast."""
  try:
    a = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
  except (TypeError, ValueError):
    return priority_default(obs), True
  if not np.isfinite(a):
    return priority_default(obs), True
  if a < 0.0:
    return np.float32(0.0), True
  if a > 4294967040.0:  # largest float32 below 2**32
    return np.float32(4294967040.0), True
  return np.float32(a), False


def lowest_valid_column(obs: dict) -> np.int64:
  """What we answer while the tracer keeps the default in charge: any valid column
  (the tracer logs its reading of it, checked against what we sent)."""
  mask = np.asarray(obs["mask"]).reshape(-1)
  idx = np.flatnonzero(mask[:CANDIDATE_COLUMN])
  return np.int64(idx[0] if len(idx) else CANDIDATE_COLUMN)


def eviction_random(obs, rng):
  valid = np.flatnonzero(np.asarray(obs["mask"]).reshape(-1))
  return np.int64(rng.choice(valid) if valid.size else CANDIDATE_COLUMN)


def priority_random(obs, rng):
  size = float(np.asarray(obs["li_size"]).reshape(-1)[0])
  return np.float32(rng.uniform(0.0, 2.0 * size + 1.0))


def priority_trace_answer(obs):
  return np.float32(0.0)


def reward(outputs: dict) -> dict:
  try:
    with open(outputs["remarks"], "r", encoding="utf-8", errors="replace") as f:
      text = f.read()
  except (OSError, TypeError):
    text = ""
  return reward_from_remarks(text, [c for c in outputs.get("contexts", ()) if c])


def load_perf_model():
  """The learned block cost model (cost_model.shipped_model_path); a ValueError saying
  which file is missing or unreadable."""
  try:
    return cost_model.load_cached()
  except cost_model.ModelError as e:
    raise ValueError(str(e)) from e


def perf_reward(outputs: dict) -> dict:
  """The performance-model reward dict (module docstring) of a compile's object."""
  model = load_perf_model()
  # A module of data only (tables, no functions) has no blocks and costs nothing.
  bl = blocks_lib.disassemble(outputs["object"], allow_empty=True)
  if bl and not any(b.rel_freq is not None for b in bl):
    raise ValueError(f"{outputs['object']}: no basic-block address map with frequencies")
  costs = {fn: 0.0 for fn in outputs.get("contexts", ()) if fn}
  costs.update(model.function_costs(bl))
  return {"functions": costs, "total": float(sum(costs.values()))}


def perf_reward_tag() -> str:
  """The cost model's content hash: cached scores of one model are not another's."""
  import hashlib  # pylint: disable=import-outside-toplevel
  try:
    return hashlib.sha256(cost_model.shipped_model_path().read_bytes()).hexdigest()[:12]
  except (OSError, cost_model.ModelError):
    return "nomodel"


PERF_REWARD = dict(
    reward_name="perf_model",
    reward_tag=perf_reward_tag,
    reward_fn=perf_reward,
    reward_flags=bbmap.FLAGS_LLC,
    reward_needs_object=True,    # the block address map is a section of the object
    remarks_filter=None,
    reward_description="estimated cycles per call of each function: the learned block "
                       "cost model (profiled real programs) weighted by llc's static "
                       "block frequencies (lower is better)",
)


def with_perf_reward(problem: Problem) -> Problem:
  """The same problem scored by the performance model (module docstring)."""
  return dataclasses.replace(problem, name=problem.name + "_perf", variant_of=problem.name,
                             **PERF_REWARD)


def function_costs(reward_dict):
  return reward_dict["functions"]


def _eviction_architecture(features, norms, hidden, cost_mask: bool = False,
                           default_prior: float = 0.0):
  return regalloc_architectures.eviction_architecture([f["name"] for f in features], norms, hidden,
                                             cost_mask=cost_mask, default_prior=default_prior)


def _priority_architecture(features, norms, hidden):
  del features, norms
  return regalloc_architectures.priority_architecture(hidden)


_SHARED = dict(
    tool="llc",
    reward_description="weighted spill/reload/copy cost per function from the greedy "
                       "allocator's SpillReloadCopies remarks (lower is better)",
    higher_is_better=False,
    prepare=_prepare_same,
    reward_fn=reward,
    reward_name="remarks",
    reward_needs_object=False,   # the remarks alone
    remarks_filter=REMARKS_FILTER,
    default_on_channel=False,
    key="function",
    score_fn=function_costs,
    missing_score=0.0,        # no SpillReloadCopies remark: no spill code
    reward_delta=1.0,
    reward_clip=1.0,
    score_name="cost",
    corpus_opt="O2",
)


def make_eviction_problem() -> Problem:
  return Problem(
      name="regalloc_eviction",
      features=_eviction_features(),
      action=ActionSpec("index_to_evict", np.dtype(np.int64), (1,), 0, N_COLUMNS - 1),
      channel_option="-regalloc-evict-interactive-channel-base",
      enable_options=("-regalloc-enable-advisor=release",),
      default_action=eviction_default,
      validate=eviction_validate,
      default_description="default-equivalent heuristic: fewest broken hints, then lowest "
                          "use_def_density, only if lighter than the candidate (else 32)",
      tracer=Tracer("-regalloc-evict-trace-log", "default_index", "policy_index",
                    lowest_valid_column),
      random_fn=eviction_random,
      architecture_fn=_eviction_architecture,
      log_scale_features=EVICTION_LOG_SCALE_FEATURES,
      default_hidden=(64, 32),
      probe_alternative=eviction_probe_alternative,
      **_SHARED,
  )


def make_priority_problem() -> Problem:
  return Problem(
      name="regalloc_priority",
      features=[spec("li_size", np.int64), spec("stage", np.int64),
                spec("weight", np.float32)],
      action=ActionSpec("priority", np.dtype(np.float32), (1,), 0.0, 4294967040.0),
      channel_option="-regalloc-priority-interactive-channel-base",
      enable_options=("-regalloc-enable-priority-advisor=release",),
      default_action=priority_default,
      validate=priority_validate,
      default_description="default-equivalent: priority = li_size",
      tracer=Tracer("-regalloc-priority-trace-log", "default_priority", None,
                    priority_trace_answer),
      random_fn=priority_random,
      architecture_fn=_priority_architecture,
      default_hidden=(32, 32),
      **_SHARED,
  )


PROBLEMS = {
    "regalloc_eviction": make_eviction_problem,
    "regalloc_priority": make_priority_problem,
    # The same decisions scored by the learned performance model.
    "regalloc_eviction_perf": lambda: with_perf_reward(make_eviction_problem()),
    "regalloc_priority_perf": lambda: with_perf_reward(make_priority_problem()),
}


# --- remarks ---------------------------------------------------------------------------

_DOC_SPLIT = re.compile(r"^--- ", re.M)
_KV = re.compile(r"^(\w+):\s*(.*)$")
_ARG = re.compile(r"^\s*-\s+(\w+):\s*(.*)$")


def _unquote(v: str) -> str:
  v = v.strip()
  if len(v) >= 2 and v[0] == v[-1] == "'":
    return v[1:-1].replace("''", "'")
  if len(v) >= 2 and v[0] == v[-1] == '"':
    return v[1:-1].encode().decode("unicode_escape")
  return v


def parse_remarks(text: str) -> dict:
  """{function: {Arg: float}} from the SpillReloadCopies records of a remarks YAML."""
  out = {}
  for doc in _DOC_SPLIT.split(text):
    name = fn = None
    args = {}
    for line in doc.splitlines():
      m = _KV.match(line)
      if m:
        key, val = m.group(1), m.group(2)
        if key == "Name":
          name = _unquote(val)
        elif key == "Function":
          fn = _unquote(val)
        continue
      m = _ARG.match(line)
      if m and m.group(1) != "String":
        try:
          args[m.group(1)] = float(_unquote(m.group(2)))
        except ValueError:
          pass
    if name == "SpillReloadCopies" and fn is not None:
      out[fn] = args
  return out


def remark_cost(args: dict, weights=None) -> float:
  return float(sum(w * args.get(k, 0.0) for k, w in (weights or COST_WEIGHTS).items()))


def reward_from_remarks(text: str, functions=()) -> dict:
  """The reward dict (module docstring) from remarks text; `functions` get 0 if absent."""
  costs = {fn: 0.0 for fn in functions}
  counts = dict(costs)
  for fn, args in parse_remarks(text).items():
    costs[fn] = remark_cost(args)
    counts[fn] = remark_cost(args, COUNT_WEIGHTS)
  return {"functions": costs, "total": float(sum(costs.values())), "spill_code": counts}
