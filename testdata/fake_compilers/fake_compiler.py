#!/usr/bin/env python3
"""Stand-in compiler for the environment's fault tests (project-written).

Invoked like the real compiler plus --fake_mode=MODE (the environment passes it through
as an extra flag). It finds the channel from the `...-interactive-channel-base=BASE`
flag and replays the header and first observation of the recorded clang-22 inlining
stream (testdata/streams/inlining-clang22.bin).

Modes:
  hang          opens the channel, sends header + one observation, then sleeps forever
  crash         sends header + one observation, reads the answer, then SIGSEGVs itself
  garbage       opens the channel and writes bytes that are not a training log
  early_exit    sends the header and half an observation, then exits with status 0
  never_opens   never touches the channel, sleeps forever
  reject        prints an LLVM-like bitcode error and exits 1 without opening the channel
  fork_hang     sends the header, forks a child that keeps the channel open and sleeps;
                the parent exits 0
--pidfile=PATH (optional) gets the pids this stand-in created, one per line.
"""
import os
import pathlib
import signal
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
STREAM = HERE.parent / "streams" / "inlining-clang22.bin"


def arg_value(prefix):
  for a in sys.argv[1:]:
    if a.startswith(prefix):
      return a[len(prefix):]
  return None


def base():
  for a in sys.argv[1:]:
    if "-interactive-channel-base=" in a:
      return a.split("=", 1)[1]
  sys.exit("fake compiler: no channel base flag")


def note_pid(pid):
  path = arg_value("--pidfile=")
  if path:
    with open(path, "a") as f:
      f.write(f"{pid}\n")


def recorded():
  data = STREAM.read_bytes()
  nl = data.index(b"\n") + 1
  header = data[:nl]
  rest = data[nl:]
  # the context line, then the first observation line and its 39 int64 tensors + "\n"
  ctx_end = rest.index(b"\n") + 1
  obs_line_end = rest.index(b"\n", ctx_end) + 1
  first_obs = rest[:obs_line_end + 39 * 8 + 1]
  return header, first_obs


def open_channel():
  b = base()
  fin = os.open(b + ".in", os.O_RDONLY)   # LLVM 22's order: input first
  fout = os.open(b + ".out", os.O_WRONLY)
  return fin, fout


def sleep_forever():
  while True:
    time.sleep(3600)


def main():
  mode = arg_value("--fake_mode=")
  note_pid(os.getpid())
  if mode == "never_opens":
    sleep_forever()
  if mode == "reject":
    sys.stderr.write("error: Invalid bitcode file: Unknown attribute kind (102)\n"
                     "1 error generated.\n")
    sys.exit(1)
  header, first_obs = recorded()
  fin, fout = open_channel()
  if mode == "garbage":
    os.write(fout, b"\x00\xffthis is not a training log\n" * 4)
    sleep_forever()
  if mode == "early_exit":
    os.write(fout, header + first_obs[:len(first_obs) // 2])
    os._exit(0)
  if mode == "fork_hang":
    os.write(fout, header)
    pid = os.fork()
    if pid == 0:
      sleep_forever()
    note_pid(pid)
    os._exit(0)
  os.write(fout, header + first_obs)
  if mode == "hang":
    sleep_forever()
  if mode == "crash":
    os.read(fin, 8)
    os.kill(os.getpid(), signal.SIGSEGV)
    sleep_forever()
  sys.exit(f"fake compiler: unknown mode {mode}")


if __name__ == "__main__":
  main()
