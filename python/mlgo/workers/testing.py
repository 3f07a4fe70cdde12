"""Tiny picklable work functions for testing pools (sleep, fail, crash, subprocess)."""
import dataclasses
import os
import pathlib
import subprocess
import time


def square(x):
  return x * x


def sleep_then(seconds, value):
  time.sleep(seconds)
  return value


def mark_then_sleep(marker, seconds):
  """Writes `marker`, then sleeps: a test knows the task holds its CPU once the file
  exists (the cluster's resource view can lag behind by a report)."""
  pathlib.Path(marker).write_text(str(os.getpid()))
  time.sleep(seconds)


def fail(msg):
  raise RuntimeError(msg)


def crash():
  os._exit(3)


def subprocess_sleep(seconds, pid_file=None):
  # A child process, as a compile would be: cancellation must kill it too.
  p = subprocess.Popen(["sleep", str(seconds)])
  if pid_file:
    with open(pid_file, "w") as f:
      f.write(str(p.pid))
  return p.pid, p.wait()


@dataclasses.dataclass
class FileItem:
  """A work-item argument with a module file, like a corpus module."""
  name: str
  bc_path: str


def file_of(item):
  """(path, bytes) of a work item's `bc_path`: what a compile on the worker would read."""
  with open(item.bc_path, "rb") as f:
    return item.bc_path, f.read()


def blas_threads() -> int:
  """Threads of this process after a numpy matrix product (OpenBLAS starts its pool
  when numpy loads)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  a = np.ones((200, 200))
  _ = a @ a
  return len(os.listdir("/proc/self/task"))


def wait_dead(pid: int, timeout: float = 10.0) -> bool:
  """Waits until process `pid` is gone or a zombie (killed, not yet reaped); False if it
  still runs after `timeout` s. A kill is sent at once, but on a busy machine the exit
  can lag."""
  end = time.monotonic() + timeout
  while True:
    try:
      with open(f"/proc/{pid}/stat") as f:
        if f.read().split()[2] == "Z":
          return True
    except FileNotFoundError:
      return True
    if time.monotonic() >= end:
      return False
    time.sleep(0.05)
