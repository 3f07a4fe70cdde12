"""One llc compile with a regalloc policy in the loop (and optionally the tracer).

This is the regalloc problems' compile step: llc only (the module was optimized once by
mlgo.regalloc.prepare), the greedy allocator's eviction or priority advisor in
interactive mode, our policy answering each decision over the FIFO pair, and:
- `trace=True`: the default heuristic stays in charge (the tracer plugin allocates with
  its answer and logs it next to the observation), so we get labelled default
  trajectories for behavioral cloning;
- the reward inputs: per-function spill/reload/copy cost from the greedy allocator's
  optimization remarks (see `remark_costs`).

Failures (crash, timeout, malformed stream) come back as `LlcResult(ok=False, reason)`,
never as exceptions, and never leave a process or FIFO behind.
"""
import dataclasses
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from typing import Callable, Optional

import numpy as np

from mlgo.regalloc import plugin as plugin_mod
from mlgo.regalloc.channel import ChannelReader

EVICTION = "regalloc_eviction"
PRIORITY = "regalloc_priority"
PROBLEMS = (EVICTION, PRIORITY)

# Weights of LLVM's RegAllocScore applied to the remark totals (already weighted by
# block frequency relative to the entry block): copies 0.2, loads (reloads) 4, stores
# (spills) 1, folded reloads (load+op) 4 and folded spills (op+store) 1. Lower is better.
COST_WEIGHTS = {
    "TotalCopiesCost": 0.2,
    "TotalReloadsCost": 4.0,
    "TotalSpillsCost": 1.0,
    "TotalFoldedReloadsCost": 4.0,
    "TotalFoldedSpillsCost": 1.0,
}


@dataclasses.dataclass
class FunctionTrajectory:
  name: str
  features: dict            # feature name -> [T, ...] array as the compiler sent it
  actions: np.ndarray       # [T] what we answered
  default_actions: Optional[np.ndarray] = None  # [T] (trace mode)
  policy_info: Optional[dict] = None  # per-step extras from the policy (logp, value)


@dataclasses.dataclass
class LlcResult:
  ok: bool
  reason: Optional[str]
  functions: dict           # function name -> cost (remarks); every function allocated
  trajectories: list        # FunctionTrajectory, functions with at least one decision
  decisions: int = 0
  corrections: int = 0
  seconds: float = 0.0
  obj_path: Optional[str] = None


def remark_costs(yaml_text: str) -> dict:
  """Per-function weighted cost from `SpillReloadCopies` remarks (function-level ones).

  Functions without the remark have nothing spilled, reloaded or copied: cost 0.
  """
  costs = {}
  for doc in yaml_text.split("\n---"):
    if "Name:            SpillReloadCopies" not in doc and "Name: SpillReloadCopies" not in doc:
      continue
    m = re.search(r"^Function:\s+(.+)$", doc, re.M)
    if not m:
      continue
    fn = m.group(1).strip().strip("'\"")
    total = 0.0
    for key, w in COST_WEIGHTS.items():
      for v in re.findall(r"%s:\s+'([^']+)'" % key, doc):
        total += w * float(v)
    costs[fn] = costs.get(fn, 0.0) + total
  return costs


def function_names(yaml_or_none, trajectories) -> list:
  return sorted({t.name for t in trajectories})


def _die_with_parent():
  """llc gets SIGKILL if our process dies: a killed driver must not leave llc spinning
  on its closed channel (InteractiveModelRunner retries reads at EOF forever)."""
  try:
    import ctypes  # pylint: disable=import-outside-toplevel
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
  except OSError:
    pass


class _Stop(Exception):
  pass


class _NotOpened(Exception):
  """llc ended without ever opening the channel (e.g. a module without functions)."""


def _wait_readable(fd: int, proc: subprocess.Popen, deadline: float) -> None:
  while True:
    r, _, _ = select.select([fd], [], [], 0.05)
    if r:
      return
    if proc.poll() is not None:
      return  # whatever it wrote is readable; EOF otherwise
    if time.monotonic() > deadline:
      raise _Stop("timeout waiting for llc's first observation")


def _open_fifo_write(path: str, proc: subprocess.Popen, deadline: float) -> int:
  while True:
    try:
      return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader yet
      if proc.poll() is not None:
        raise _NotOpened()
      if time.monotonic() > deadline:
        raise _Stop("timeout waiting for llc to read decisions")
      time.sleep(0.002)


