"""mlgo.profiles.loops: loop nests of machine code (a hand-written disassembly with
known nesting) and the spill code inside them, against llc's own per-loop remarks on a
real object."""
import pathlib
import re
import subprocess

import numpy as np
import pytest

from mlgo.profiles import bbmap, blocks, loops
from mlgo.training import testing
from mlgo.util.toolchain import toolchain

# f: an outer loop (0x10-0x30) around an inner one (0x18-0x20), padding after the ret;
# g: straight-line code with a forward branch; h: a loop entered from a jump table
# (an indirect jump adds no edge, so its blocks are unreachable: depth 0).
DISASSEMBLY = """
0000000000000000 <f>:
       0: 31 c0                        \txorl\t%eax, %eax
       2: 85 f6                        \ttestl\t%esi, %esi
       4: 7e 2e                        \tjle\t0x34 <f+0x34>
      10: 48 8b 04 24                  \tmovq\t(%rsp), %rax
      18: 48 89 44 24 08               \tmovq\t%rax, 0x8(%rsp)
      1d: 48 03 44 24 10               \taddq\t0x10(%rsp), %rax
      20: 75 f6                        \tjne\t0x18 <f+0x18>
      22: 48 89 04 24                  \tmovq\t%rax, (%rsp)
      30: 75 de                        \tjne\t0x10 <f+0x10>
      32: 48 8b 04 24                  \tmovq\t(%rsp), %rax
      34: c3                           \tretq
      35: 90                           \tnop

0000000000000040 <g>:
      40: 85 f6                        \ttestl\t%esi, %esi
      42: 74 02                        \tje\t0x46 <g+0x6>
      44: 48 89 04 24                  \tmovq\t%rax, (%rsp)
      46: c3                           \tretq

0000000000000050 <h>:
      50: ff 24 c5 00 00 00 00         \tjmpq\t*(,%rax,8)
      57: 48 89 04 24                  \tmovq\t%rax, (%rsp)
      5b: eb fa                        \tjmp\t0x57 <h+0x7>
"""


def _by_function(text):
  out = {}
  for b in blocks.parse_disassembly(text):
    out.setdefault(b.function, []).append(b)
  return out


def test_loop_depths_of_a_known_nest():
  fns = _by_function(DISASSEMBLY)
  f = fns["f"]
  assert [b.start for b in f] == [0x0, 0x10, 0x18, 0x22, 0x32, 0x34, 0x35]
  assert loops.loop_depths(f) == [0, 1, 2, 1, 0, 0, 0]
  assert loops.loop_depths(fns["g"]) == [0, 0, 0]
  assert loops.loop_depths(fns["h"]) == [0, 0]
  assert loops.loop_depths([]) == []


def test_spill_code_in_loops_counts_each_depth(tmp_path, monkeypatch):
  obj = tmp_path / "x.o"
  obj.write_bytes(b"")
  monkeypatch.setattr(blocks.subprocess, "run",
                      lambda *a, **k: subprocess.CompletedProcess(a, 0, DISASSEMBLY, ""))
  got = loops.spill_code_in_loops(str(obj))
  # Depth >= 1: the outer loop's reload (0x10) and spill (0x22), the inner loop's spill
  # and folded reload; depth >= 2: the inner loop's two. Outside loops nothing counts
  # (f's reload at 0x32, g's spill, h's unreachable one).
  assert got == {"f": {"loop_depth_1": 4, "loop_depth_2": 2}, "g": {}, "h": {}}


def test_an_object_with_only_data_has_no_loops(tmp_path):
  src, obj = tmp_path / "tables.c", tmp_path / "tables.o"
  src.write_text("const int table[4] = {1, 2, 3, 4};\n")
  subprocess.run([toolchain(22).clang, "-O2", "-c", str(src), "-o", str(obj)], check=True)
  assert loops.spill_code_in_loops(str(obj)) == {}


