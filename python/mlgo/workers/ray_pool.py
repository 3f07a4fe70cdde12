"""The worker-pool interface on a Ray cluster (`--workers=ray`).

Each work item becomes one Ray task (one CPU). What makes it safe to spread compiles
over machines:

- Code: the driver's `mlgo` package is shipped to every node with the job (Ray
  `py_modules`), so nodes run the driver's version. Nodes need the same Python packages
  and the compilers (run `./setup.sh` on each, start `ray` from its venv).
- Data: work items carry policies inline (spec + weights). Module files (`bc_path`,
  `thinlto_index` of any dataclass argument) are put in Ray's object store once per
  driver and materialized on each node under MLGO_HOME/ray_files/<sha256>/ the first
  time a task there needs them; with `ship_files=False` the paths are used as they
  are (a shared filesystem mounted at the same path everywhere).
- Faults: a task whose worker process or node dies is re-run by Ray elsewhere, up to
  `max_retries` times; each submitted item yields exactly one result. At the deadline
  running tasks are force-cancelled (the worker is killed; compilers die with it by
  PDEATHSIG) and queued ones dropped, as in the process pool.
- Errors name the node (`on node 10.0.0.7/1a2b3c4d: ...`), e.g. a missing clang-22.

Results carry `node`, the label of the node that ran them, for per-node throughput.
"""
import collections
import dataclasses
import hashlib
import logging
import os
import pathlib
import threading
import time
import traceback

from mlgo.util import compiler_plugins as plugins
from mlgo.workers.base import QueuedPool, TaskResult

_PKG_DIR = pathlib.Path(__file__).resolve().parents[1]   # python/mlgo
_lock = threading.Lock()
_conn = {"address": None, "shipped": {}, "bytes": 0}


class RayBackendError(RuntimeError):
  pass


def _import_ray():
  try:
    import ray  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise RayBackendError("--workers=ray needs the `ray` package (pinned in "
                          "requirements.txt; run ./setup.sh)") from e
  return ray


def _support_files() -> dict:
  """Files outside the Python package that tasks may need on any node, as
  {environment variable: path}. The compiler plugins are built on each node from their
  sources (mlgo.util.compiler_plugins)."""
  return plugins.support_files(_PKG_DIR.parents[1])


def _forwarded(*names) -> dict:
  return {n: os.environ[n] for n in names if os.environ.get(n)}


def connect(address: str | None = None, *, num_cpus: int | None = None):
  """Connects this process to a Ray cluster once: `address` (or $RAY_ADDRESS); without
  either, starts a single-node cluster on this machine. Returns the ray module."""
  ray = _import_ray()
  address = address or os.environ.get("RAY_ADDRESS") or None
  with _lock:
    if ray.is_initialized():
      if address and _conn["address"] not in (address, None):
        raise RayBackendError(f"already connected to Ray at {_conn['address']}, "
                              f"cannot connect to {address} too")
      return ray
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    kw = dict(log_to_driver=False, logging_level=logging.WARNING,
              runtime_env={"py_modules": [str(_PKG_DIR)],
                           # Ray's workers load numpy before mlgo: pass the setting.
                           "env_vars": {"OPENBLAS_NUM_THREADS":
                                        os.environ.get("OPENBLAS_NUM_THREADS", "1"),
                                        # Problem files outside the package: each node
                                        # needs them at the same path.
                                        **_forwarded("MLGO_PROBLEMS_PATH")}},
              namespace="mlgo")
    if address:
      kw["address"] = address
    else:
      from mlgo.util.cli import mlgo_home  # pylint: disable=import-outside-toplevel
      tmp = mlgo_home() / "ray"
      tmp.mkdir(parents=True, exist_ok=True)
      kw.update(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
                _temp_dir=str(tmp))
    try:
      ray.init(**kw)
    except ConnectionError as e:
      raise RayBackendError(f"cannot connect to the Ray cluster at {address}: {e} (start "
                            "one with `ray start --head`, see the README)") from e
    _conn["address"] = address or "local"
  return ray


def disconnect():
  """Leaves the cluster (a single-node one started by connect() stops)."""
  ray = _import_ray()
  with _lock:
    if ray.is_initialized():
      ray.shutdown()
    _conn.update(address=None, shipped={}, bytes=0)


def cluster_cpus() -> int:
  ray = _import_ray()
  return max(1, int(ray.cluster_resources().get("CPU", 1)))


def _ship_file(ray, path: str):
  """(sha256, ObjectRef of the bytes, file name); cached per driver by path+size+mtime."""
  st = os.stat(path)
  key = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
  got = _conn["shipped"].get(key)
  if got is None:
    with open(path, "rb") as f:
      data = f.read()
    got = (hashlib.sha256(data).hexdigest(), ray.put(data), os.path.basename(path))
    _conn["shipped"][key] = got
    _conn["bytes"] += len(data)
  return got


_SHIPPED_FIELDS = ("bc_path", "thinlto_index")


@dataclasses.dataclass
class _Shipped:
  """A dataclass work-item argument whose file fields travel through the object store."""
  obj: object
  files: dict   # field -> (sha256, ObjectRef, name)


