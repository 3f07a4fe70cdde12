"""Running a compile with the native advisor server on LLVM's interactive channel.

    res = run_with_server("OUT/advisor_server", "regalloc_eviction",
                          lambda flags: [llc, "x.bc", "-o", "x.o", *flags])

The helper makes the two FIFOs in a private temp dir, starts the server and the compiler,
and waits for both with a timeout (a compiler that dies before opening the channel would
otherwise leave the server waiting forever, and vice versa).
"""
import dataclasses
import os
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Callable, Sequence

_FLAGS = {
    "inlining": ["-enable-ml-inliner=release", "-inliner-interactive-channel-base={base}"],
    "regalloc_eviction": ["-regalloc-enable-advisor=release",
                          "-regalloc-evict-interactive-channel-base={base}"],
    "regalloc_priority": ["-regalloc-enable-priority-advisor=release",
                          "-regalloc-priority-interactive-channel-base={base}"],
}


def channel_flags(problem: str, base: str, tool: str = "llc",
                  include_default: bool = False) -> list[str]:
  """Compiler flags that route `problem`'s decisions to channel BASE.

  tool="clang" wraps each flag in -mllvm. include_default adds the heuristic's answer as
  feature `inlining_default` (inlining only; only if the model takes it).
  """
  if problem not in _FLAGS:
    raise ValueError(f"unknown problem {problem!r}; expected one of {sorted(_FLAGS)}")
  flags = [f.format(base=base) for f in _FLAGS[problem]]
  if include_default and problem == "inlining":
    flags.append("-inliner-interactive-include-default")
  if tool == "clang":
    flags = [x for f in flags for x in ("-mllvm", f)]
  return flags


@dataclasses.dataclass
class ServerRun:
  ok: bool
  reason: str | None
  compiler_returncode: int | None
  server_returncode: int | None
  compiler_stderr: str
  server_stderr: str
  seconds: float


def run_with_server(server: str, problem: str, compiler_argv: Callable[[list[str]], Sequence[str]],
                    *, tool: str = "llc", timeout: float = 300.0, log_path: str | None = None,
                    record_path: str | None = None, include_default: bool = False) -> ServerRun:
  """Compiles with `server` answering the channel; never raises for a failed compile."""
  tmp = tempfile.mkdtemp(prefix="mlgo-srv-")
  os.chmod(tmp, 0o700)
  base = os.path.join(tmp, "chan")
  os.mkfifo(base + ".in", 0o600)
  os.mkfifo(base + ".out", 0o600)
  sargv = [server, f"--channel_base={base}"]
  if log_path:
    sargv.append(f"--log={log_path}")
  if record_path:
    sargv.append(f"--record={record_path}")
  cargv = list(compiler_argv(channel_flags(problem, base, tool, include_default)))
  start = time.monotonic()
  serr = open(os.path.join(tmp, "server.err"), "w+")
  cerr = open(os.path.join(tmp, "compiler.err"), "w+")
  srv = comp = None
  reason = None
  try:
    srv = subprocess.Popen(sargv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=serr)
    comp = subprocess.Popen(cargv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=cerr)
    # A watchdog instead of polling: blocking waits return the moment a process exits,
    # so the measured time is the compile's, not our polling interval's.
    timed_out = threading.Event()

    def _kill():
      timed_out.set()
      for p in (comp, srv):
        if p.poll() is None:
          p.kill()
    timer = threading.Timer(timeout, _kill)
    timer.start()
    try:
      comp.wait()
      try:
        srv.wait(timeout=0.05)
      except subprocess.TimeoutExpired:
        # The compiler never opened the channel (nothing to decide, or it failed
        # early): the server still waits in open(BASE.out). Complete that open and
        # close it, so it sees an empty stream and exits.
        try:
          fd = os.open(base + ".out", os.O_WRONLY | os.O_NONBLOCK)
          os.close(fd)
        except OSError:
          pass
        try:
          srv.wait(timeout=5)
        except subprocess.TimeoutExpired:
          reason = "advisor server did not exit after the compiler finished"
    finally:
      timer.cancel()
    if timed_out.is_set():
      reason = f"timeout after {timeout:.0f}s"
  finally:
    for p in (comp, srv):
      if p is not None and p.poll() is None:
        p.kill()
        p.wait()
    serr.seek(0)
    cerr.seek(0)
    s_err, c_err = serr.read(), cerr.read()
    serr.close()
    cerr.close()
    shutil.rmtree(tmp, ignore_errors=True)
  crc = comp.returncode if comp else None
  src = srv.returncode if srv else None
  if reason is None and crc != 0:
    reason = f"compiler exited with status {crc}"
  if reason is None and src != 0:
    reason = f"advisor server exited with status {src}"
  return ServerRun(reason is None, reason, crc, src, c_err, s_err, time.monotonic() - start)
