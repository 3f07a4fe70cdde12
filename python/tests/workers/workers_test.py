"""Worker pools: streaming results, failures, crashes, deadline cancellation."""
import os
import pathlib
import subprocess
import sys
import time

import pytest

from mlgo.workers import ProcessPool, ThreadPool
from mlgo.workers import testing as fns


@pytest.mark.parametrize("cls", [ProcessPool, ThreadPool])
def test_results_and_failures(cls):
  with cls(2) as pool:
    for x in range(6):
      pool.submit(fns.square, x)
    pool.submit(fns.fail, "boom")
    res = list(pool.results())
  assert sorted(r.value for r in res if r.ok) == [0, 1, 4, 9, 16, 25]
  bad = [r for r in res if not r.ok]
  assert len(bad) == 1 and "boom" in bad[0].error and not bad[0].cancelled


def test_crashed_worker_is_reported_and_replaced():
  with ProcessPool(2) as pool:
    pool.submit(fns.crash)
    pool.submit(fns.square, 3)
    res = {r.item: r for r in pool.results()}
    assert "died" in res[()].error
    assert res[(3,)].value == 9
    pool.submit(fns.square, 4)  # the pool still works after a crash
    assert [r.value for r in pool.results()] == [16]


def test_deadline_cancels_and_kills_children(tmp_path):
  with ProcessPool(2) as pool:
    pool.submit(fns.subprocess_sleep, 60, str(tmp_path / "pid"))
    pool.submit(fns.sleep_then, 0.1, "quick")
    pool.submit(fns.sleep_then, 60, "queued")
    t0 = time.monotonic()
    res = list(pool.results(deadline=time.monotonic() + 2.0))
    assert time.monotonic() - t0 < 10
    done = [r for r in res if r.ok]
    cancelled = [r for r in res if r.cancelled]
    assert [r.value for r in done] == ["quick"]
    assert len(cancelled) == 2
    pool.submit(fns.square, 5)
    assert [r.value for r in pool.results()] == [25]
  # The `sleep 60` child was killed with its worker's process group.
  pid = int((tmp_path / "pid").read_text())
  assert fns.wait_dead(pid)


@pytest.mark.parametrize("cls", [ProcessPool, ThreadPool])
def test_in_submission_order_whatever_finishes_first(cls):
  from mlgo.workers.base import in_submission_order  # pylint: disable=import-outside-toplevel
  with cls(3) as pool:
    # The first item takes longest: it finishes last but must come out first.
    ids = [pool.submit(fns.sleep_then, s, tag)
           for s, tag in ((1.5, "a"), (0.8, "b"), (0.0, "c"), (0.0, "d"))]
    finished = []
    ordered = [r.value for r in in_submission_order(
        (finished.append(r.value) or r for r in pool.results()), ids)]
  assert ordered == ["a", "b", "c", "d"]
  assert finished != ordered  # the pool itself did yield them out of order


def test_workers_run_numpy_on_one_blas_thread():
  """A worker answering decisions one at a time must not start a BLAS thread per core
  (their spinning takes the compilers' cores): `import mlgo` sets one thread."""
  with ProcessPool(2) as pool:
    for _ in range(2):
      pool.submit(fns.blas_threads)
    assert [r.value for r in pool.results()] == [1, 1]
  # The same product without the setting: OpenBLAS takes a thread per core.
  env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
  code = ("import os, numpy as np; a = np.ones((200, 200)); a @ a; "
          "print(len(os.listdir('/proc/self/task')))")
  plain = int(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout)
  if (os.cpu_count() or 1) >= 2:
    assert plain >= 2
  # A user's own setting is kept.
  import mlgo  # pylint: disable=import-outside-toplevel
  env["OPENBLAS_NUM_THREADS"] = "2"
  env["PYTHONPATH"] = str(pathlib.Path(mlgo.__file__).parents[1])
  kept = subprocess.run([sys.executable, "-c", "import mlgo, os; "
                         "print(os.environ['OPENBLAS_NUM_THREADS'])"], env=env, check=True,
                        capture_output=True, text=True).stdout.strip()
  assert kept == "2"


def test_worker_ends_quietly_when_its_pool_owner_is_killed(tmp_path):
  """A run stopped with SIGTERM (a pause) leaves its workers mid-task: each must end
  once its task is done, without a traceback in the run's log, when there is nobody
  left to send the result to."""
  marker = tmp_path / "worker.pid"
  script = (
      "import os, signal, threading, time\n"
      "from mlgo.workers import ProcessPool\n"
      "from mlgo.workers import testing as fns\n"
      "pool = ProcessPool(1)\n"
      f"pool.submit(fns.mark_then_sleep, {str(marker)!r}, 1.5)\n"
      "threading.Thread(target=lambda: list(pool.results()), daemon=True).start()\n"
      f"while not os.path.exists({str(marker)!r}): time.sleep(0.05)\n"
      "os.kill(os.getpid(), signal.SIGTERM)\n")
  import mlgo  # pylint: disable=import-outside-toplevel
  env = dict(os.environ, PYTHONPATH=str(pathlib.Path(mlgo.__file__).parents[1]))
  # stderr is shared with the worker: reading it to its end waits for the worker too.
  run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                       text=True, timeout=60)
  assert run.returncode == -15
  worker = int(marker.read_text())
  assert fns.wait_dead(worker)
  assert "Traceback" not in run.stderr, run.stderr
