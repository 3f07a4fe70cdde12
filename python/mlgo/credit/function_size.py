"""Measured per-function credit for inlining: no model, the objects themselves.

PPO compiles each sampled module several times an iteration (PPOConfig.samples_per_module
>= 2), each compile with other sampled decisions. Every object's symbol table gives the
real native size of each function it kept; the inliner's remarks name the caller and the
callee of every decision. Comparing one compile with the other compiles of the same
module tells, per function, how much bigger or smaller this compile made it. Decision d
of compile s, callee E into caller C, is credited

    delta_d = size_s(C) - mean(size_t(C) over the other compiles t that kept C)
            + presence term of E

in bytes. The first term is C's own code as all of its decisions (and its callees'
inlined bodies) left it, so a decision is no longer charged for what happened in the
rest of the module. The presence term charges keeping or deleting E: where this compile
deleted E and others kept it, the inlinings of E here share -mean size of E in the others
times (the share of other compiles that kept E); where this compile kept E and others
deleted it, the refusals to inline E share (1 - that share) times E's size, positive. A
function every compile kept (or none) has no presence term. Decisions of a caller that
has no measured change (deleted in this compile, or in every other one) get nothing.

The per-decision figures are only known once every compile of the module in the
iteration is back: the worker's annotator reads names and sizes, and `complete` (run by
the trainer on the whole batch) turns them into annotations["decision_delta"], which the
shared experience builder uses like any credit. A module compiled once in an iteration
gets no credit (counted as credit_missing).
"""
import collections

import numpy as np

from mlgo.ir2native import states as states_lib
from mlgo.util import toolchain


class Annotator:
  """compile_module annotator: every decision's caller, callee and outcome (remarks) and
  every function's size (object). Picklable; holds nothing."""

  @classmethod
  def for_problem(cls, problem):
    if not problem.name.startswith("inlining"):
      raise ValueError(f"function_size credit reads the inliner's remarks; problem "
                       f"{problem.name} is not an inlining problem")
    return cls()

  def flags(self, tmpdir):
    return states_lib.annotator_flags(tmpdir)

  def annotate(self, outputs, trajectories):
    sizes = toolchain.function_sizes(outputs["object"])
    names = []
    if trajectories:
      remarks = states_lib.compile_remarks(outputs)
      for t in trajectories:
        ds = states_lib.decisions_from_remarks(remarks, len(t.actions), "credit")
        names.append(([d.caller for d in ds], [d.callee for d in ds],
                      [d.inlined for d in ds]))
    return {"function_sizes": sizes, "decisions": names}

  @staticmethod
  def complete(results):
    """Sets annotations["decision_delta"] on every result whose module has at least one
    other annotated compile in `results` (module docstring)."""
    groups = collections.defaultdict(list)
    for res in results:
      ann = getattr(res, "annotations", None) or {}
      if "function_sizes" in ann and "decisions" in ann:
        groups[res.module_name].append(res)
    for group in groups.values():
      if len(group) < 2:
        continue
      sizes = [r.annotations["function_sizes"] for r in group]
      for i, res in enumerate(group):
        others = sizes[:i] + sizes[i + 1:]
        res.annotations["decision_delta"] = [
            decision_deltas(sizes[i], others, callers, callees, inlined)
            for callers, callees, inlined in res.annotations["decisions"]]


def decision_deltas(own: dict, others: list, callers, callees, inlined) -> np.ndarray:
  """[n] bytes credited to each decision of one compile (module docstring): `own` and
  each of `others` map function -> size in one compile's object."""
  caller_term, presence = {}, {}
  for fn in set(callers) | set(callees):
    kept = [o[fn] for o in others if fn in o]
    if fn in own and kept:
      caller_term[fn] = own[fn] - float(np.mean(kept))
    share = len(kept) / len(others)
    if fn not in own and kept:           # deleted here, kept elsewhere
      presence[fn] = -share * float(np.mean(kept))
    elif fn in own and share < 1.0:      # kept here, deleted elsewhere
      presence[fn] = (1.0 - share) * own[fn]
  # The decisions a presence change is charged to: the inlinings of a deleted callee,
  # the refusals of a kept one; they share it, so a callee deleted after k inlinings
  # counts its size once, not k times (k times would make every one of k callers' growth
  # look free and reward inlining multi-site callees).
  # Only decisions whose caller has a measured change take part: a caller this compile
  # deleted (inlined into its own callers) has no size of its own here, and charging
  # its decisions only the deletions they caused would make its growth free (PPO then
  # inlined everything into static helpers: libsodium's siphash +98%).
  charged = [c in caller_term and ((p < 0 and inl) or (p > 0 and not inl))
             for c, e, inl in zip(callers, callees, inlined)
             for p in (presence.get(e, 0.0),)]
  shares = collections.Counter(e for e, ch in zip(callees, charged) if ch)
  out = np.zeros(len(callers), np.float64)
  for i, (c, e) in enumerate(zip(callers, callees)):
    out[i] = caller_term.get(c, 0.0)
    if charged[i]:
      out[i] += presence[e] / shares[e]
  return out.astype(np.float32)