def llc_argv(llc: str, bc_path: str, out_path: str, llc_flags, problem: Optional[str],
             channel_base: Optional[str], trace_log: Optional[str],
             remarks_path: Optional[str], plugin: Optional[str]) -> list:
  argv = [llc]
  if plugin:
    argv.append(f"-load={plugin}")
  argv += list(llc_flags)
  if problem == EVICTION and channel_base:
    argv += ["-regalloc-enable-advisor=release",
             f"-regalloc-evict-interactive-channel-base={channel_base}"]
    if trace_log:
      argv.append(f"-regalloc-evict-trace-log={trace_log}")
  elif problem == PRIORITY and channel_base:
    argv += ["-regalloc-enable-priority-advisor=release",
             f"-regalloc-priority-interactive-channel-base={channel_base}"]
    if trace_log:
      argv.append(f"-regalloc-priority-trace-log={trace_log}")
  if remarks_path:
    argv += [f"-pass-remarks-output={remarks_path}", "-pass-remarks-filter=regalloc"]
  argv += ["-filetype=obj", bc_path, "-o", out_path]
  return argv


def read_trace(path: str) -> dict:
  """A tracer log -> {function: {feature: [T] array}} (repeated contexts merged)."""
  out = {}
  fd = os.open(path, os.O_RDONLY)
  try:
    r = ChannelReader(fd)
    cur = ""
    while True:
      ev = r.next_event()
      if ev is None:
        break
      if ev[0] == "context":
        cur = ev[1]
        out.setdefault(cur, {n: [] for n in r.names})
        continue
      d = out.setdefault(cur, {n: [] for n in r.names})
      for n, v in ev[2].items():
        d[n].append(v.reshape(-1)[0])
  finally:
    os.close(fd)
  return {k: {n: np.asarray(v) for n, v in d.items()} for k, d in out.items()}


def lowest_valid_column(obs: dict) -> int:
  """Trace-mode answer: a valid column below 32 (see cc/regalloc_trace)."""
  mask = np.asarray(obs["mask"]).reshape(-1)
  idx = np.flatnonzero(mask[:32])
  return int(idx[0]) if len(idx) else 32


