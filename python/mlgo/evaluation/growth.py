"""Why a module got bigger under an inlining policy: the call sites where the policy
answered otherwise than clang, named, each with the bytes it costs.

  explain_module(module, policy, "inlining") -> {"default": bytes, "policy": bytes,
      "departures": [Departure...], "names": bool}

One compile with the policy (recording every decision and the inliner's remarks), then
one compile per departure with just that decision answered clang's way and the policy
deciding the rest (as a rollout probe does): `saved` is what the module loses in .text
when that one answer is reverted. Names come from the ML advisor's remarks, one per
channel decision in decision order (mlgo.env.inline_remarks); when they do not line up
(a compiler that answers some call sites itself), the rows have no names and say so.

Departures of one caller/callee pair are summed in `by_site` (a cascade: the same callee
inlined again and again into one caller, each time one more copy).
"""
import collections
import dataclasses
import os
import subprocess
import tempfile

import numpy as np

from mlgo import problems as problems_lib
from mlgo.env import core, inline_remarks, policies

# Features shown beside each departure: the default's own cost model and what a cascade
# looks like (a callee with few users inlined again and again into a growing caller).
SHOWN = ("cost_estimate", "threshold", "callee_users", "callee_basic_block_count",
         "caller_basic_block_count", "callsite_height")


@dataclasses.dataclass
class Departure:
  index: int                 # decision number in the policy's compile
  action: int                # the policy's answer (1: inline)
  default: int               # clang's answer at that point
  caller: str
  callee: str
  features: dict
  saved: float | None = None  # bytes the module loses when this answer is clang's; None: failed


class _Recorder:
  """The policy, remembering each decision: its answer, clang's and a few features."""

  def __init__(self, policy):
    self.policy, self.rows = policy, []

  def act(self, obs):
    a = int(np.asarray(self.policy.act(obs)).reshape(-1)[0])
    self.rows.append((a, int(np.asarray(obs["inlining_default"]).reshape(-1)[0]),
                      {k: int(np.asarray(obs[k]).reshape(-1)[0]) for k in SHOWN if k in obs}))
    return np.int64(a)


class _DefaultAt:
  """The policy, except decision `at` takes clang's answer."""

  def __init__(self, policy, at: int):
    self.policy, self.at, self.i = policy, at, 0

  def act(self, obs):
    i, self.i = self.i, self.i + 1
    if i == self.at:
      return np.int64(np.asarray(obs["inlining_default"]).reshape(-1)[0])
    return self.policy.act(obs)


def demangle(names, llvm_version: int = 22) -> list[str]:
  """C++ names as people read them (LLVM's llvm-cxxfilt, one run for all); names it
  does not know, or a missing tool, stay as they are."""
  names = list(names)
  tool = f"/usr/lib/llvm-{llvm_version}/bin/llvm-cxxfilt"
  if not names or not os.path.exists(tool):
    return names
  p = subprocess.run([tool], input="\n".join(names) + "\n", capture_output=True, text=True,
                     timeout=60, check=False)
  out = p.stdout.splitlines()
  return out if p.returncode == 0 and len(out) == len(names) else names


def _size(problem, module, result) -> float:
  if not result.ok:
    raise RuntimeError(f"{module.name}: compile failed: {result.reason}")
  return float(sum(problem.scores(module.name, result.reward).values()))


