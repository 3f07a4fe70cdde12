"""A guard judged by measured run time: per function, the policy's allocation only where
a profiled run of a second workload says it runs faster than the default's.

The static guard (mlgo.env.guarded) keeps whichever allocation the allocator's remarks
cost prefers. That cost weighs blocks by LLVM's estimated frequencies, and measured
programs show it wrong both ways (docs/regalloc.md: zstd's ZDICT_tryMerge, giflib's
DGifDecompressLine). Here both builds of a program run under cachegrind on a workload
that the final measurement does not use, and each function's estimated cycles (the sum
over its instructions, runtime_check's formula) decide. A function the workload does
not run gets the default's allocation. Like PGO this needs a representative workload;
unlike a profile it changes none of the allocator's decisions, it only picks between
two finished allocations of each function (mlgo.env.guarded's selected compile).

The reader takes cachegrind's output file (`--cachegrind-out-file`, run with
`--demangle=no` so that names are the symbols llc knows): header lines, then `fl=` and
`fn=` context lines and cost lines `LINE COUNT...` (trailing zero counts left out),
and a `summary:` line that the per-line counts must add up to.
"""
import collections
import concurrent.futures as cf
import json
import math
import pathlib
import shutil

from mlgo.evaluation.runtime_build import (build_program, cachegrind, layout_padding,
                                           metrics, rebuild_layout)
from mlgo.evaluation.runtime_programs import program_args
from mlgo.profiles.callgrind import ProfileError


def function_events(path) -> tuple:
  """(events, {function: [count per event]}) of a cachegrind output file; a function
  under several `fl=` contexts is summed. A missing, empty or malformed file, or counts
  that do not add up to the summary, raise ProfileError naming the file (and line)."""
  path = pathlib.Path(path)
  try:
    text = path.read_text(encoding="utf-8", errors="replace")
  except OSError as e:
    raise ProfileError(f"{path}: cannot read the cachegrind output: {e}") from None
  events, summary, fn = None, None, None
  per_fn = collections.defaultdict(lambda: [0] * len(events))
  for n, line in enumerate(text.splitlines(), 1):
    if not line or line.startswith(("desc:", "cmd:", "fl=", "#")):
      continue
    if line.startswith("events:"):
      events = line.split()[1:]
      if not events:
        raise ProfileError(f"{path}:{n}: `events:` names no event")
    elif line.startswith("fn="):
      fn = line[3:].strip()
    elif line.startswith("summary:"):
      summary = line.split()[1:]
    elif line[0].isdigit():
      if events is None or fn is None:
        raise ProfileError(f"{path}:{n}: a cost line before `events:` and `fn=`")
      fields = line.split()[1:]
      if len(fields) > len(events):
        raise ProfileError(f"{path}:{n}: {len(fields)} counts for {len(events)} events")
      try:
        counts = [int(x) for x in fields]
      except ValueError:
        raise ProfileError(f"{path}:{n}: not a cost line: {line[:80]!r}") from None
      row = per_fn[fn]
      for i, c in enumerate(counts):
        row[i] += c
    else:
      raise ProfileError(f"{path}:{n}: unexpected line {line[:80]!r}")
  if events is None or summary is None:
    raise ProfileError(f"{path}: not a cachegrind output (no `events:` or `summary:` line)")
  try:
    want = [int(x) for x in summary]
  except ValueError:
    raise ProfileError(f"{path}: bad `summary:` line {summary[:5]}") from None
  got = [sum(r[i] for r in per_fn.values()) for i in range(len(events))]
  if got != want[:len(events)] + [0] * (len(events) - len(want)):
    raise ProfileError(f"{path}: the per-function counts do not add up to the summary "
                       f"(truncated file?)")
  return events, dict(per_fn)


# What a measured choice compares per function (runtime_build.metrics): "cycles", the
# estimated cycles runtime_check judges by; "data", their terms that do not depend on
# where the code lies (instructions and data-cache misses; no instruction-cache misses,
# no simulated mispredicts), which a rebuild with other allocations moves.
SELECT_ON = {"cycles": "cycles", "data": "data_cycles"}


def function_cycles(path, select_on: str = "cycles") -> dict:
  """{function: cost} of a cachegrind output file (function_events, priced by
  runtime_build.metrics as SELECT_ON[select_on] says)."""
  if select_on not in SELECT_ON:
    raise ValueError(f"select_on: {select_on!r} is not one of {', '.join(SELECT_ON)}")
  events, per_fn = function_events(path)
  return {f: metrics(dict(zip(events, c)))[SELECT_ON[select_on]] for f, c in per_fn.items()}


