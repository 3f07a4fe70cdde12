"""llc problems through the shared environment: the reference compile (no channel), the
tracer plugin's labels, corrections of invalid answers, remarks costs, failures."""
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from mlgo import env
from mlgo.env import tracer
from mlgo.problems import regalloc
from mlgo.util.toolchain import toolchain

import envtestlib as lib

FLAGS = ["-O2", "-relocation-model=pic"]
DATA = pathlib.Path(__file__).resolve().parent / "regalloc_programs"
PROBLEMS = ("regalloc_eviction", "regalloc_priority")


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
  """name -> LlcModule of each test program's optimized (-O2) bitcode."""
  d = tmp_path_factory.mktemp("bc")
  out = {}
  for src in sorted(DATA.glob("*.c")):
    bc = d / (src.stem + ".bc")
    subprocess.run([toolchain(22).clang, "-O2", "-c", "-emit-llvm", str(src), "-o", str(bc)],
                   check=True)
    out[src.stem] = env.LlcModule(src.stem, str(bc), FLAGS)
  return out


def _plain(m, out):
  subprocess.run([toolchain(22).llc] + FLAGS + ["-filetype=obj", m.bc_path, "-o", str(out)],
                 check=True)
  return out.read_bytes()


def test_plugin_loaded_default_mode_is_byte_identical(modules, tmp_path):
  so = tracer.plugin_path()
  for name, m in modules.items():
    plain = _plain(m, tmp_path / f"{name}.plain.o")
    log = tmp_path / f"{name}.evict.log"
    subprocess.run([toolchain(22).llc, f"-load={so}", f"-regalloc-evict-trace-log={log}",
                    f"-regalloc-priority-trace-log={tmp_path / 'p.log'}"] + FLAGS +
                   ["-filetype=obj", m.bc_path, "-o", str(tmp_path / f"{name}.traced.o")],
                   check=True)
    assert (tmp_path / f"{name}.traced.o").read_bytes() == plain, name
    assert log.read_bytes().startswith(b'{"features":[{"name":"default_index"')


@pytest.mark.parametrize("problem", PROBLEMS)
def test_trace_is_the_default_compile_and_labels_every_decision(modules, tmp_path, problem):
  for name, m in modules.items():
    plain = _plain(m, tmp_path / f"{name}.plain.o")
    obj = tmp_path / f"{name}.{problem}.o"
    res = env.compile_module(m, problem, None, trace=True, output_path=str(obj), timeout=120)
    assert res.ok, res.reason
    assert obj.read_bytes() == plain, (problem, name)
    assert res.decisions > 0 and res.trajectories
    ref = env.compile_module(m, problem, env.CompilerDefault(), timeout=120)
    assert ref.ok and ref.decisions == 0 and not ref.trajectories
    assert res.reward["functions"] == {**{t.context: 0.0 for t in res.trajectories},
                                       **ref.reward["functions"]}
    for t in res.trajectories:
      assert t.default_actions is not None and len(t.default_actions) == len(t.actions)
      if problem == "regalloc_eviction":
        d = t.default_actions
        mask = t.features["mask"].reshape(len(d), -1)
        ok = d >= 0   # -1: the default picked a register outside the columns
        assert ok.mean() > 0.5
        assert (mask[np.flatnonzero(ok), d[ok]] == 1).all()
      else:
        assert (t.default_actions > 0).all()


def test_reference_policy_by_problem():
  assert isinstance(env.reference_policy("inlining"), env.DefaultPolicy)
  assert isinstance(env.reference_policy("regalloc_eviction"), env.CompilerDefault)


def test_adversarial_policy_never_reaches_llc(modules):
  class Adversary:
    def __init__(self):
      self.n = 0

    def act(self, obs):
      mask = obs["mask"].reshape(-1)
      self.n += 1
      bad = np.flatnonzero(mask == 0)
      # Out of range, negative, or a masked column: each must be corrected.
      return np.int64([40, -3, int(bad[0]) if len(bad) else 99][self.n % 3])

  for name, m in modules.items():
    a = Adversary()
    res = env.compile_module(m, "regalloc_eviction", a, timeout=120)
    assert res.ok, (name, res.reason)   # llc would crash on an invalid index
    assert res.decisions == a.n > 0
    assert res.corrections == res.decisions


