"""Local worker pools (processes or threads on this machine)."""
import concurrent.futures
import multiprocessing
import multiprocessing.connection
import os
import signal
import time
import traceback

from mlgo.workers.base import QueuedPool, TaskResult, WorkerPool


def _worker_main(conn, environ):
  # The pool creator's environment now, as a fork of it would see it: forkserver children
  # inherit the server's, which started once and misses later settings (a test's
  # $MLGO_PROBLEMS_PATH, a tool's MLGO_WORKERS).
  os.environ.clear()
  os.environ.update(environ)
  # Own process group: cancelling kills this worker and the compilers it started.
  try:
    os.setsid()
  except OSError:
    pass
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  while True:
    try:
      msg = conn.recv()
    except (EOFError, OSError):
      return
    if msg is None:
      return
    task_id, fn, args = msg
    t0 = time.monotonic()
    try:
      value = fn(*args)
      out = (task_id, value, None, time.monotonic() - t0)
    except BaseException:  # pylint: disable=broad-except
      out = (task_id, None, traceback.format_exc(), time.monotonic() - t0)
    try:
      conn.send(out)
    except OSError:
      # The pool's owner is gone (killed, or a paused run's SIGTERM): nobody is left to
      # read the result; end quietly rather than print a traceback into its log.
      return
    except Exception:  # pylint: disable=broad-except
      try:
        conn.send((task_id, None, "result not picklable:\n" + traceback.format_exc(),
                   time.monotonic() - t0))
      except OSError:
        return


class _Worker:

  def __init__(self, ctx):
    self.conn, child = ctx.Pipe(duplex=True)
    self.proc = ctx.Process(target=_worker_main, args=(child, dict(os.environ)),
                            daemon=True)
    self.proc.start()
    child.close()
    self.task = None  # (task_id, args, start)

  def kill(self):
    try:
      os.killpg(self.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
      try:
        self.proc.kill()
      except Exception:  # pylint: disable=broad-except
        pass
    self.proc.join(timeout=5)
    self.conn.close()


class ProcessPool(QueuedPool):
  """One persistent worker process per slot; stragglers are killed at the deadline."""

  def __init__(self, jobs: int | None = None, start_method: str = "forkserver"):
    super().__init__(max(1, jobs or os.cpu_count() or 1))
    self._ctx = multiprocessing.get_context(start_method)
    self._workers = [_Worker(self._ctx) for _ in range(self._n)]

  def _dispatch(self):
    for w in self._workers:
      if w.task is None and self._queue:
        tid, fn, args = self._queue.popleft()
        try:
          w.conn.send((tid, fn, args))
          w.task = (tid, args, time.monotonic())
        except Exception:  # pylint: disable=broad-except
          # Unpicklable item: report it instead of sending.
          self._failed.append(TaskResult(tid, args, error="cannot send work item:\n"
                                         + traceback.format_exc()))

  def _replace(self, i):
    self._workers[i].kill()
    self._workers[i] = _Worker(self._ctx)

  def results(self, deadline=None):
    self._failed = []
    while True:
      self._dispatch()
      while self._failed:
        yield self._failed.pop()
      busy = [w for w in self._workers if w.task is not None]
      if not busy and not self._queue:
        return
      timeout = None
      if deadline is not None:
        timeout = max(0.0, deadline - time.monotonic())
      ready = multiprocessing.connection.wait([w.conn for w in busy], timeout=timeout)
      if not ready and deadline is not None and time.monotonic() >= deadline:
        # Cancel: kill running workers (and their compilers), drop the queue.
        for i, w in enumerate(self._workers):
          if w.task is not None:
            tid, args, t0 = w.task
            self._replace(i)
            yield TaskResult(tid, args, cancelled=True, seconds=time.monotonic() - t0)
        while self._queue:
          tid, _fn, args = self._queue.popleft()
          yield TaskResult(tid, args, cancelled=True)
        return
      for i, w in enumerate(self._workers):
        if w.conn not in ready or w.task is None:
          continue
        tid, args, t0 = w.task
        try:
          rtid, value, err, secs = w.conn.recv()
          w.task = None
          yield TaskResult(rtid, args, value=value, error=err, seconds=secs)
        except (EOFError, OSError):
          w.proc.join(timeout=1)
          code = w.proc.exitcode
          self._replace(i)
          yield TaskResult(tid, args, error=f"worker process died (exit code {code})",
                           seconds=time.monotonic() - t0)

  def close(self):
    for w in self._workers:
      try:
        w.conn.send(None)
      except Exception:  # pylint: disable=broad-except
        pass
    for w in self._workers:
      w.proc.join(timeout=2)
      if w.proc.is_alive():
        w.kill()
    self._workers = []


class ThreadPool(WorkerPool):
  """Threads in this process. A running item cannot be killed at the deadline; it is
  reported cancelled and left to finish (compiles have their own timeouts)."""

  def __init__(self, jobs: int | None = None):
    self._n = max(1, jobs or os.cpu_count() or 1)
    self._ex = concurrent.futures.ThreadPoolExecutor(self._n)
    self._futs = {}
    self._next_id = 0

  @property
  def num_workers(self):
    return self._n

  def submit(self, fn, *args):
    tid = self._next_id
    self._next_id += 1

    def run():
      t0 = time.monotonic()
      try:
        return fn(*args), None, time.monotonic() - t0
      except BaseException:  # pylint: disable=broad-except
        return None, traceback.format_exc(), time.monotonic() - t0
    self._futs[self._ex.submit(run)] = (tid, args)
    return tid

  def results(self, deadline=None):
    pending = set(self._futs)
    timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
    try:
      for fut in concurrent.futures.as_completed(pending, timeout=timeout):
        tid, args = self._futs.pop(fut)
        pending.discard(fut)
        value, err, secs = fut.result()
        yield TaskResult(tid, args, value=value, error=err, seconds=secs)
    except concurrent.futures.TimeoutError:
      for fut in pending:
        tid, args = self._futs.pop(fut)
        fut.cancel()
        yield TaskResult(tid, args, cancelled=True)

  def close(self):
    self._ex.shutdown(wait=False, cancel_futures=True)
