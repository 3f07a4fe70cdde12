"""Faults become structured failures with the right reason; nothing leaks; the next
compile works. Stand-in compilers: testdata/fake_compilers/fake_compiler.py."""
import os
import tempfile
import time

import numpy as np
import pytest

from mlgo import env

import envtestlib as lib

FAKE = lib.data_path("testdata/fake_compilers/fake_compiler.py")
TIMEOUT = 1.5

# mode -> (expected reason fragment, max seconds)
CASES = {
    "hang": ("timeout after 1.5s", TIMEOUT + 2),
    "never_opens": ("never opened the channel", TIMEOUT + 2),
    "fork_hang": ("timeout after 1.5s", TIMEOUT + 3),
    "crash": ("killed by SIGSEGV", TIMEOUT),
    "garbage": ("malformed stream", TIMEOUT),
    "early_exit": ("early EOF", TIMEOUT),
    "reject": ("before opening the interactive channel", TIMEOUT),
}


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
  monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
  return tmp_path


def _fake_module():
  return env.SourceModule(name="fake/module", bc_path="/nonexistent.bc", cc1_flags=["-cc1"])


@pytest.mark.parametrize("mode", sorted(CASES))
def test_fault_is_reported_and_cleaned_up(private_tmp, mode):
  want, max_seconds = CASES[mode]
  pidfile = private_tmp / "pids.txt"
  t0 = time.monotonic()
  res = env.compile_module(_fake_module(), "inlining", env.DefaultPolicy(), tool_path=FAKE,
                           timeout=TIMEOUT,
                           extra_flags=[f"--fake_mode={mode}", f"--pidfile={pidfile}"])
  elapsed = time.monotonic() - t0
  assert not res.ok
  assert res.module_name == "fake/module"
  assert want in res.reason, res.reason
  assert elapsed < max_seconds, (mode, elapsed)
  assert res.trajectories == []
  # Every process the stand-in made is gone, no child of ours is left, no FIFO or
  # temporary directory remains.
  pids = [int(x) for x in pidfile.read_text().split()]
  assert pids and lib.alive(pids) == []
  assert lib.live_children() == []
  assert lib.env_dirs(str(private_tmp)) == []
  # The next compile works.
  ok = env.compile_module(lib.inlining_module("calls.c", 22), "inlining", env.DefaultPolicy())
  assert ok.ok and ok.decisions == 14
  assert lib.env_dirs(str(private_tmp)) == []


def test_reject_reason_carries_the_compiler_message(private_tmp):
  res = env.compile_module(_fake_module(), "inlining", env.DefaultPolicy(), tool_path=FAKE,
                           timeout=30, extra_flags=["--fake_mode=reject"])
  assert not res.ok
  assert "status 1" in res.reason and "Invalid bitcode" in res.reason


def test_llvm19_rejects_llvm22_bitcode_fast(private_tmp):
  """LLVM 19 cannot read LLVM 22 bitcode and never opens the channel: fail at once."""
  m = lib.llc_module("pressure.c", 22)
  t0 = time.monotonic()
  res = env.compile_module(m, "regalloc_eviction", env.DefaultPolicy(), llvm_version=19,
                           timeout=60)
  assert not res.ok
  assert time.monotonic() - t0 < 10
  assert "before opening the interactive channel" in res.reason
  assert "LLVM 19" in res.reason or "Unknown attribute" in res.reason or \
      "Invalid" in res.reason, res.reason
  assert lib.env_dirs(str(private_tmp)) == []


def test_crash_keeps_decisions_made_count(private_tmp):
  res = env.compile_module(_fake_module(), "inlining", env.DefaultPolicy(), tool_path=FAKE,
                           timeout=TIMEOUT, extra_flags=["--fake_mode=crash"])
  assert not res.ok and res.decisions == 1


def test_policy_exception_is_a_failure_not_a_crash(private_tmp):
  class Broken:
    def act(self, obs):
      raise ZeroDivisionError("boom")
  res = env.compile_module(lib.inlining_module("calls.c", 22), "inlining", Broken())
  assert not res.ok and "policy raised ZeroDivisionError: boom" in res.reason
  assert lib.live_children() == [] and lib.env_dirs(str(private_tmp)) == []


def test_real_compile_timeout_kills_the_compiler(private_tmp):
  """A policy slower than the deadline: the real clang is killed, reason timeout."""
  class Slow:
    def act(self, obs):
      time.sleep(0.2)
      return np.int64(0)
  res = env.compile_module(lib.inlining_module("calls.c", 22), "inlining", Slow(), timeout=0.5)
  assert not res.ok and res.reason.startswith("timeout"), res.reason
  assert lib.live_children() == [] and lib.env_dirs(str(private_tmp)) == []


def test_wrong_problem_for_module_is_structured(private_tmp):
  m = lib.llc_module("pressure.c", 22)
  res = env.compile_module(m, "inlining", env.DefaultPolicy())
  assert not res.ok and "needs a module with clang cc1 flags" in res.reason


def test_fifo_directory_is_private(private_tmp, monkeypatch):
  seen = []
  real_mkfifo = os.mkfifo
  def spy(path, mode=0o666, *a, **k):
    seen.append(os.stat(os.path.dirname(path)).st_mode & 0o777)
    return real_mkfifo(path, mode, *a, **k)
  monkeypatch.setattr(os, "mkfifo", spy)
  res = env.compile_module(lib.inlining_module("calls.c", 22), "inlining", env.DefaultPolicy())
  assert res.ok
  assert seen == [0o700, 0o700]


def test_unusable_policy_action_is_a_failure(private_tmp):
  class NoneAction:
    def act(self, obs):
      return None
  res = env.compile_module(lib.inlining_module("calls.c", 22), "inlining", NoneAction())
  assert not res.ok and "unusable action" in res.reason
  assert lib.live_children() == [] and lib.env_dirs(str(private_tmp)) == []


def test_silent_compiler_killed_by_the_watchdog_first_reads_as_never_opened(private_tmp):
  """The race CI once lost: the deadline passes and the watchdog kills a compiler that
  never wrote before open_channel looks. It must still say the channel never opened."""
  from mlgo.env import process as process_lib
  base = str(private_tmp / "channel")
  os.mkfifo(base + ".out", 0o600)
  os.mkfifo(base + ".in", 0o600)
  proc = process_lib.Process(["sleep", "30"], str(private_tmp / "stderr.txt"),
                             time.monotonic() + 0.2)
  proc.proc.wait(timeout=10)  # the watchdog's kill, not ours
  assert proc.timed_out
  rfd, wfd, early_rc, silent = process_lib.open_channel(base, proc, time.monotonic() - 1)
  os.close(rfd)
  os.close(wfd)
  assert early_rc is None and silent
  proc.finish(time.monotonic())