def test_spill_code_in_loops_is_llcs_own_count(tmp_path):
  """On a real object, a function with one loop: the spill code our reading finds in it
  is what llc's greedy allocator reports for that loop (its LoopSpillReloadCopies
  remark), and the functions' straight-line spill code is not counted."""
  src = pathlib.Path(testing.data_path("testdata/programs/pressure.c"))
  tc = toolchain(22)
  bc, obj, remarks = tmp_path / "p.bc", tmp_path / "p.o", tmp_path / "r.yaml"
  subprocess.run([tc.clang, "-O2", "-c", "-emit-llvm", str(src), "-o", str(bc)], check=True)
  subprocess.run([tc.llc, "-O2", str(bc), "-filetype=obj", "-o", str(obj),
                  f"-pass-remarks-output={remarks}", "-pass-remarks-filter=regalloc"],
                 check=True)
  want = {}
  for doc in remarks.read_text().split("\n---"):
    if "Name:            LoopSpillReloadCopies" not in doc:
      continue
    fn = re.search(r"Function:\s+(\S+)", doc).group(1)
    want[fn] = sum(int(n) for k, n in re.findall(r"- Num(\w+):\s+'(\d+)'", doc)
                   if k in ("Spills", "Reloads", "FoldedSpills", "FoldedReloads"))
  got = loops.spill_code_in_loops(str(obj))
  assert want and want["churn"] > 10
  assert {fn: c.get("loop_depth_1", 0) for fn, c in got.items() if fn in want} == want


def test_unreadable_object_names_it(tmp_path):
  bad = tmp_path / "garbage.o"
  bad.write_bytes(b"not an object")
  with pytest.raises(ValueError, match="garbage.o"):
    loops.spill_code_in_loops(str(bad))


def test_worst_case_costs_are_the_corners_of_every_frequency_error():
  # Straight-line 1, depth 1: 2, depth 2: 3. Factor 2: each level's trips x2 or /2,
  # the inner level's scale on top of the outer one's.
  got = loops.worst_case_costs([1.0, 2.0, 3.0], 2.0)
  assert got == [1 + 0.5 * 2 + 0.25 * 3, 1 + 2 * 2 + 1 * 3, 1 + 0.5 * 2 + 1 * 3,
                 1 + 2 * 2 + 4 * 3]
  assert loops.worst_case_costs([5.0], 4.0) == [5.0]
  # The claim the rule rests on: for any two sides, the difference under any scales
  # within [1/f, f] is never larger than its largest value at the corners.
  rng = np.random.default_rng(0)
  for _ in range(50):
    a, b = rng.uniform(0, 10, 4), rng.uniform(0, 10, 4)
    corners = max(x - y for x, y in zip(loops.worst_case_costs(a, 3.0),
                                        loops.worst_case_costs(b, 3.0)))
    for s in rng.uniform(1 / 3, 3, (20, 3)):
      scale = np.cumprod(s)
      inside = (a[0] - b[0]) + float(np.dot(scale, a[1:] - b[1:]))
      assert inside <= corners + 1e-9


def test_spill_cost_by_depth_weighs_llcs_blocks_by_frequency(tmp_path):
  """A real llc object with its address map: churn's spill code sits in its loop
  (depth 1), weighted by the loop's estimated frequency; across_calls keeps its values
  in callee-saved registers across the call, so its loop has none. Without the map the
  reading says which file lacks it."""
  src = pathlib.Path(testing.data_path("testdata/programs/pressure.c"))
  tc = toolchain(22)
  bc, obj, plain = tmp_path / "p.bc", tmp_path / "p.o", tmp_path / "plain.o"
  subprocess.run([tc.clang, "-O2", "-c", "-emit-llvm", str(src), "-o", str(bc)], check=True)
  subprocess.run([tc.llc, "-O2", str(bc), "-filetype=obj", "-o", str(obj),
                  *bbmap.FLAGS_LLC], check=True)
  got = loops.spill_cost_by_depth(str(obj), max_depth=3)
  assert set(got) >= {"churn", "blend", "across_calls"}
  assert all(len(c) == 4 for c in got.values())
  churn = got["churn"]
  in_loop = [b for b in blocks.disassemble(str(obj)) if b.function == "churn"
             and b.rel_freq and b.rel_freq > 1.0]
  assert in_loop and churn[1] > 0 and churn[2] == churn[3] == 0
  # Every block's spill code counted once: the sum over depths is the frequency-weighted
  # total of all churn's blocks.
  total = sum(b.rel_freq * sum(w * b.features()[k]
                               for k, w in loops.SPILL_CODE_WEIGHTS.items())
              for b in blocks.disassemble(str(obj)) if b.function == "churn")
  assert sum(churn) == pytest.approx(total)
  subprocess.run([tc.llc, "-O2", str(bc), "-filetype=obj", "-o", str(plain)], check=True)
  with pytest.raises(ValueError, match="plain.o: no basic-block address map"):
    loops.spill_cost_by_depth(str(plain))