def test_policy_changes_cost(modules):
  m = modules["mixer"]
  plain = env.compile_module(m, "regalloc_eviction", env.CompilerDefault(), timeout=120)
  assert plain.ok and plain.reward["functions"]["mixer"] > 0

  class Never:
    def act(self, obs):
      return np.int64(regalloc.CANDIDATE_COLUMN)

  never = env.compile_module(m, "regalloc_eviction", Never(), timeout=120)
  assert never.ok
  assert never.reward["functions"]["mixer"] != plain.reward["functions"]["mixer"]


def test_unreadable_bitcode_fails_fast(tmp_path):
  bad = tmp_path / "bad.bc"
  bad.write_bytes(b"BC\xc0\xde garbage")
  res = env.compile_module(env.LlcModule("bad", str(bad), FLAGS), "regalloc_eviction",
                           env.CompilerDefault(), timeout=30)
  assert not res.ok and "exited with status" in res.reason and res.seconds < 30
  res = env.compile_module(env.LlcModule("bad", str(bad), FLAGS), "regalloc_eviction",
                           None, trace=True, timeout=30)
  assert not res.ok and res.seconds < 30


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
  r = regalloc.reward_from_remarks(text, ["g"])
  assert r["functions"] == {"f": 3.0 * 1 + 2.0 * 4 + 1.0 * 4 + 10.0 * 0.2, "g": 0.0}
  from mlgo.problems import get_problem
  p = get_problem("regalloc_eviction")
  assert p.scores("m", r) == {"m::f": r["functions"]["f"], "m::g": 0.0}


def test_killed_driver_leaves_no_llc(modules, tmp_path):
  """SIGKILL of the process driving llc must not leave llc spinning on the channel."""
  marker = tmp_path / "started"
  bc = modules["mixer"].bc_path
  code = f"""
import pathlib, time
from mlgo import env
class Stall:
  def act(self, obs):
    pathlib.Path({str(marker)!r}).write_text("x")
    time.sleep(600)
env.compile_module(env.LlcModule("mixer", {bc!r}, ["-O2"]), "regalloc_eviction", Stall())
"""
  penv = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
  p = subprocess.Popen([sys.executable, "-c", code], env=penv)
  for _ in range(300):
    if marker.exists():
      break
    time.sleep(0.1)
  assert marker.exists()
  out = subprocess.run(["pgrep", "-f", bc], capture_output=True, text=True)
  assert out.stdout.strip()  # llc is running, waiting for our answer
  p.send_signal(signal.SIGKILL)
  p.wait()
  for _ in range(50):
    out = subprocess.run(["pgrep", "-f", bc], capture_output=True, text=True)
    if not out.stdout.strip():
      break
    time.sleep(0.1)
  assert not out.stdout.strip()


def test_shipped_eviction_policy_runs_in_the_loop(modules):
  """The shipped model loads as the problem's network and answers llc with valid
  columns only (no corrections), changing the allocation of the test programs."""
  from mlgo.policy import policy_io
  pol = policy_io.load_policy(lib.shipped_eviction_model())
  assert pol.problem == "regalloc_eviction"
  assert pol.spec["architecture"]["type"] == "regalloc_column_scorer"
  changed = 0
  for m in modules.values():
    res = env.compile_module(m, "regalloc_eviction", pol, timeout=120)
    ref = env.compile_module(m, "regalloc_eviction", env.CompilerDefault(), timeout=120)
    assert res.ok and res.decisions > 0 and res.corrections == 0, res.reason
    changed += res.reward["functions"] != ref.reward["functions"]
  assert changed >= 1
