"""Minimal inlining environment (stand-in until mlgo.env exists; same interface subset).

clang -cc1 with -enable-ml-inliner=release and the interactive channel: the compiler
writes observations (training-log format) to BASE.out and reads one int64 decision per
observation from BASE.in.
"""
import dataclasses
import os
import subprocess
import tempfile
import threading
import time

import numpy as np

from mlgo import log as log_lib
from mlgo.util import toolchain


@dataclasses.dataclass
class Trajectory:
  context: str
  features: dict
  actions: np.ndarray
  default_actions: np.ndarray | None


@dataclasses.dataclass
class CompileResult:
  module: object
  ok: bool
  reason: str | None
  trajectories: list
  reward: dict
  decisions: int
  seconds: float
  corrections: int = 0


@dataclasses.dataclass
class Problem:
  name: str
  features: list
  tool: str = "clang"


_FEATURES = None


def get_problem(name):
  if name != "inlining":
    raise KeyError(f"stand-in environment only knows 'inlining', not {name!r}")
  global _FEATURES
  if _FEATURES is None:
    _FEATURES = _probe_features()
  return Problem("inlining", _FEATURES)


def _probe_features():
  # Compile a tiny module once to learn the header the compiler sends.
  src = "static int f(int x){return x+1;} int g(int y){return f(y)*2;}\n"
  tc = toolchain.toolchain()
  with tempfile.TemporaryDirectory() as d:
    c = os.path.join(d, "p.c")
    with open(c, "w") as f:
      f.write(src)
    base = os.path.join(d, "ch")
    argv = [tc.clang, "-Oz", "-c", c, "-o", os.path.join(d, "p.o")] + _flags(base)
    feats = []
    _run(argv, base, DefaultPolicy(), 60, header_out=feats)
    return [s for s in feats]


class DefaultPolicy:
  def act(self, observation):
    return np.int64(observation["inlining_default"].reshape(-1)[0])


def _flags(base, cc1=False):
  pre = ["-mllvm"]
  return [x for f in ("-enable-ml-inliner=release", f"-inliner-interactive-channel-base={base}",
                      "-inliner-interactive-include-default") for x in pre + [f]]


def _unblock(path, flags):
  try:
    fd = os.open(path, flags | os.O_NONBLOCK)
    os.close(fd)
  except OSError:
    pass


def _run(argv, base, policy, timeout, header_out=None):
  os.mkfifo(base + ".out")
  os.mkfifo(base + ".in")
  proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
  state = {"timed_out": False}

  def watchdog():
    try:
      proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
      state["timed_out"] = True
      proc.kill()
      proc.wait()
    # Unblock our opens if the compiler never opened its ends.
    _unblock(base + ".out", os.O_WRONLY)
    _unblock(base + ".in", os.O_RDONLY)
  th = threading.Thread(target=watchdog, daemon=True)
  th.start()
  trajs, cur = [], None
  err = None
  try:
    # LLVM's InteractiveModelRunner opens BASE.in (its input) first, then BASE.out.
    with open(base + ".in", "wb", buffering=0) as fin, open(base + ".out", "rb",
                                                              buffering=0) as fout:
      reader = log_lib.StreamReader(fout)
      names = None
      while True:
        ev = reader.next_event()
        if ev is None:
          break
        if names is None:
          names = [s.name for s in reader.header]
          if header_out is not None:
            header_out.extend(s for s in reader.header)
        if isinstance(ev, log_lib.Context):
          cur = (ev.name, [], [], [])
          trajs.append(cur)
        elif isinstance(ev, log_lib.Observation):
          if cur is None:
            cur = ("", [], [], [])
            trajs.append(cur)
          obs = dict(zip(names, ev.features))
          a = int(policy.act(obs))
          fin.write(np.int64(a).tobytes())
          cur[1].append(obs)
          cur[2].append(a)
          cur[3].append(int(obs["inlining_default"].reshape(-1)[0])
                        if "inlining_default" in obs else -1)
  except (BrokenPipeError, log_lib.LogFormatError, OSError) as e:
    err = f"{type(e).__name__}: {e}"
  proc.wait()
  th.join()
  stderr = proc.stderr.read().decode(errors="replace")
  proc.stderr.close()
  if state["timed_out"]:
    return None, f"timed out after {timeout}s"
  if proc.returncode != 0:
    return None, f"compiler exit {proc.returncode}: {stderr.strip()[-300:]}"
  if err:
    return None, err
  out = []
  for ctx, obs, acts, dfl in trajs:
    if not obs:
      continue
    feats = {k: np.stack([o[k] for o in obs]) for k in obs[0]}
    out.append(Trajectory(ctx, feats, np.array(acts, np.int64), np.array(dfl, np.int64)))
  return out, None


def compile_module(module, problem, policy, *, llvm_version=22, timeout=300.0,
                   record_path=None):
  t0 = time.monotonic()
  tc = toolchain.toolchain(llvm_version)
  with tempfile.TemporaryDirectory(prefix="mlgo-") as d:
    base = os.path.join(d, "ch")
    obj = os.path.join(d, "out.o")
    argv = module.compile_argv(tc.clang, obj, _flags(base))
    trajs, reason = _run(argv, base, policy, timeout)
    if trajs is None:
      return CompileResult(module, False, reason, [], {}, 0, time.monotonic() - t0)
    size = toolchain.text_size(obj)
  n = sum(len(t.actions) for t in trajs)
  return CompileResult(module, True, None, trajs, {"text_size": size}, n,
                       time.monotonic() - t0)
