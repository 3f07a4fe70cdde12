"""Tiny picklable work functions for testing pools (sleep, fail, crash, subprocess)."""
import os
import subprocess
import time


def square(x):
  return x * x


def sleep_then(seconds, value):
  time.sleep(seconds)
  return value


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