def _pack_args(ray, args):
  out = []
  for a in args:
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
      files = {f: _ship_file(ray, getattr(a, f)) for f in _SHIPPED_FIELDS
               if isinstance(getattr(a, f, None), str) and os.path.isfile(getattr(a, f))}
      if files:
        a = _Shipped(a, files)
    out.append(a)
  return tuple(out)


def _node_file(ray, sha: str, ref, name: str) -> str:
  """The node-local copy of a shipped file (fetched from the object store once)."""
  from mlgo.util.cli import mlgo_home  # pylint: disable=import-outside-toplevel
  dest = mlgo_home() / "ray_files" / sha / name
  if not dest.exists():
    data = ray.get(ref)
    if hashlib.sha256(data).hexdigest() != sha:
      raise RayBackendError(f"shipped file {name} arrived corrupted (sha256 mismatch)")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{name}.{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, dest)   # atomic: tasks on the same node may race
  return str(dest)


def _unpack_args(ray, args):
  out = []
  for a in args:
    if isinstance(a, _Shipped):
      a = dataclasses.replace(a.obj, **{f: _node_file(ray, *v) for f, v in a.files.items()})
    out.append(a)
  return tuple(out)


def _node_label(ray) -> str:
  ctx = ray.get_runtime_context()
  ip = ray.util.get_node_ip_address()
  return f"{ip}/{ctx.get_node_id()[:8]}"


def _run_item(fn, args, support):
  """Runs on a Ray worker: one work item. Returns (value, error, seconds, node)."""
  import ray  # pylint: disable=import-outside-toplevel
  node = _node_label(ray)
  t0 = time.monotonic()
  try:
    for var, v in support.items():
      os.environ[var] = _node_file(ray, *v)
    value = fn(*_unpack_args(ray, args))
    return value, None, time.monotonic() - t0, node
  except BaseException:  # pylint: disable=broad-except
    return None, f"on node {node}:\n{traceback.format_exc()}", time.monotonic() - t0, node


class RayPool(QueuedPool):
  """Work items as Ray tasks, `depth` per cluster CPU in flight: with 2, a worker that
  finishes finds its next compile already waiting (one scheduling round trip less per
  item: +11% wall time against the process pool with 1, -3% with 2, bench_workers), and
  the deadline still has little to cancel."""

  def __init__(self, jobs: int | None = None, *, address: str | None = None,
               ship_files: bool = True, max_retries: int = 3, depth: int = 2):
    ray = connect(address)
    self._ray = ray
    # Every CPU of the cluster: `jobs` is this machine's count, not the cluster's.
    super().__init__(cluster_cpus())
    self._depth = max(1, depth)
    self._ship = ship_files
    self._remote = ray.remote(num_cpus=1, max_retries=max_retries,
                              retry_exceptions=False)(_run_item)
    self._support = {var: _ship_file(ray, str(p)) for var, p in _support_files().items()}
    self._bytes0 = _conn["bytes"]
    self.driver_seconds = 0.0   # this process's time submitting items and reading results

  @property
  def bytes_shipped(self) -> int:
    """Bytes of module files this pool put in the object store (new ones only)."""
    return _conn["bytes"] - self._bytes0

  def _start(self, fn, args):
    packed = _pack_args(self._ray, args) if self._ship else args
    return self._remote.remote(fn, packed, self._support)

  def results(self, deadline=None):
    ray = self._ray
    queue, self._queue = self._queue, collections.deque()
    running = {}      # ObjectRef -> (tid, args, start)
    while queue or running:
      while queue and len(running) < self._n * self._depth:
        tid, fn, args = queue.popleft()
        t = time.monotonic()
        try:
          running[self._start(fn, args)] = (tid, args, time.monotonic())
          self.driver_seconds += time.monotonic() - t
        except Exception:  # pylint: disable=broad-except
          yield TaskResult(tid, args, error="cannot send work item:\n" + traceback.format_exc())
      if not running:
        continue
      timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
      ready, _ = ray.wait(list(running), num_returns=1, timeout=timeout)
      if not ready and deadline is not None and time.monotonic() >= deadline:
        for ref, (tid, args, t0) in running.items():
          ray.cancel(ref, force=True)
          yield TaskResult(tid, args, cancelled=True, seconds=time.monotonic() - t0)
        while queue:
          tid, _fn, args = queue.popleft()
          yield TaskResult(tid, args, cancelled=True)
        return
      # Everything else already finished, without waiting.
      ready, _ = ray.wait(list(running), num_returns=len(running), timeout=0)
      for ref in ready:
        tid, args, t0 = running.pop(ref)
        try:
          t = time.monotonic()
          value, err, secs, node = ray.get(ref)
          self.driver_seconds += time.monotonic() - t
          yield TaskResult(tid, args, value=value, error=err, seconds=secs, node=node)
        except Exception as e:  # pylint: disable=broad-except
          # Ray gave up (retries exhausted, result lost, unpicklable result ...).
          yield TaskResult(tid, args, error=f"ray: {type(e).__name__}: {e}",
                           seconds=time.monotonic() - t0)
