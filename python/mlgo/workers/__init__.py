"""Worker pools: run compile jobs (work items) in parallel, stream results as they finish.

`WorkerPool` is the interface the trainer, trace generator and evaluator use. Kinds:
`ProcessPool` ("process", default: one worker process per core, stragglers killed with
their compiler children at a deadline), `ThreadPool` ("thread"; cannot kill a running
job) and `RayPool` ("ray": a Ray cluster, see mlgo.workers.ray_pool). `make_pool(None)`
takes the kind from $MLGO_WORKERS, which the tools' `--workers` flag sets.
"""
import os

from mlgo.workers.base import TaskResult, WorkerPool
from mlgo.workers.local import ProcessPool, ThreadPool

KINDS = ("process", "thread", "ray")


def default_kind() -> str:
  kind = os.environ.get("MLGO_WORKERS") or "process"
  if kind not in KINDS:
    raise ValueError(f"MLGO_WORKERS={kind!r}: expected one of {', '.join(KINDS)}")
  return kind


def make_pool(kind: str | None = None, jobs: int | None = None) -> WorkerPool:
  """A pool of `kind` (None: default_kind()). `jobs` sizes local pools; a Ray pool
  uses every CPU of its cluster."""
  kind = kind or default_kind()
  if kind == "process":
    return ProcessPool(jobs)
  if kind == "thread":
    return ThreadPool(jobs)
  if kind == "ray":
    from mlgo.workers.ray_pool import RayPool  # pylint: disable=import-outside-toplevel
    return RayPool(jobs)
  raise ValueError(f"unknown worker pool kind {kind!r} ({'|'.join(KINDS)})")


def add_flags(ap):
  """--workers / --ray_address on an argparse parser (see apply_flags)."""
  ap.add_argument("--workers", choices=KINDS, default=None,
                  help="where compiles run: process (default: this machine), thread, "
                       "or ray (a Ray cluster: --ray_address or $RAY_ADDRESS, else a "
                       "single-node Ray on this machine)")
  ap.add_argument("--ray_address", default=None,
                  help="Ray cluster address (host:port of `ray start --head`)")


def apply_flags(args):
  """Makes the parsed --workers/--ray_address the process default (environment, so
  child processes and gin-configured trainers with pool=None see it too)."""
  if getattr(args, "workers", None):
    os.environ["MLGO_WORKERS"] = args.workers
  if getattr(args, "ray_address", None):
    os.environ["RAY_ADDRESS"] = args.ray_address
    os.environ.setdefault("MLGO_WORKERS", "ray")


__all__ = ["TaskResult", "WorkerPool", "ProcessPool", "ThreadPool", "make_pool", "KINDS",
           "add_flags", "apply_flags", "default_kind"]
