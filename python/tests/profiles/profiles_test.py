"""mlgo.profiles: the callgrind parser on a recorded profile and on bad input, and the
block matching of a live profile of a real program built by clang-22."""
import pathlib
import shutil
import subprocess

import pytest

from mlgo.profiles import blocks, callgrind
from mlgo.training import testing

HERE = pathlib.Path(__file__).resolve().parent


def _data(rel):
  return pathlib.Path(testing.data_path(rel))


RECORDED = _data("testdata/profiles/pressure.callgrind")


def _totals(path):
  for line in open(path):
    if line.startswith("totals:"):
      return [int(x) for x in line.split()[1:]]
  raise AssertionError("no totals line")


def test_recorded_profile_adds_up_to_callgrinds_totals():
  p = callgrind.parse(RECORDED)
  assert p.events[:3] == ["Ir", "Dr", "Dw"] and "Bcm" in p.events
  want = _totals(RECORDED)
  for i, e in enumerate(p.events[:len(want)]):
    assert p.total(e) == want[i], e
  assert set(p.functions.values()) == {"churn", "blend"}
  assert p.command == "./p"


def test_calls_lines_are_not_the_callers_own_cost():
  text = ["events: Ir Bcm", "positions: instr line", "ob=(1) /bin/x", "fn=(1) f",
          "0x10 1 5", "cfn=(2) g", "calls=1 0x20 0", "+2 0 1000", "+2 0 3 1",
          "fn=(2)", "0x20 0 1000"]
  p = callgrind.parse_lines(text)
  assert p.costs[("/bin/x", 0x10)].tolist() == [5, 0]
  assert p.costs[("/bin/x", 0x14)].tolist() == [3, 1]     # +2 from 0x12, not from 0x10
  assert p.costs[("/bin/x", 0x20)].tolist() == [1000, 0]
  assert p.functions[("/bin/x", 0x20)] == "g"              # fn=(2) named by cfn=(2) g
  assert p.total("Ir") == 1008


@pytest.mark.parametrize("text,match", [
    ([], "no 'events:'"),
    (["events: Ir", "positions: instr line", "fn=(1) f"], "no costs"),
    (["fn=(1) f", "0x10 1 5"], r"<profile>:2: cost line before"),
    (["events: Ir", "positions: instr line", "fn=(7)"], r":3: fn=\(7\) used before"),
    (["events: Ir", "positions: instr line", "fn=(1) f", "0x10 1 5 6"], r":4: 2 costs"),
    (["events: Ir", "positions: instr line", "fn=(1) f", "0x10 1 x"], r":4: non-integer"),
    (["events: Ir", "positions: line", "fn=(1) f", "10 5"], "dump-instr"),
])
def test_bad_profiles_name_the_place(text, match):
  with pytest.raises(callgrind.ProfileError, match=match):
    callgrind.parse_lines(text)


def test_missing_or_empty_file(tmp_path):
  with pytest.raises(callgrind.ProfileError, match="nope.out"):
    callgrind.parse(tmp_path / "nope.out")
  (tmp_path / "empty.out").write_text("")
  with pytest.raises(callgrind.ProfileError, match="empty.out"):
    callgrind.parse(tmp_path / "empty.out")


def test_operands_and_features():
  b = blocks.Block("f", 0, [
      (0, 5, "movq", "%rax, -0x10(%rsp)"),        # spill
      (5, 5, "movq", "-0x10(%rsp), %rcx"),        # reload
      (10, 4, "addq", "(%rdi,%rsi,8), %rax"),     # load, not from the stack
      (14, 4, "movq", "%rax, (%rdx)"),            # store, not to the stack
      (18, 5, "leaq", "0x8(%rsp), %rax"),         # address only
      (23, 5, "callq", "0x100 <g>"),
      (28, 2, "jne", "0x0 <f>"),
      (30, 3, "movq", "%rdi, %rbx"),              # register copy
      (33, 5, "addq", "0x8(%rsp), %rbx"),         # folded reload
      (38, 1, "pushq", "%rbx"),                   # callee-saved register
      (39, 3, "movl", "$0x1, %eax")])             # an immediate is not a copy
  f = b.features()
  assert f == {"instructions": 11, "bytes": 42, "loads": 3, "stores": 2, "spills": 1,
               "reloads": 1, "calls": 1, "branches": 1, "stack_folded": 1, "copies": 1,
               "push_pop": 1}


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")
def test_live_profile_joins_onto_blocks(tmp_path):
  exe = tmp_path / "p"
  subprocess.run(["clang-22", "-O2", "-o", str(exe), str(_data("testdata/programs/pressure.c")),
                  str(HERE / "pressure_main.c")], check=True)
  out = tmp_path / "cg.out"
  subprocess.run(["valgrind", "--tool=callgrind", "--dump-instr=yes", "--cache-sim=yes",
                  "--branch-sim=yes", f"--callgrind-out-file={out}", str(exe)],
                 check=True, capture_output=True)
  prof = callgrind.parse(out)
  bl = blocks.disassemble(str(exe))
  rows = blocks.join(bl, prof, str(exe))
  # Every costed address of the program's own code lies in a disassembled block.
  assert blocks.executed_fraction(rows, prof, str(exe)) == 1.0
  churn = [r for r in rows if r["function"] == "churn"]
  # The driver runs churn 20 times over 4096 values: its loop blocks run 81,920 times.
  assert max(r["executions"] for r in churn) == 20 * 4096
  # A block runs whole: at least its first instruction's count for each of the others.
  assert all(r["Ir"] >= r["executions"] for r in rows)
  hot = max(churn, key=lambda r: r["Ir"])
  assert hot["Ir"] == hot["executions"] * hot["instructions"]
  # 16 live 64-bit values in the loop: the allocator spills inside it.
  assert sum(r["spills"] + r["reloads"] for r in churn if r["executions"] == 20 * 4096) > 0
  with pytest.raises(ValueError, match="profiled object"):
    blocks.join(bl, prof, "/not/the/exe")