def run_llc(bc_path: str, llc_flags, problem: str,
            decide: Optional[Callable[[dict], object]] = None, *, trace: bool = False,
            llvm_version: int = 22, timeout: float = 300.0, keep_obj: Optional[str] = None,
            record_path: Optional[str] = None) -> LlcResult:
  """Compiles `bc_path` with llc, `decide(observation) -> action` in the loop.

  decide=None and trace=False: plain llc (the default allocator), reward inputs only.
  trace=True: the tracer keeps the default in charge and labels every decision.
  For eviction, answers are forced onto a column whose mask is 1 (LLVM 22 crashes on
  an invalid one); each forced change counts as a correction.
  """
  from mlgo.util.toolchain import toolchain
  start = time.monotonic()
  deadline = start + timeout
  tmp = tempfile.mkdtemp(prefix="mlgo-ra-")
  os.chmod(tmp, 0o700)
  proc = None
  fds = []
  try:
    tc = toolchain(llvm_version)
    obj = keep_obj or os.path.join(tmp, "out.o")
    remarks = os.path.join(tmp, "remarks.yaml")
    in_loop = decide is not None or trace
    base = os.path.join(tmp, "chan") if in_loop else None
    trace_log = os.path.join(tmp, "trace.log") if trace else None
    plugin = plugin_mod.plugin_path() if trace else None
    if in_loop:
      os.mkfifo(base + ".out", 0o600)
      os.mkfifo(base + ".in", 0o600)
    argv = llc_argv(tc.llc, bc_path, obj, llc_flags, problem if in_loop else None, base,
                    trace_log, remarks, plugin)
    errf = open(os.path.join(tmp, "stderr"), "wb+")
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=errf, preexec_fn=_die_with_parent)
    trajs = {}
    order = []
    decisions = corrections = 0
    if in_loop:
      if decide is None:
        decide = lowest_valid_column if problem == EVICTION else (lambda o: 0.0)
      try:
        # LLVM 22 opens <base>.in for reading first, then <base>.out for writing.
        # Our read end of .out is opened without blocking first, so whichever order
        # the compiler uses, neither side waits on the other.
        rfd = os.open(base + ".out", os.O_RDONLY | os.O_NONBLOCK)
        fds.append(rfd)
        wfd = _open_fifo_write(base + ".in", proc, deadline)
        fds.append(wfd)
        os.set_blocking(wfd, True)
        _wait_readable(rfd, proc, deadline)
        os.set_blocking(rfd, True)
        reader = ChannelReader(rfd)
        current = ""
        while True:
          ev = reader.next_event()
          if ev is None:
            break
          if ev[0] == "context":
            current = ev[1]
            continue
          obs = ev[2]
          a = decide(obs)
          info = None
          if isinstance(a, tuple):
            a, info = a
          if problem == EVICTION:
            a = int(np.asarray(a).reshape(-1)[0])
            mask = obs["mask"].reshape(-1)
            if not (0 <= a < mask.shape[0]) or mask[a] != 1:
              corrections += 1
              a = lowest_valid_column(obs) if mask[32] != 1 or trace else 32
              if mask[a] != 1:
                a = int(np.flatnonzero(mask)[0])
            payload = np.int64(a).tobytes()
          else:
            a = float(np.asarray(a, dtype=np.float32).reshape(-1)[0])
            if not np.isfinite(a):
              corrections += 1
              a = 0.0
            payload = np.float32(a).tobytes()
          os.write(wfd, payload)
          decisions += 1
          t = trajs.get(current)
          if t is None:
            t = trajs[current] = {"obs": [], "act": [], "info": []}
            order.append(current)
          t["obs"].append(obs)
          t["act"].append(a)
          t["info"].append(info)
          if time.monotonic() > deadline:
            raise _Stop("timeout")
      except _NotOpened:
        pass
      except _Stop as e:
        return _fail(proc, str(e), tmp, start)
      except Exception as e:  # malformed stream, broken pipe
        return _fail(proc, f"channel error: {type(e).__name__}: {e}", tmp, start)
    try:
      rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
      return _fail(proc, "timeout", tmp, start)
    if rc != 0:
      errf.seek(0)
      tail = errf.read()[-400:].decode("utf-8", "replace").strip()
      return _fail(proc, f"llc exited with {rc}: {tail}", tmp, start)
    with open(remarks) as f:
      costs = remark_costs(f.read())
    trajectories = []
    defaults = {}
    if trace:
      key = "default_index" if problem == EVICTION else "default_priority"
      for name, feats in read_trace(trace_log).items():
        defaults[name] = feats[key].reshape(-1)
        if problem == EVICTION and name in trajs:
          # The tracer maps the ML advisor's register back to a column with its own
          # reading of the allocation order; it must agree with what we answered.
          ours = np.asarray(trajs[name]["act"], np.int64)
          theirs = feats["policy_index"].reshape(-1)
          if len(ours) != len(theirs) or not np.array_equal(ours, theirs):
            return _fail(proc, f"tracer column mapping disagrees with the channel in "
                         f"{name}: the tracer does not match this LLVM", tmp, start)
    for name in order:
      t = trajs[name]
      feats = {k: np.stack([o[k] for o in t["obs"]]) for k in t["obs"][0]}
      acts = np.asarray(t["act"], dtype=np.int64 if problem == EVICTION else np.float32)
      d = defaults.get(name) if trace else None
      if trace and (d is None or len(d) != len(acts)):
        return _fail(proc, f"trace of {name} has {0 if d is None else len(d)} decisions, "
                     f"channel had {len(acts)}", tmp, start)
      info = None
      if t["info"] and t["info"][0] is not None:
        info = {k: np.asarray([i[k] for i in t["info"]]) for k in t["info"][0]}
      trajectories.append(FunctionTrajectory(name, feats, acts, d, info))
      costs.setdefault(name, 0.0)
    return LlcResult(True, None, costs, trajectories, decisions, corrections,
                     time.monotonic() - start, obj if keep_obj else None)
  except Exception as e:
    return _fail(proc, f"{type(e).__name__}: {e}", tmp, start)
  finally:
    for fd in fds:
      try:
        os.close(fd)
      except OSError:
        pass
    if proc is not None and proc.poll() is None:
      proc.kill()
      proc.wait()
    shutil.rmtree(tmp, ignore_errors=True)


def _fail(proc, reason, tmp, start) -> LlcResult:
  if proc is not None and proc.poll() is None:
    proc.kill()
    proc.wait()
  return LlcResult(False, reason, {}, [], 0, 0, time.monotonic() - start)
