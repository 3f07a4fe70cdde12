"""The regalloc compile loop: corrections of invalid answers, costs, failures."""
import numpy as np

from mlgo.regalloc import llc_run

FLAGS = ["-O2", "-relocation-model=pic"]


def test_adversarial_policy_never_reaches_llc(opt_bc):
  seen = []

  def adversary(obs):
    mask = obs["mask"].reshape(-1)
    seen.append(mask.copy())
    bad = np.flatnonzero(mask == 0)
    # Out of range, negative, or a masked column: each must be corrected.
    return [40, -3, int(bad[0]) if len(bad) else 99][len(seen) % 3]

  for name, bc in opt_bc.items():
    seen.clear()
    res = llc_run.run_llc(bc, FLAGS, llc_run.EVICTION, adversary, timeout=120)
    assert res.ok, (name, res.reason)   # llc would crash on an invalid index
    assert res.decisions == len(seen) > 0
    assert res.corrections == res.decisions


def test_policy_changes_cost_and_default_matches_plain(opt_bc):
  bc = opt_bc["mixer"]
  plain = llc_run.run_llc(bc, FLAGS, llc_run.EVICTION, None, timeout=120)
  assert plain.ok and plain.functions["mixer"] > 0
  never = llc_run.run_llc(bc, FLAGS, llc_run.EVICTION, lambda o: 32, timeout=120)
  assert never.ok
  assert never.functions["mixer"] != plain.functions["mixer"]
  traced = llc_run.run_llc(bc, FLAGS, llc_run.EVICTION, None, trace=True, timeout=120)
  assert traced.functions == plain.functions


def test_priority_policy_in_the_loop(opt_bc):
  res = llc_run.run_llc(opt_bc["stencil"], FLAGS, llc_run.PRIORITY,
                        lambda o: float(o["li_size"].reshape(-1)[0]), timeout=120)
  assert res.ok and res.decisions > 0 and res.corrections == 0
  nan = llc_run.run_llc(opt_bc["stencil"], FLAGS, llc_run.PRIORITY, lambda o: float("nan"),
                        timeout=120)
  assert nan.ok and nan.corrections == nan.decisions


def test_unreadable_bitcode_fails_fast(tmp_path):
  bad = tmp_path / "bad.bc"
  bad.write_bytes(b"BC\xc0\xde garbage")
  res = llc_run.run_llc(str(bad), FLAGS, llc_run.EVICTION, lambda o: 32, timeout=30)
  assert not res.ok and "llc" in res.reason and res.seconds < 30


def test_remark_costs_weighting():
  text = """--- !Missed
Pass:            regalloc
Name:            SpillReloadCopies
Function:        f
Args:
  - NumSpills:       '2'
  - TotalSpillsCost: '3.000000e+00'
  - NumReloads:      '1'
  - TotalReloadsCost: '2.000000e+00'
  - TotalFoldedReloadsCost: '1.000000e+00'
  - TotalCopiesCost: '1.000000e+01'
...
--- !Missed
Pass:            regalloc
Name:            LoopSpillReloadCopies
Function:        f
Args:
  - TotalSpillsCost: '1.000000e+02'
...
"""
  costs = llc_run.remark_costs(text)
  assert costs == {"f": 3.0 * 1 + 2.0 * 4 + 1.0 * 4 + 10.0 * 0.2}


def test_killed_driver_leaves_no_llc(opt_bc, tmp_path):
  """SIGKILL of the process driving llc must not leave llc spinning on the channel."""
  import os
  import signal
  import subprocess
  import sys
  import time
  marker = tmp_path / "started"
  code = f"""
import pathlib, time
from mlgo.regalloc import llc_run
def stall(obs):
  pathlib.Path({str(marker)!r}).write_text("x")
  time.sleep(600)
llc_run.run_llc({opt_bc['mixer']!r}, ["-O2"], llc_run.EVICTION, stall)
"""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
  p = subprocess.Popen([sys.executable, "-c", code], env=env)
  for _ in range(300):
    if marker.exists():
      break
    time.sleep(0.1)
  assert marker.exists()
  out = subprocess.run(["pgrep", "-f", opt_bc["mixer"]], capture_output=True, text=True)
  assert out.stdout.strip()  # llc is running, waiting for our answer
  p.send_signal(signal.SIGKILL)
  p.wait()
  for _ in range(50):
    out = subprocess.run(["pgrep", "-f", opt_bc["mixer"]], capture_output=True, text=True)
    if not out.stdout.strip():
      break
    time.sleep(0.1)
  assert not out.stdout.strip()
