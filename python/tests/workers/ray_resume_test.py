"""Training on a Ray cluster (`--workers=ray --ray_address=...`): SIGKILL the trainer
mid-iteration, run the same command again: it resumes on the same cluster, and the log
shows the compiles spread over both nodes."""
import os
import pathlib
import subprocess
import sys

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


def test_sigkill_on_ray_then_resume(tmp_path):
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, heldout=("matrix",))
  out = tmp_path / "run"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
  with ray_cluster.LocalCluster(head_cpus=1, node_cpus=(1,),
                                env={"MLGO_HOME": str(tmp_path / "home")}) as c:
    proc = subprocess.Popen(_cmd(corpus, out, 50, c.address), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    testing.sigkill_after_first_checkpoint(proc, out, timeout=300)
    done = [r["iteration"] for r in testing.logged_records(out)]
    ckpt = testing.checkpoint_iteration(out)
    # The record is written before the checkpoint, so the log may be one ahead of it.
    assert len(done) >= 1 and done == list(range(1, len(done) + 1))
    assert ckpt in (len(done) - 1, len(done)) and ckpt >= 1
    target = ckpt + 1
    r = subprocess.run(_cmd(corpus, out, target, c.address), env=env, capture_output=True,
                       text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
  assert f"resumed from {out / 'checkpoint'} at iteration {ckpt}" in r.stderr
  log = testing.logged_records(out)
  assert [x["iteration"] for x in log] == list(range(1, target + 1))
  # The collection ran on the cluster's nodes (labels from Ray, not "local").
  assert all(x["modules_per_second_by_node"] and "local" not in x["modules_per_second_by_node"]
             for x in log), log
  assert all(x["ok"] == 6 and x["failed"] == 0 for x in log)
