"""Worker pools: run compile jobs (work items) in parallel, stream results as they finish.

`WorkerPool` is the interface the trainer, trace generator and evaluator use; a
distributed engine can implement it without touching them. Local implementations:
`ProcessPool` (default: one worker process per core, stragglers killed with their
compiler children at a deadline) and `ThreadPool` (threads; fine because the work is
subprocess + pipe I/O, but cannot kill a running job).
"""
from mlgo.workers.base import TaskResult, WorkerPool
from mlgo.workers.local import ProcessPool, ThreadPool, make_pool

__all__ = ["TaskResult", "WorkerPool", "ProcessPool", "ThreadPool", "make_pool"]
