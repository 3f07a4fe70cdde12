"""tools/compile_one: decisions and reward as JSON lines; --record writes the raw stream."""
import json
import subprocess

import pytest

from mlgo import log

import envtestlib as lib


def tool():
  return str(lib.runfile("tools/compile_one"))


def run(*args):
  return subprocess.run([tool(), *args], capture_output=True, text=True, timeout=120)


def test_inlining_from_source_with_record(tmp_path):
  rec = tmp_path / "s.bin"
  p = run("--problem=inlining", f"--module={lib.program('calls.c')}", f"--record={rec}")
  assert p.returncode == 0, p.stderr
  lines = [json.loads(l) for l in p.stdout.splitlines()]
  *decisions, summary = lines
  assert summary["ok"] and summary["decisions"] == 14 == len(decisions)
  assert summary["reward"]["text_size"] > 0
  assert all(d["action"] == d["default"] for d in decisions)
  (ctx,) = log.read_log(rec.read_bytes())
  assert len(ctx) == 14


def test_eviction_random_policy_on_bitcode(tmp_path):
  m = lib.llc_module("pressure.c", 22)
  p = run("--problem=regalloc_eviction", f"--module={m.bc_path}", "--policy=random",
          "--quiet", "--llc_flags=-O2")
  assert p.returncode == 0, p.stderr
  summary = json.loads(p.stdout.splitlines()[-1])
  assert summary["ok"] and summary["decisions"] > 0 and summary["corrections"] == 0
  assert set(summary["reward"]["functions"]) >= {"churn", "blend"}


def test_inlining_bitcode_needs_cmd():
  m = lib.llc_module("pressure.c", 22)
  p = run("--problem=inlining", f"--module={m.bc_path}")
  assert p.returncode == 2 and "needs --cmd" in p.stderr


def test_failure_exit_code_and_reason(tmp_path):
  bad = tmp_path / "bad.bc"
  bad.write_bytes(b"not bitcode")
  p = run("--problem=regalloc_priority", f"--module={bad}", "--quiet")
  assert p.returncode == 1
  summary = json.loads(p.stdout.splitlines()[-1])
  assert not summary["ok"] and "before opening the interactive channel" in summary["reason"]


def test_eviction_guarded_writes_the_better_per_function(tmp_path):
  """--guarded with the shipped eviction model: each function's guarded cost is the
  lower of its default and policy costs, and the object is written."""
  m = lib.llc_module("pressure.c", 22)
  model = lib.shipped_eviction_model()
  out = tmp_path / "g.o"
  p = run("--problem=regalloc_eviction", f"--module={m.bc_path}", f"--policy={model}",
          "--guarded", f"--output={out}", "--llc_flags=-O2")
  assert p.returncode == 0, p.stderr
  *funcs, summary = [json.loads(l) for l in p.stdout.splitlines()]
  assert summary["ok"] and summary["guarded"] and summary["mismatches"] == []
  assert funcs and all(f["guarded"] == min(f["default"], f["policy"]) for f in funcs)
  assert summary["guarded_total"] == pytest.approx(sum(f["guarded"] for f in funcs))
  assert out.read_bytes()[:4] == b"\x7fELF"


def test_guarded_refuses_a_random_policy(tmp_path):
  m = lib.llc_module("pressure.c", 22)
  p = run("--problem=regalloc_eviction", f"--module={m.bc_path}", "--policy=random",
          "--guarded")
  assert p.returncode == 2 and "deterministic" in p.stderr