def explain_module(module, policy, problem_name: str = "inlining", *, llvm_version: int = 22,
                   timeout: float = 300.0, max_reverts: int = 200) -> dict:
  """The departures of `policy` (anything with act(obs), greedy) from clang on `module`.
  At most `max_reverts` revert compiles (the first departures in decision order);
  the rest keep saved=None. Raises RuntimeError naming the module when the default or
  the policy compile fails; a failed revert compile leaves that row's saved=None."""
  problem = problems_lib.get_problem(problem_name)
  if not problem.default_on_channel or problem.tool != "clang":
    # Needs clang's own answer on the channel and the inliner's remarks.
    raise ValueError(f"explaining growth needs a clang problem whose channel sends the "
                     f"default's decision (inlining), not {problem_name!r}")
  ref = core.compile_module(module, problem, policies.reference_policy(problem),
                            llvm_version=llvm_version, timeout=timeout)
  default_size = _size(problem, module, ref)
  rec = _Recorder(policy)
  with tempfile.TemporaryDirectory(prefix="growth-") as tmp:
    remarks_path = os.path.join(tmp, "policy.remarks.yaml")
    res = core.compile_module(module, problem, rec, llvm_version=llvm_version,
                              timeout=timeout,
                              extra_flags=inline_remarks.clang_flags(remarks_path))
    policy_size = _size(problem, module, res)
    try:
      ml = [r for r in inline_remarks.parse(remarks_path)
            if r.name in inline_remarks.ML_DECISIONS]
    except inline_remarks.RemarksError:
      ml = []
  names = len(ml) == len(rec.rows)
  if names:
    readable = demangle([r.caller for r in ml] + [r.callee for r in ml], llvm_version)
    ml = [inline_remarks.Remark(r.kind, r.name, a, b)
          for r, a, b in zip(ml, readable[:len(ml)], readable[len(ml):])]
  deps = [Departure(i, a, d, ml[i].caller if names else "", ml[i].callee if names else "", f)
          for i, (a, d, f) in enumerate(rec.rows) if a != d]
  for dep in deps[:max_reverts]:
    r = core.compile_module(module, problem, _DefaultAt(policy, dep.index),
                            llvm_version=llvm_version, timeout=timeout)
    if r.ok:
      dep.saved = policy_size - float(sum(problem.scores(module.name, r.reward).values()))
  return {"module": module.name, "default": default_size, "policy": policy_size,
          "decisions": len(rec.rows), "departures": deps, "names": names,
          "reverted": min(len(deps), max_reverts)}


def by_site(departures) -> list[dict]:
  """Departures grouped by (caller, callee, answer), largest summed saving first."""
  groups = collections.OrderedDict()
  for d in departures:
    g = groups.setdefault((d.caller, d.callee, d.action),
                          {"caller": d.caller, "callee": d.callee, "action": d.action,
                           "count": 0, "saved": 0.0, "measured": 0})
    g["count"] += 1
    if d.saved is not None:
      g["saved"] += d.saved
      g["measured"] += 1
  return sorted(groups.values(), key=lambda g: -g["saved"])


def _collapse(name: str, open_: str, close: str) -> str:
  """`name` with every outermost open_..close group emptied to open_ + "..." + close."""
  out, depth = [], 0
  for ch in name:
    if ch == open_:
      depth += 1
      if depth == 1:
        out.append(open_ + "...")
      continue
    if ch == close and depth:
      depth -= 1
      if depth == 0:
        out.append(close)
      continue
    if depth == 0:
      out.append(ch)
  return "".join(out)


def short_name(name: str, width: int = 80) -> str:
  """A long C++ name readable in a table: template arguments, then parameters, elided
  (growth.csv keeps the whole name). operator< and friends are left alone."""
  if len(name) <= width or "operator" in name:
    return name
  name = _collapse(name, "<", ">")
  return name if len(name) <= width else _collapse(name, "(", ")")


def _cell(name: str) -> str:
  return "`" + short_name(name or "?").replace("|", "\\|") + "`"  # operator| in a table


def markdown(rep: dict, top: int = 20) -> str:
  """One module's explanation: the totals, then the call sites that cost the most."""
  d, p = rep["default"], rep["policy"]
  lines = [f"## {rep['module']}: {d:.0f} -> {p:.0f} bytes ({100 * (p / d - 1):+.2f}%)", "",
           f"{len(rep['departures'])} of {rep['decisions']} decisions differ from clang's; "
           f"{rep['reverted']} reverted one at a time (the policy deciding the rest)."]
  if not rep["names"]:
    lines.append("The inliner's remarks did not line up with the decisions: no names.")
  lines += ["", "| caller | callee | policy | times | bytes saved by clang's answer |",
            "| --- | --- | --- | ---: | ---: |"]
  for g in by_site(rep["departures"])[:top]:
    saved = f"{g['saved']:+.0f}" + ("" if g["measured"] == g["count"] else
                                     f" ({g['measured']} of {g['count']} measured)")
    lines.append(f"| {_cell(g['caller'])} | {_cell(g['callee'])} | "
                 f"{'inline' if g['action'] else 'keep call'} | {g['count']} | {saved} |")
  return "\n".join(lines) + "\n"


def csv_rows(rep: dict) -> list[dict]:
  return [dict({"module": rep["module"], "index": d.index, "caller": d.caller,
                "callee": d.callee, "policy": d.action, "clang": d.default,
                "saved_bytes": "" if d.saved is None else f"{d.saved:.0f}"},
               **{k: d.features.get(k, "") for k in SHOWN})
          for d in rep["departures"]]