def fastest_policy(default_cost: dict, policy_costs: list) -> dict:
  """{function: index of the policy whose build ran it in the fewest cycles}, for the
  functions where some policy beat the default (ties go to the default, then to the
  earlier policy). A function missing from a profile is not chosen for that side; one
  the default did not run is not chosen at all."""
  route = {}
  for f, best in default_cost.items():
    for k, cost in enumerate(policy_costs):
      if f in cost and cost[f] < best:
        route[f], best = k, cost[f]
  return route


# The choice's own memory layouts (selection_layouts > 1) are numbered from here: other
# code offsets, object orders and paddings than runtime_check's judged layouts (1..4),
# so that the choice cannot pick up the very address luck the verdict then measures.
SELECTION_LAYOUT_BASE = 100
# runtime_check --measured_guard's default N (SELECTION_RULES.md, stop 74: adopted by a
# rule written before its runs; the API's default stays 1, one layout).
SELECTION_LAYOUTS = 3


def mean_costs(per_layout: list) -> dict:
  """{function: mean cost over the layouts} of one build's per-layout {function: cost}
  (a function a layout did not run counts 0 there)."""
  if not per_layout:
    raise ValueError("mean_costs: no layout")
  funcs = set().union(*per_layout)
  return {f: sum(c.get(f, 0.0) for c in per_layout) / len(per_layout) for f in funcs}


# What the measured guard ships: the fastest binary measured on the choice's workload, or
# always the per-function routed build.
FINAL = ("fastest", "routed")


def fastest_binary(default_totals, measured: dict) -> tuple:
  """(name, {name: geomean change in % against clang's build}) of the binary with the
  lowest estimated cycles over the runs: one of `measured` ({name: [cycles per run]},
  insertion order breaks ties) or "default" (clang's, kept on a tie with it)."""
  def change(totals):
    logs = [math.log(t / d) for t, d in zip(totals, default_totals) if d > 0 and t > 0]
    return 100.0 * (math.exp(sum(logs) / len(logs)) - 1.0) if logs else 0.0
  pct = {name: change(t) for name, t in measured.items()}
  best = min(pct, key=pct.get, default=None)
  return ("default" if best is None or pct[best] >= 0.0 else best), pct


def summarize(default_cost: dict, policy_cost, chosen) -> dict:
  """The selection's figures on its own workload: totals of each side and of the choice
  (each function at the side it got; an estimate that assumes costs add up).
  policy_cost: one policy's {function: cost}, or a list of them with `chosen` a
  fastest_policy route (a list of names means policy 0 for each)."""
  costs = policy_cost if isinstance(policy_cost, list) else [policy_cost]
  route = chosen if isinstance(chosen, dict) else {f: 0 for f in chosen}
  funcs = set(default_cost).union(*costs)
  pick = sum(costs[route[f]][f] if f in route else default_cost.get(f, 0) for f in funcs)
  out = {"functions_run": len(funcs), "chosen": len(route),
         "default": float(sum(default_cost.values())),
         "policy": float(sum(costs[0].values())), "selected_estimate": float(pick)}
  if len(costs) > 1:
    out["candidates"] = [float(sum(c.values())) for c in costs[1:]]
    out["chosen_per_policy"] = [sum(1 for k in route.values() if k == i)
                                for i in range(len(costs))]
  return out


