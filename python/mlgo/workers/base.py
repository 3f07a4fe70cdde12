"""The worker pool interface."""
import abc
import collections
import dataclasses
import time
from typing import Any, Callable, Iterable, Iterator


@dataclasses.dataclass
class TaskResult:
  task_id: int
  item: Any                 # the work item as submitted (the args tuple)
  value: Any = None         # what the function returned
  error: str | None = None  # traceback text if the function raised or the worker died
  cancelled: bool = False   # not finished before the deadline
  seconds: float = 0.0
  node: str = "local"       # where it ran (a Ray node label; "local" for local pools)

  @property
  def ok(self) -> bool:
    return self.error is None and not self.cancelled

  def where(self) -> str:
    """"on NODE: " for results from a cluster node, "" for local ones: a failure
    message on a cluster says which machine (e.g. the one without clang-22)."""
    return "" if self.node == "local" else f"on {self.node}: "

  def failure(self, value_reason: str = "") -> str:
    """Why this item failed, for a log or an index: where it ran, then the last line of
    the worker's error (the item did not return), or `value_reason` (it returned and
    its own result says it failed), at most 500 characters."""
    if self.ok:
      return self.where() + value_reason[:500]
    last = (self.error or "").strip().splitlines()[-1:]
    return self.where() + (last[0] if last else "cancelled")[:500]


def in_submission_order(results: Iterable[TaskResult], ids) -> Iterator[TaskResult]:
  """`results` in the order of `ids` (the task ids as submitted): a result that finishes
  early waits for those submitted before it. For output that must not depend on which
  worker was faster (a trace written in completion order makes training depend on the
  machine's load). The price: results that finish early are held in memory until those
  before them are in."""
  pos = {tid: i for i, tid in enumerate(ids)}
  waiting = {}
  nxt = 0
  for r in results:
    waiting[pos[r.task_id]] = r
    while nxt in waiting:
      yield waiting.pop(nxt)
      nxt += 1
  for i in sorted(waiting):  # only if a pool yielded fewer results than submitted
    yield waiting[i]


class WorkerPool(abc.ABC):
  """Runs `fn(*args)` work items; `fn` and args must be picklable (top-level functions)."""

  @abc.abstractmethod
  def submit(self, fn: Callable, *args) -> int:
    """Queues a work item, returns its task id."""

  @abc.abstractmethod
  def results(self, deadline: float | None = None) -> Iterator[TaskResult]:
    """Yields results of all submitted items as they finish. At `deadline`
    (time.monotonic() value) still running/queued items are cancelled and yielded with
    cancelled=True, so the caller always gets one result per item."""

  @property
  @abc.abstractmethod
  def num_workers(self) -> int:
    ...

  def close(self):
    pass

  def __enter__(self):
    return self

  def __exit__(self, *exc):
    self.close()

  def map_unordered(self, fn: Callable, items: Iterable[tuple],
                    timeout: float | None = None) -> Iterator[TaskResult]:
    for args in items:
      self.submit(fn, *args)
    deadline = time.monotonic() + timeout if timeout else None
    yield from self.results(deadline)


class QueuedPool(WorkerPool):
  """A pool whose submit() only queues (task id, fn, args); results() hands the queue
  out to its workers (the process pool, the Ray pool)."""

  def __init__(self, num_workers: int):
    self._n = num_workers
    self._queue = collections.deque()
    self._next_id = 0

  @property
  def num_workers(self):
    return self._n

  def submit(self, fn, *args):
    tid = self._next_id
    self._next_id += 1
    self._queue.append((tid, fn, args))
    return tid
