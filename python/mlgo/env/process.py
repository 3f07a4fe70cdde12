"""The compiler process of one compile: its own process group, a deadline watchdog,
and opening the interactive channel without blocking.

Channel plumbing (LLVM's InteractiveModelRunner): the compiler writes observations to
BASE.out and reads each answer from BASE.in; which one it opens first differs between
versions (LLVM 22 opens BASE.in first and would block there until a writer appears). We
never block on an open: BASE.in is opened O_RDWR (never blocks on Linux, and lets the
compiler's open succeed at once), BASE.out O_RDONLY|O_NONBLOCK; then one poll() waits
for the first observation bytes or the compiler's exit (a pidfd in the same poll set),
so a compiler that exits without opening the channel (no decisions to make, unreadable
bitcode, bad flags) is noticed at once and one that hangs hits the timeout, without
spinning. After that reads block; a watchdog thread kills the compiler's process group
at the deadline, which ends any blocked read with EOF. The FIFOs live in a private
mkdtemp directory (mode 0700) that is removed in `finally`, as is the process group.
"""
import os
import select
import signal
import subprocess
import threading
import time

from mlgo.util import procfs

_STDERR_TAIL = 1500


def _signal_name(rc: int) -> str:
  try:
    return signal.Signals(-rc).name
  except ValueError:
    return f"signal {-rc}"


class Process:
  """The compiler in its own process group, with a deadline watchdog."""

  def __init__(self, argv, stderr_path, deadline):
    self.stderr_path = stderr_path
    self.timed_out = False
    with open(stderr_path, "wb") as err:
      self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=err, start_new_session=True, close_fds=True,
                                   preexec_fn=_die_with_parent)
    self._done = threading.Event()
    self._watchdog = threading.Thread(target=self._watch, args=(deadline,), daemon=True)
    self._watchdog.start()

  def _watch(self, deadline):
    if not self._done.wait(max(0.0, deadline - time.monotonic())):
      # Kill the whole group even if the compiler itself has exited: a child it forked
      # may still hold the channel open.
      self.timed_out = True
      self.kill()

  def kill(self):
    try:
      os.killpg(self.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
      pass

  def poll(self):
    return self.proc.poll()

  def finish(self, deadline) -> int:
    """Waits for exit until the deadline (then kills); stops the watchdog."""
    # A blocking waitpid (Popen.wait with a timeout polls with sleeps up to 50 ms);
    # the watchdog kills the group at the deadline, which ends this wait.
    del deadline
    rc = self.proc.wait()
    self.close()
    return rc

  def close(self):
    """Kills whatever is left of the process group and reaps the compiler."""
    self._done.set()
    self.kill()  # also strays the compiler may have forked into its group
    try:
      self.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      pass
    self._watchdog.join(timeout=1)
    # Wait (briefly) until the group's other members are gone too.
    end = time.monotonic() + 1.0
    while time.monotonic() < end:
      try:
        os.killpg(self.proc.pid, 0)
      except (ProcessLookupError, PermissionError):
        break
      if not group_members(self.proc.pid):  # only zombies left (init reaps them)
        break
      time.sleep(0.002)

  def stderr_tail(self) -> str:
    try:
      with open(self.stderr_path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - _STDERR_TAIL))
        return f.read().decode("utf-8", "replace").strip()
    except OSError:
      return ""

  def exit_reason(self, rc: int, before_channel: bool = False) -> str:
    where = " before opening the interactive channel" if before_channel else ""
    what = (f"compiler killed by {_signal_name(rc)}{where}" if rc < 0 else
            f"compiler exited with status {rc}{where}")
    tail = self.stderr_tail()
    return f"{what}: {tail}" if tail else what


def _die_with_parent():
  """The compiler gets SIGKILL if our process dies: a killed driver must not leave it
  spinning on its closed channel (InteractiveModelRunner retries reads at EOF)."""
  try:
    import ctypes  # pylint: disable=import-outside-toplevel
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
  except OSError:
    pass


# One /proc reader for the whole package (mlgo.util.procfs); these names are this
# module's interface for the compiler loop and its tests.
alive = procfs.alive
live_processes = procfs.live_processes


def group_members(pgid: int) -> list[int]:
  """Live (non-zombie) processes of process group `pgid`."""
  return live_processes(2, pgid)


def open_channel(base: str, proc: Process, deadline: float):
  """(rfd, wfd, exited_rc|None, silent): waits, without spinning, until the compiler has
  written its first bytes, has exited, or the deadline passed. silent is True when the
  deadline passed with nothing written: the compiler never opened the channel, whether
  or not the watchdog has already killed it (that race used to read as a plain timeout).

  BASE.in is opened O_RDWR: that never blocks on Linux and makes the compiler's open for
  reading succeed at once whichever end it opens first (we never read from it; if the
  compiler dies, we learn it from BASE.out's EOF). BASE.out is opened O_RDONLY|O_NONBLOCK.
  A pidfd in the same poll set reports the compiler's exit immediately.
  """
  wfd = os.open(base + ".in", os.O_RDWR | os.O_NONBLOCK)
  rfd = os.open(base + ".out", os.O_RDONLY | os.O_NONBLOCK)
  poller = select.poll()
  poller.register(rfd, select.POLLIN)
  pidfd = None
  try:
    pidfd = os.pidfd_open(proc.proc.pid)
    poller.register(pidfd, select.POLLIN)
  except (AttributeError, OSError):  # no pidfd: poll the process every 10 ms
    pass
  try:
    while True:
      left = deadline - time.monotonic()
      if left <= 0:
        written = any(fd == rfd for fd, _ in poller.poll(0))
        return rfd, wfd, None, not written  # the caller reports the timeout
      ready = poller.poll(min(left * 1000.0, 10.0 if pidfd is None else 1000.0))
      if any(fd == rfd for fd, _ in ready):
        return rfd, wfd, None, False
      rc = proc.poll()
      if rc is not None:
        if poller.poll(0) and any(fd == rfd for fd, _ in poller.poll(0)):
          return rfd, wfd, None, False  # wrote and exited: the reader sees the bytes, then EOF
        return rfd, wfd, rc, False
  finally:
    if pidfd is not None:
      os.close(pidfd)
