"""mlgo.ir2native.dataset.parse_cost_model: opt's print<cost-model> output, recorded and
live from opt-22."""
import subprocess

from mlgo.ir2native import dataset
from mlgo.util import toolchain

import i2ntestlib as lib

# As opt-22 -passes=print<cost-model> -cost-kind=code-size prints it (on stderr); an
# invoke's continuation lines and a function without instructions included.
RECORDED = """\
Printing analysis 'Cost Model Analysis' for function 'f':
Cost Model: Found an estimated cost of 1 for instruction:   %x = add i32 %a, %b
Cost Model: Found an estimated cost of 0 for instruction:   %p = getelementptr inbounds nuw i8, ptr %q, i64 8
Cost Model: Found an estimated cost of 2 for instruction:   store i32 %x, ptr %p, align 4
Cost Model: Found an estimated cost of 1 for instruction:   ret i32 %x
Printing analysis 'Cost Model Analysis' for function '_ZN1S3getEv':
Cost Model: Found an estimated cost of 1 for instruction:   invoke void @g()
          to label %ok unwind label %lp
Cost Model: Found an estimated cost of 0 for instruction:   %l = landingpad { ptr, i32 }
          cleanup
Cost Model: Found an estimated cost of Invalid for instruction:   %v = call <vscale x 4 x i32> @h()
Cost Model: Found an estimated cost of 1 for instruction:   ret void
Printing analysis 'Cost Model Analysis' for function 'empty':
"""


def test_recorded_output():
  got = dataset.parse_cost_model(RECORDED)
  assert got == {"f": (4, 4), "_ZN1S3getEv": (4, 2), "empty": (0, 0)}


def test_cost_kind_all_format():
  # -cost-kind=all prints every kind; the code-size figure is the one taken.
  text = ("Printing analysis 'Cost Model Analysis' for function 'g':\n"
          "Cost Model: Found costs of RThru:1 CodeSize:3 Lat:1 SizeLat:1 for:   %y = mul i32 %a, %b\n"
          "Cost Model: Found costs of RThru:0 CodeSize:1 Lat:1 SizeLat:1 for:   ret i32 %y\n")
  assert dataset.parse_cost_model(text) == {"g": (2, 4)}


def test_lines_before_any_function_are_ignored():
  text = ("warning: something\n"
          "Cost Model: Found an estimated cost of 5 for instruction:   ret void\n")
  assert dataset.parse_cost_model(text) == {}


def test_live_opt22_output(tmp_path):
  tc = toolchain.toolchain(lib.LLVM)
  bc = tmp_path / "calls.bc"
  subprocess.run([tc.clang, "-O1", "-emit-llvm", "-c", lib.program("calls.c"), "-o",
                  str(bc)], check=True, capture_output=True, timeout=120)
  out = subprocess.run([tc.opt, "-disable-output", "-passes=print<cost-model>",
                        "-cost-kind=code-size", str(bc)], check=True, capture_output=True,
                       text=True, timeout=120)
  text = out.stdout + out.stderr
  got = dataset.parse_cost_model(text)
  assert {"vec_push", "energy", "window_max", "run"} <= set(got), text[:500]
  for fn, (n, cost) in got.items():
    assert n > 0 and cost > 0, (fn, n, cost)
  # Every cost line of the output is counted once, under some function.
  assert sum(n for n, _ in got.values()) == text.count("Cost Model: Found")
  # The instruction count is the function's IR instruction count (llvm-dis agrees).
  ll = subprocess.run([tc.llvm_dis, str(bc), "-o", "-"], check=True, capture_output=True,
                      text=True, timeout=60).stdout
  body = ll.split("define dso_local i32 @run(", 1)[1].split("\n}\n", 1)[0]
  insts = [l for l in body.splitlines()[1:]
           if l.startswith("  ") and not l.startswith("   ") and l.strip()]
  assert got["run"][0] == len(insts)
