"""Function states along an inliner decision stream.

Every observation the inliner sends carries the caller's and the callee's size features
(basic blocks, conditionally executed blocks and, for `inlining_ir2vec`, the instruction
mix embedding), taken at that moment: clang-22 updates the caller's features after each
inline. The decisions themselves carry no function names; the ML advisor writes exactly
one remark per decision, in decision order, naming caller and callee and whether the
callee was deleted (InliningSuccessWithCalleeDeleted). Together they give, for each
function, the sequence of its states, and the state it ends inlining in.

A state is the vector STATE_FIELDS: [basic_block_count, conditionally_executed_blocks,
embedding...]. The end-of-inlining state of a function that was a caller is its state at
its last decision plus the callee's state if that decision inlined (the additive
approximation of one inline; the next observation would show the real one, but there is
none). A function that was never a caller ends inlining as it was last seen as a callee
(callees are offered after their own SCC was inlined and simplified).
"""
import dataclasses
import os

import numpy as np

from mlgo.env import inline_remarks

SCALARS = ("basic_block_count", "conditionally_executed_blocks")
EMBEDDING = "embedding"


class StreamMismatch(ValueError):
  """The remarks do not line up with the decisions (a different compile, or a cut log)."""


@dataclasses.dataclass(frozen=True)
class Decision:
  caller: str
  callee: str
  inlined: bool
  deleted: bool    # the callee was deleted after this inline (its last use)


REMARKS_FILE = "inline-remarks.yaml"


def annotator_flags(tmpdir) -> list:
  """The compiler flags of an annotator (mlgo.env.compile_module) that reads streams:
  the inliner's remarks into the compile's temp dir."""
  return inline_remarks.clang_flags(os.path.join(tmpdir, REMARKS_FILE))


def compile_remarks(outputs: dict) -> list:
  """The parsed inline remarks of a compile made with annotator_flags."""
  return inline_remarks.parse(os.path.join(outputs["tmpdir"], REMARKS_FILE))


def streams(outputs: dict, trajectories, where: str = "") -> list:
  """One Stream per trajectory of a compile made with annotator_flags."""
  if not trajectories:
    return []
  remarks = compile_remarks(outputs)
  return [Stream.of(t.features, t.actions, remarks, where) for t in trajectories]


def state_fields(embedding_dim: int) -> list:
  return list(SCALARS) + [f"{EMBEDDING}_{i}" for i in range(embedding_dim)]


def decisions_from_remarks(remarks, n: int, where: str = "") -> list:
  """The `n` channel decisions' names, from parsed inline remarks (inline_remarks.parse)."""
  ml = [r for r in remarks if r.name in inline_remarks.ML_DECISIONS]
  if len(ml) != n:
    raise StreamMismatch(f"{where}: {len(ml)} ML-advisor remarks for {n} decisions")
  return [Decision(r.caller, r.callee,
                   r.name in ("InliningSuccess", "InliningSuccessWithCalleeDeleted"),
                   r.name == "InliningSuccessWithCalleeDeleted") for r in ml]


def side_states(features: dict, side: str) -> np.ndarray:
  """[n, F] states of the caller (side="caller") or callee of each decision."""
  cols = [np.asarray(features[f"{side}_{s}"], np.float64).reshape(-1, 1) for s in SCALARS]
  emb = features.get(f"{side}_{EMBEDDING}")
  if emb is None:
    raise KeyError(f"the decisions carry no {side}_{EMBEDDING} (IR2Native needs the "
                   f"inlining_ir2vec problem)")
  cols.append(np.asarray(emb, np.float64).reshape(len(cols[0]), -1))
  return np.concatenate(cols, axis=1)


@dataclasses.dataclass
class Stream:
  """One compile's decisions with names and states."""
  decisions: list            # [Decision]
  caller: np.ndarray         # [n, F] caller state at each decision
  callee: np.ndarray         # [n, F] callee state at each decision
  inlined: np.ndarray        # [n] bool, the action the compiler carried out

  @classmethod
  def of(cls, features: dict, actions, remarks, where: str = ""):
    n = len(actions)
    decisions = decisions_from_remarks(remarks, n, where)
    inl = np.array([d.inlined for d in decisions], bool)
    acts = np.asarray(actions).reshape(n, -1)[:, 0] != 0
    # A "yes" the compiler could not carry out is a no (InliningAttemptedAndUnsuccessful).
    if np.any(inl & ~acts):
      raise StreamMismatch(f"{where}: a remark says inlined where the answer was no")
    return cls(decisions, side_states(features, "caller"), side_states(features, "callee"),
               inl)

  def next_caller_state(self) -> np.ndarray:
    """[n, F]: the caller's state right after each decision: its state at its next
    decision, or (its last) the state plus the callee's if inlined."""
    after = self.caller + np.where(self.inlined[:, None], self.callee, 0.0)
    last = {}
    for i in range(len(self.decisions) - 1, -1, -1):
      c = self.decisions[i].caller
      if c in last:
        after[i] = self.caller[last[c]]
      last[c] = i
    return after

  def end_states(self) -> dict:
    """{function: (state [F], "caller"|"callee")}: each function's state at the end of
    its inlining (module docstring)."""
    out = {}
    for i, d in enumerate(self.decisions):   # forward: the last sighting wins
      if out.get(d.callee, (None, "callee"))[1] == "callee":
        out[d.callee] = (self.callee[i], "callee")
      out[d.caller] = (self.caller[i] + (self.callee[i] if self.inlined[i] else 0.0),
                       "caller")
    return out