def selected_build(prog, src, out, build_dirs, recipes, second, pols, jobs, stream,
                   select_on: str = "cycles", final: str = "routed",
                   selection_layouts: int = 1):
  """measured_guard's selected build of `prog`: the plain default build and a plain
  build of each policy in `pols` (the first is build_dirs["policy"]; recipes: the
  build_program keywords of each side in build_dirs, and both get the new sides) run under
  cachegrind on the second workload (same output required); each function gets the
  allocation of the build that ran it fastest there (FunctionRouter on the channel for
  more than one policy): the routed build. final="fastest": the routed build runs the
  second workload too, and the build returned is the fastest binary measured there
  (fastest_binary: the routed one, a side's whole build, or the default's, copied so
  that both sides have their own dir). selection_layouts N > 1: every build also runs the
  second workload in N - 1 more memory layouts of its own (SELECTION_LAYOUT_BASE + j:
  the allocation compiled again with other code offsets, rebuild_layout) and a function's
  cost is its mean over the N runs, so that a function is not chosen for where its
  branches happened to lie (final="fastest" compares the binaries in the plain layout).
  Returns (its build dir, the selection's summary, the build_program keywords that made
  that dir: runtime_check's layouts rebuild it)."""
  if selection_layouts < 1:
    raise ValueError(f"selection_layouts must be >= 1, not {selection_layouts}")
  from mlgo.env.policies import FunctionRouter  # pylint: disable=import-outside-toplevel
  sides = ["default", "policy"] + [f"candidate-{k}" for k in range(1, len(pols))]
  for k, side in enumerate(sides[2:], 1):
    build_dirs[side] = out / prog.name / side
    recipes[side] = dict(recipes["default"], policy=pols[k])
    print(f"runtime_check: building {prog.name} ({side})", file=stream, flush=True)
    build_program(prog, src, build_dirs[side], **recipes[side])
  inp, script = second
  args = program_args(prog, inp, script, relative=True, selection=True)
  extra = [SELECTION_LAYOUT_BASE + j for j in range(1, selection_layouts)]
  exes = {(side, 0): build_dirs[side] / prog.name for side in sides}   # and the routed one
  for side in sides:
    for n in extra:
      print(f"runtime_check: building {prog.name} ({side}) in selection layout {n}",
            file=stream, flush=True)
      exes[side, n] = rebuild_layout(prog, src, build_dirs[side], recipes[side], n)

  def one(task):
    side, n = task
    f = out / prog.name / (f"selection.cachegrind.{side}" + (f".layout-{n}" if n else ""))
    print(f"runtime_check: running {prog.name} ({side}) on the second workload"
          + (f" in selection layout {n}" if n else ""), file=stream, flush=True)
    stdout, events = cachegrind(pathlib.Path(exes[task]).resolve(), args, inp.parent, f,
                                stack_shift=layout_padding(n)[3] if n else 0,
                                demangle=False)
    return stdout, function_cycles(f, select_on), metrics(events)["cycles"]
  tasks = [(side, n) for side in sides for n in [0] + extra]
  with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
    got = dict(zip(tasks, ex.map(one, tasks)))
  for (side, n), (stdout, _, _) in got.items():
    if stdout != got["default", 0][0]:
      where = f" in selection layout {n}" if n else ""
      raise RuntimeError(f"{prog.name}: on the second workload the {side} build's "
                         f"output{where} differs from the default build's; refusing to "
                         f"select")
  # Per side: (the plain layout's output, the mean cost per function, the plain total).
  runs = [(got[side, 0][0], mean_costs([got[side, n][1] for n in [0] + extra]),
           got[side, 0][2]) for side in sides]
  d_cost, costs = runs[0][1], [c for _, c, _ in runs[1:]]
  route = fastest_policy(d_cost, costs)
  summary = summarize(d_cost, costs, route)
  summary["selection_layouts"] = selection_layouts
  d = out / prog.name / "measured"
  print(f"runtime_check: building {prog.name} (measured guard: a policy's allocation "
        f"for {len(route)} of {summary['functions_run']} functions run)", file=stream,
        flush=True)
  router = pols[0] if len(pols) == 1 else FunctionRouter(pols, route)
  recipes["routed"] = dict(recipes["default"], guarded=True, policy=router,
                           policy_functions=sorted(route))
  build_program(prog, src, d, **recipes["routed"])
  shipped_as = "routed"
  if final == "fastest":
    exes["routed", 0] = d / prog.name
    stdout, _, routed = one(("routed", 0))
    measured = {"routed": [routed]} if stdout == runs[0][0] else {}
    measured.update((side, [total]) for side, (_, _, total) in zip(sides[1:], runs[1:]))
    summary["shipped"], summary["binaries_pct"] = fastest_binary([runs[0][2]], measured)
    print(f"runtime_check: {prog.name}: shipping {summary['shipped']} (on the second "
          f"workload: " + ", ".join(f"{k} {v:+.2f}%" for k, v in
                                   summary["binaries_pct"].items()) + ")",
          file=stream, flush=True)
    if summary["shipped"] == "default":   # its own copy: the layouts relink in place
      shipped = out / prog.name / "shipped-default"
      if shipped.exists():
        shutil.rmtree(shipped)
      shutil.copytree(build_dirs["default"], shipped, symlinks=True,
                      ignore=shutil.ignore_patterns("layout-*"))
      d = shipped
    elif summary["shipped"] != "routed":
      d = build_dirs[summary["shipped"]]
    shipped_as = summary["shipped"]
  (out / prog.name / "measured" / "selection.json").write_text(
      json.dumps({**summary, "functions": sorted(route), "route": route}, indent=0) + "\n")
  return d, summary, recipes[shipped_as]
