"""Training on a Ray cluster (`--workers=ray --ray_address=...`): SIGKILL the trainer
mid-iteration, run the same command again: it resumes on the same cluster, and the log
shows the compiles spread over both nodes."""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

from mlgo.training import testing
from mlgo.workers import ray_cluster

PROGRAMS = sorted((pathlib.Path(__file__).parents[1] / "training" / "programs").glob("*.c*"))


def _cmd(corpus, out, iterations, address):
  return [sys.executable, "-m", "mlgo.training.cli", "--problem=inlining",
          f"--corpus={corpus}", f"--output={out}", f"--iterations={iterations}",
          "--workers=ray", f"--ray_address={address}",
          "--gin_files=configs/inlining.gin",
          "--gin_bindings=PPOConfig.modules_per_iteration=3",
          "--gin_bindings=PPOConfig.samples_per_module=2",
          "--gin_bindings=PPOConfig.trace_modules=4",
          "--gin_bindings=PPOConfig.num_epochs=1"]


def _log(out):
  p = out / "log.jsonl"
  if not p.exists():
    return []
  return [json.loads(l) for l in p.read_text().splitlines() if l.strip()]


def test_sigkill_on_ray_then_resume(tmp_path):
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, heldout=("matrix",))
  out = tmp_path / "run"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  with ray_cluster.LocalCluster(head_cpus=1, node_cpus=(1,),
                                env={"MLGO_HOME": str(tmp_path / "home")}) as c:
    proc = subprocess.Popen(_cmd(corpus, out, 50, c.address), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
      deadline = time.monotonic() + 300
      while len(_log(out)) < 1 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        time.sleep(0.1)
      assert [r["iteration"] for r in _log(out)] == [1]
      time.sleep(0.5)   # inside iteration 2
    finally:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
    done = [r["iteration"] for r in _log(out)]
    assert done in ([1], [1, 2])
    target = done[-1] + 1
    r = subprocess.run(_cmd(corpus, out, target, c.address), env=env, capture_output=True,
                       text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
  assert f"resumed from {out / 'checkpoint'} at iteration {done[-1]}" in r.stderr
  log = _log(out)
  assert [x["iteration"] for x in log] == list(range(1, target + 1))
  # The collection ran on the cluster's nodes (labels from Ray, not "local").
  assert all(x["modules_per_second_by_node"] and "local" not in x["modules_per_second_by_node"]
             for x in log), log
  assert all(x["ok"] == 6 and x["failed"] == 0 for x in log)
