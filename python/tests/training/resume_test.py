"""SIGKILL the trainer mid-iteration, rerun the same command: it resumes, losing at most
the iteration in flight."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

from mlgo.training import testing

PROGRAMS = sorted((pathlib.Path(__file__).parent / "programs").glob("*.c*"))


def _cmd(corpus, out, iterations):
  return [sys.executable, "-m", "mlgo.training.cli", "--problem=inlining",
          f"--corpus={corpus}", f"--output={out}", f"--iterations={iterations}",
          "--gin_files=configs/inlining.gin",
          "--gin_bindings=PPOConfig.modules_per_iteration=3",
          "--gin_bindings=PPOConfig.samples_per_module=2",
          "--gin_bindings=PPOConfig.trace_modules=4",
          "--gin_bindings=PPOConfig.num_epochs=1"]


def _iterations_logged(out):
  p = out / "log.jsonl"
  if not p.exists():
    return []
  return [json.loads(l)["iteration"] for l in p.read_text().splitlines() if l.strip()]


def test_sigkill_mid_iteration_then_resume(tmp_path):
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, heldout=("matrix",))
  out = tmp_path / "run"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  proc = subprocess.Popen(_cmd(corpus, out, 50), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, start_new_session=True)
  try:
    deadline = time.monotonic() + 240
    while len(_iterations_logged(out)) < 1 and time.monotonic() < deadline:
      assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
      time.sleep(0.1)
    assert _iterations_logged(out) == [1]
    time.sleep(0.5)  # now inside iteration 2 (collection or training)
  finally:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
  done_before = _iterations_logged(out)
  assert done_before in ([1], [1, 2])
  state = json.loads((out / "checkpoint" / "state.json").read_text())
  assert state["iteration"] == done_before[-1]
  target = done_before[-1] + 1
  # What a kill during a checkpoint write leaves (the kill above may or may not hit one):
  # the resumed run must discard it.
  (out / "checkpoint.tmpkilled" / "tf").mkdir(parents=True, exist_ok=True)
  (out / "checkpoint.tmpkilled" / "state.json").write_text("{")
  r = subprocess.run(_cmd(corpus, out, target), env=env, capture_output=True, text=True,
                     timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  assert f"resumed from {out / 'checkpoint'} at iteration {done_before[-1]}" in r.stderr
  assert _iterations_logged(out) == list(range(1, target + 1))
  state = json.loads((out / "checkpoint" / "state.json").read_text())
  assert state["iteration"] == target
  assert (out / "policies" / f"iter-{target:05d}" / "policy.json").exists()
  assert not list(out.glob("checkpoint.tmp*"))
