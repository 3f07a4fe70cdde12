"""SIGKILL the trainer mid-iteration, rerun the same command: it resumes, losing at most
the iteration in flight."""
import json
import os
import pathlib
import subprocess
import sys

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
  return [r["iteration"] for r in testing.logged_records(out)]


def test_sigkill_mid_iteration_then_resume(tmp_path):
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, heldout=("matrix",))
  out = tmp_path / "run"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  proc = subprocess.Popen(_cmd(corpus, out, 50), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, start_new_session=True)
  testing.sigkill_after_first_checkpoint(proc, out, timeout=240)
  done_before = _iterations_logged(out)
  k = len(done_before)
  assert k >= 1 and done_before == list(range(1, k + 1))
  ckpt = testing.checkpoint_iteration(out)
  # The record is written before the checkpoint, so the log may be one ahead of it.
  assert ckpt in (k - 1, k) and ckpt >= 1
  # What a kill between the record and the checkpoint leaves (a record the checkpoint
  # lacks, the last one cut short), and what a kill during a checkpoint write leaves:
  # the resumed run must drop both.
  with open(out / "log.jsonl", "a") as f:
    f.write(json.dumps({"iteration": k + 1, "left_by_the_kill": True}) + "\n")
    f.write('{"iteration": ')
  (out / "checkpoint.tmpkilled" / "tf").mkdir(parents=True, exist_ok=True)
  (out / "checkpoint.tmpkilled" / "state.json").write_text("{")
  target = ckpt + 1
  r = subprocess.run(_cmd(corpus, out, target), env=env, capture_output=True, text=True,
                     timeout=300)
  assert r.returncode == 0, r.stderr[-3000:]
  assert f"resumed from {out / 'checkpoint'} at iteration {ckpt}" in r.stderr
  assert _iterations_logged(out) == list(range(1, target + 1))
  assert "left_by_the_kill" not in (out / "log.jsonl").read_text()
  assert testing.checkpoint_iteration(out) == target
  assert (out / "policies" / f"iter-{target:05d}" / "policy.json").exists()
  assert not list(out.glob("checkpoint.tmp*"))
