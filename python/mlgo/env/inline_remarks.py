"""Inliner optimization remarks (clang `-opt-record-file F -opt-record-passes inline`), used
to explain a default replay that is not byte-identical to the plain compile.

Why: clang's ML inline advisor answers some call sites itself, without an observation on
the channel (LLVM's MLInlineAdvisor returns a plain "no" when, e.g., its cost estimate or
feature analysis of the call site fails). The default inline advisor may inline exactly
those call sites, and then no answer the policy gives can reproduce the plain object. The
remarks show it: the ML advisor writes exactly one remark per channel decision, so a call
site the plain compile inlined that has no ML-advisor remark was never offered to us.

Remark names (LLVM 19 and 22): default advisor: Inlined, AlwaysInline, NotInlined,
TooCostly, NeverInline, NoDefinition, ...; ML advisor: InliningSuccess,
InliningSuccessWithCalleeDeleted, IniningNotAttempted (sic, LLVM's spelling),
InliningAttemptedAndUnsuccessful (pass name "inline-ml"); both: AlwaysInline for
mandatory call sites.
"""
import collections
import dataclasses
import re

INLINED = frozenset({"Inlined", "AlwaysInline", "InliningSuccess",
                     "InliningSuccessWithCalleeDeleted"})
# One of these per observation the ML advisor sent over the channel.
ML_DECISIONS = frozenset({"InliningSuccess", "InliningSuccessWithCalleeDeleted",
                          "IniningNotAttempted", "InliningAttemptedAndUnsuccessful"})

_FIELD = {
    "name": re.compile(r"^Name:\s+(\S+)", re.M),
    "function": re.compile(r"^Function:\s+(.+)$", re.M),
    "callee": re.compile(r"^\s+- Callee:\s+(.+)$", re.M),
}


UNREACHABLE = "without a channel query"   # marks a mismatch the channel cannot fix


class RemarksError(ValueError):
  pass


@dataclasses.dataclass(frozen=True)
class Remark:
  kind: str        # Passed / Missed / Analysis
  name: str
  caller: str      # the function the remark is attached to
  callee: str


def _unquote(v: str) -> str:
  v = v.strip()
  if len(v) >= 2 and v[0] == v[-1] == "'":
    return v[1:-1].replace("''", "'")
  if len(v) >= 2 and v[0] == v[-1] == '"':
    return v[1:-1]
  return v


def clang_flags(path: str) -> list:
  """clang cc1 flags that write the inliner's remarks to `path` (YAML)."""
  return ["-opt-record-file", str(path), "-opt-record-passes", "inline"]


def parse(path: str) -> list:
  """Inline-pass remarks of a YAML remarks file, in file order (= decision order)."""
  try:
    with open(path, errors="replace") as f:
      text = f.read()
  except OSError as e:
    raise RemarksError(f"{path}: cannot read remarks: {e}") from e
  out = []
  for doc in text.split("--- !")[1:]:
    kind = doc.split("\n", 1)[0].strip()
    # "inline" (default and mandatory advice) and "inline-ml" (ML advisor decisions).
    if not re.search(r"^Pass:\s+'?inline(-ml)?'?\s*$", doc, re.M):
      continue
    got = {k: rx.search(doc) for k, rx in _FIELD.items()}
    if got["name"] is None or got["function"] is None:
      raise RemarksError(f"{path}: remark without Name/Function near byte "
                         f"{text.find(doc)}")
    callee = _unquote(got["callee"].group(1)) if got["callee"] else ""
    out.append(Remark(kind, got["name"].group(1), _unquote(got["function"].group(1)), callee))
  return out


def inlined_sites(remarks) -> collections.Counter:
  return collections.Counter((r.caller, r.callee) for r in remarks if r.name in INLINED)


def ml_decision_count(remarks) -> int:
  return sum(1 for r in remarks if r.name in ML_DECISIONS)


@dataclasses.dataclass
class Explanation:
  decisions: int                  # observations answered over the channel
  ml_decision_remarks: int        # remarks of the ML advisor for channel decisions
  only_plain: list                # [(caller, callee, count)] inlined by plain, not by replay
  only_replay: list               # [(caller, callee, count)] inlined by replay, not by plain
  never_offered: list             # subset of only_plain with no ML-advisor remark at all

  def summary(self) -> str:
    if not self.only_plain and not self.only_replay:
      return "same inlined call sites; the difference is after inlining"
    s = (f"{sum(c for *_, c in self.only_plain)} call sites inlined only by plain -Oz, "
         f"{sum(c for *_, c in self.only_replay)} only by replay")
    if self.never_offered and not self.only_replay:
      s += ("; every one was decided inside clang's ML advisor " + UNREACHABLE +
            f" (no observation, no remark; {self.decisions} observations = "
            f"{self.ml_decision_remarks} ML remarks), so no policy answer can reproduce it")
      caller, callee, _ = self.never_offered[0]
      s += f"; e.g. {callee} into {caller}"
    return s


def explain(plain_remarks, replay_remarks, decisions: int) -> Explanation:
  p, r = inlined_sites(plain_remarks), inlined_sites(replay_remarks)
  only_plain = sorted((a, b, n) for (a, b), n in (p - r).items())
  only_replay = sorted((a, b, n) for (a, b), n in (r - p).items())
  # A call site the ML advisor answered itself leaves no remark; per (caller, callee), the
  # plain compile's inlines beyond what the replay was asked about (or inlined as
  # mandatory) were never offered.
  seen = collections.Counter((x.caller, x.callee) for x in replay_remarks
                             if x.name in ML_DECISIONS or x.name == "AlwaysInline")
  never = [(a, b, n - seen[(a, b)]) for a, b, n in
           ((a, b, p[(a, b)]) for a, b, _ in only_plain) if n > seen[(a, b)]]
  return Explanation(decisions, ml_decision_count(replay_remarks), only_plain, only_replay,
                     never)
