"""Explaining default-replay differences from the inliner's remarks (mlgo.env.inline_remarks):
clang's ML advisor writes one remark per channel decision, and answers some call sites
itself without asking (a call in a catch handler, in catch_rethrow.cpp; LLVM 22 and 19)."""
import pytest

from mlgo import env
from mlgo.env import inline_remarks as ir
from mlgo.env import replay

import envtestlib as lib


def _remarks(tmp_path, module, version, policy):
  """(decisions, remarks) of a compile with `policy` (None = plain compile)."""
  f = tmp_path / ("plain" if policy is None else "replay")
  flags = ["-opt-record-file", str(f), "-opt-record-passes", "inline"]
  if policy is None:
    env.plain_compile(module, "inlining", llvm_version=version,
                      output_path=str(tmp_path / "p.o"), extra_flags=flags)
    return None, ir.parse(str(f))
  res = env.compile_module(module, "inlining", policy, llvm_version=version,
                           output_path=str(tmp_path / "r.o"), extra_flags=flags)
  assert res.ok, res.reason
  return res.decisions, ir.parse(str(f))


@pytest.mark.parametrize("version", [22, 19])
def test_one_ml_remark_per_channel_decision(tmp_path, version):
  m = lib.inlining_module("calls.c", version)
  decisions, remarks = _remarks(tmp_path, m, version, env.DefaultPolicy())
  assert decisions == 14
  assert ir.ml_decision_count(remarks) == decisions
  _, plain = _remarks(tmp_path, m, version, None)
  exp = ir.explain(plain, remarks, decisions)
  assert exp.only_plain == [] and exp.only_replay == []
  assert sum(ir.inlined_sites(plain).values()) > 0
  assert exp.summary().startswith("same inlined call sites")


@pytest.mark.parametrize("version", [22, 19])
def test_call_sites_the_ml_advisor_answers_itself(tmp_path, version):
  m = lib.inlining_module("catch_rethrow.cpp", version)
  decisions, remarks = _remarks(tmp_path, m, version, env.DefaultPolicy())
  assert decisions > 50 and ir.ml_decision_count(remarks) == decisions
  _, plain = _remarks(tmp_path, m, version, None)
  exp = ir.explain(plain, remarks, decisions)
  assert exp.only_replay == []
  assert exp.never_offered == exp.only_plain != []
  callees = {callee for _, callee, _ in exp.never_offered}
  assert any("_M_put_node" in c for c in callees), callees
  assert ir.UNREACHABLE in exp.summary()
  # The report's explanation path gives the same verdict.
  assert ir.UNREACHABLE in replay.explain_mismatch(m, version, 120.0, str(tmp_path))


def test_explain_does_not_excuse_a_replay_that_inlines_more():
  plain = [ir.Remark("Passed", "Inlined", "f", "g")]
  rep = [ir.Remark("Passed", "InliningSuccess", "f", "g"),
         ir.Remark("Passed", "InliningSuccess", "f", "h")]
  exp = ir.explain(plain, rep, 2)
  assert exp.only_replay == [("f", "h", 1)] and exp.only_plain == []
  assert ir.UNREACHABLE not in exp.summary()
  # An offered-but-declined site is the policy's doing, not the advisor's.
  rep = [ir.Remark("Missed", "IniningNotAttempted", "f", "g")]
  exp = ir.explain(plain, rep, 1)
  assert exp.only_plain == [("f", "g", 1)] and exp.never_offered == []
  assert ir.UNREACHABLE not in exp.summary()


def test_report_counts_only_unexplained_differences():
  r = replay.ReplayReport("inlining", 22, modules=3, identical=1,
                          mismatches=[f"a (1 call sites ...{ir.UNREACHABLE}...)", "b (other)"])
  assert r.unexplained == ["b (other)"]
  assert "1 of them only at call sites" in r.summary()


def test_parse_errors_name_the_file(tmp_path):
  with pytest.raises(ir.RemarksError, match="missing.yaml"):
    ir.parse(str(tmp_path / "missing.yaml"))
  bad = tmp_path / "bad.yaml"
  bad.write_text("--- !Passed\nPass: inline\nArgs:\n  - Callee: g\n...\n")
  with pytest.raises(ir.RemarksError, match="bad.yaml.*Name/Function"):
    ir.parse(str(bad))
