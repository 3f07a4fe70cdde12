"""mlgo.profiles.mca: llvm-mca's block costs on hand-written blocks, on every block of a
real program built by clang-22, and with instructions llvm-mca cannot take."""
import math
import pathlib
import shutil
import subprocess

import pytest

from mlgo.profiles import blocks, mca
from mlgo.training import testing

pytestmark = pytest.mark.skipif(shutil.which("llvm-mca-22") is None,
                                reason="llvm-mca-22 not installed")
HERE = pathlib.Path(__file__).resolve().parent


def _block(*insns):
  """A Block of (mnemonic, operands) pairs at made-up addresses."""
  return blocks.Block("f", 0x1000, [(0x1000 + 4 * k, 4, m, o) for k, (m, o) in
                                    enumerate(insns)])


ADDS = _block(("addq", "%rax, %rbx"), ("addq", "%rcx, %rdx"), ("addq", "%rsi, %rdi"),
              ("addq", "%r8, %r9"))
IMUL_CHAIN = _block(*[("imulq", "%rax, %rax")] * 4)
IMULS = _block(("imulq", "%rax, %rbx"), ("imulq", "%rcx, %rdx"), ("imulq", "%rsi, %rdi"),
               ("imulq", "%r8, %r9"))


def test_hand_written_blocks():
  load = _block(("movq", "0x10(%rsp), %rax"), ("addq", "%rax, %rbx"),
                ("jne", "0x1234 <foo+0x40>"))
  calls = _block(("callq", "0x1000 <bar>"), ("callq", "*%rax"),
                 ("nopw", "%cs:(%rax,%rax)"), ("movl", "$0x1000, %esi  # imm = 0x1000"),
                 ("jmpq", "*0x2fe2(%rip)  # 0x4018 <_edata>"), ("ud2", ""))
  empty = blocks.Block("f", 0x2000, [])
  adds, chain, imuls, ld, cl, e = mca.block_throughput(
      [ADDS, IMUL_CHAIN, IMULS, load, calls, empty])
  assert 0 < adds < chain
  # Latency counts, not only the ports: the dependent chain costs more than 4 free imuls.
  assert imuls < chain
  assert chain >= 4 * 3 * 0.95                  # 4 dependent 3-cycle multiplies
  assert ld > 0 and cl > 0
  assert e == 0.0


def test_target_rewriting():
  assert mca._line("jne", "0x1234 <foo+0x40>") == "jne mca_target"
  assert (mca._line("callq", "0x1000 <std::vector<int>::push_back(int)>")
          == "callq mca_target")
  assert mca._line("movl", "$0x1000, %esi  # imm = 0x1000") == "movl $0x1000, %esi"
  assert mca._line("rep", "\tstosq\t%rax, %es:(%rdi)").split() == [
      "rep", "stosq", "%rax,", "%es:(%rdi)"]


def test_every_block_of_a_real_program(tmp_path):
  exe = tmp_path / "p"
  subprocess.run(["clang-22", "-O2", "-o", str(exe),
                  testing.data_path("testdata/programs/pressure.c"),
                  str(HERE / "pressure_main.c")], check=True)
  bl = blocks.disassemble(str(exe))
  costs = mca.block_throughput(bl, chunk=16)     # several chunks
  assert len(costs) == len(bl) > 20
  assert all(c is None or (math.isfinite(c) and c >= 0) for c in costs)
  assert sum(c is not None for c in costs) >= 0.9 * len(bl)
  # Chunking does not change the numbers.
  assert mca.block_throughput(bl) == costs


def test_unassemblable_instruction_loses_only_its_block():
  bad = _block(("addq", "%rax, %rbx"), ("frobq", "%rax, %rax"))
  badreg = _block(("addq", "%rax, %rbxx"))
  costs = mca.block_throughput([ADDS, bad, IMUL_CHAIN, badreg, ADDS])
  assert costs[1] is None and costs[3] is None
  assert None not in (costs[0], costs[2], costs[4]) and costs[0] == costs[4]


def test_failing_run_is_bisected(tmp_path):
  # A stand-in llvm-mca that fails on any file holding `cpuid`: only that block is lost.
  fake = tmp_path / "fake-mca"
  fake.write_text('#!/bin/sh\nfor a; do f="$a"; done\n'
                  'grep -q cpuid "$f" && { echo boom >&2; exit 1; }\n'
                  'exec llvm-mca-22 "$@"\n')
  fake.chmod(0o755)
  bl = [ADDS, IMUL_CHAIN, _block(("cpuid", "")), IMULS, ADDS]
  costs = mca.block_throughput(bl, llvm_mca=str(fake))
  assert costs[2] is None
  assert costs[:2] + costs[3:] == [c for i, c in enumerate(mca.block_throughput(bl))
                                   if i != 2]


def test_missing_tool_is_named():
  with pytest.raises(RuntimeError, match="llvm-mca-nope"):
    mca.block_throughput([ADDS], llvm_mca="llvm-mca-nope")
