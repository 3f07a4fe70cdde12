"""compile_module: run the compiler with the interactive channel and a policy in the loop.

One loop for every problem: clang or llc (prepared llc-only modules too), the policy
answering each observation, the problem's reward from the compiler's outputs, the
default tracer plugin as an option. The process, FIFO and deadline handling is in
mlgo.env.process; this module reads observations, answers them and scores the result.
"""
import dataclasses
import os
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Optional

import numpy as np

from mlgo import log as log_lib
from mlgo.env import modules as modules_lib
from mlgo.env.process import Process, open_channel
from mlgo.env import tracer as tracer_lib
from mlgo.env.policies import CompilerDefault, DefaultPolicy
from mlgo.problems import get_problem
from mlgo.util import toolchain as toolchain_lib

DEFAULT_TIMEOUT = 300.0


@dataclasses.dataclass
class Trajectory:
  context: str                    # function (regalloc) or "" (inlining: the module)
  features: dict                  # name -> [n, *shape] array, the policy-visible features
  actions: np.ndarray             # [n] actions sent (after mask/validity correction)
  default_actions: Optional[np.ndarray]  # [n] the compiler's default (inlining), else None

  def __len__(self):
    return len(self.actions)


@dataclasses.dataclass
class CompileResult:
  module: object
  ok: bool
  reason: Optional[str]
  trajectories: list
  reward: dict
  decisions: int
  seconds: float
  corrections: int = 0
  stderr: str = ""
  annotations: Optional[dict] = None   # what an annotator extracted (e.g. per-decision credit)

  @property
  def module_name(self) -> str:
    return getattr(self.module, "name", str(self.module))


class _Failure(Exception):
  """Internal: ends a compile with a structured failure reason."""


class _Tee:
  """A read1() source that also writes what it reads to a file (for --record)."""

  def __init__(self, fd: int, out):
    self.fd, self.out = fd, out

  def read1(self, n: int = 65536) -> bytes:
    b = os.read(self.fd, n)
    if b:
      self.out.write(b)
    return b

  read = read1


def _tool_argv(module, problem, tc, tmp, base, tool_path, extra_flags, default_policy,
               trace_log=None, llvm_version=toolchain_lib.DEFAULT_LLVM_VERSION,
               want_object: bool = True):
  """(argv, output object path|None, remarks path|None). base=None: no channel (the
  compiler's own default). trace_log: load the problem's tracer, logging there.
  want_object=False (llc only): no object is written, the path is None."""
  obj = os.path.join(tmp, "out.o")
  flags = problem.channel_flags(base, default_policy) if base else []
  if trace_log:
    if problem.tool != "llc" or problem.tracer is None:
      raise _Failure(f"{problem.name} has no tracer")
    flags = [f"-load={tracer_lib.plugin_path(llvm_version)}"] + flags + [
        f"{problem.tracer.log_option}={trace_log}"]
  flags += list(extra_flags)
  if problem.reward_flags:
    flags += (list(problem.reward_flags) if problem.tool == "llc" else
              [x for f in problem.reward_flags for x in ("-mllvm", f)])
  remarks = None
  if problem.remarks_filter:
    remarks = os.path.join(tmp, "remarks.yaml")
    flags += [f"-pass-remarks-output={remarks}",
              f"-pass-remarks-filter={problem.remarks_filter}"]
  if problem.tool == "clang":
    if not hasattr(module, "compile_argv"):
      raise _Failure(f"{problem.name} needs a module with clang cc1 flags "
                     f"(a corpus module or a .bc with its .cmd)")
    return module.compile_argv(tool_path or tc.clang, obj, flags), obj, remarks
  llc_mod = modules_lib.llc_input(module, tmp, tc.clang)
  if not want_object:
    return (llc_mod.llc_argv(tool_path or tc.llc, os.devnull, flags, filetype="null"), None,
            remarks)
  return llc_mod.llc_argv(tool_path or tc.llc, obj, flags), obj, remarks


def channel_argv(module, problem_name: str, base: str, workdir: str, *,
                 llvm_version: int = toolchain_lib.DEFAULT_LLVM_VERSION,
                 default_policy: bool = True):
  """(argv, object path): the compiler command compile_module runs, talking over the
  channel at `base` (for tools that put their own answerer on the channel)."""
  tc = toolchain_lib.toolchain(llvm_version)
  argv, obj, _ = _tool_argv(module, get_problem(problem_name), tc, workdir, base, None, (),
                            default_policy)
  return argv, obj


def _check_header(reader, problem):
  names = [s.name for s in reader.header]
  missing = [n for n in problem.feature_names + list(problem.hidden_features)
             if n not in names]
  if missing:
    raise _Failure(f"compiler sent an unexpected header: missing features {missing[:5]} "
                   f"(got {names[:5]}...); is this the {problem.name} channel?")
  specs = {s.name: s for s in reader.header}
  for f in problem.features:
    got = specs[f.name]
    if np.dtype(got.dtype) != np.dtype(f.dtype) or tuple(got.shape) != tuple(f.shape):
      raise _Failure(f"feature {f.name}: compiler sends {np.dtype(got.dtype).name}"
                     f"{list(got.shape)}, expected {np.dtype(f.dtype).name}{list(f.shape)}")
  advice = getattr(reader, "advice", None)
  if advice is not None and (np.dtype(advice.dtype) != problem.action.dtype or
                             int(np.prod(advice.shape)) != int(np.prod(problem.action.shape))):
    raise _Failure(f"compiler expects advice {advice.name} {np.dtype(advice.dtype).name}"
                   f"{list(advice.shape)}, problem answers {problem.action.dtype.name}"
                   f"{list(problem.action.shape)}")
  return names


class _Timed:
  """Wraps a callable, adding its wall time to profile[key] (bench_env's breakdown)."""

  def __init__(self, fn, profile, key):
    self.fn, self.profile, self.key = fn, profile, key
    profile.setdefault(key, 0.0)

  def __call__(self, *a):
    t = time.perf_counter()
    try:
      return self.fn(*a)
    finally:
      self.profile[self.key] += time.perf_counter() - t


class _Packer:
  """Stores each observation's policy-visible features as one flat row per dtype (one
  numpy call per decision) and unpacks them into per-feature [n, *shape] arrays."""

  def __init__(self, features):
    groups = {}
    for f in features:
      groups.setdefault(np.dtype(f.dtype), []).append(f)
    self.groups = [(dt, [f.name for f in fs], fs) for dt, fs in groups.items()]

  def pack(self, obs):
    return [np.concatenate([obs[n] for n in names], axis=None).astype(dt, copy=False)
            for dt, names, _ in self.groups]

  def unpack(self, rows) -> dict:
    out = {}
    n = len(rows)
    for g, (_, _, fs) in enumerate(self.groups):
      block = np.stack([r[g] for r in rows])
      off = 0
      for f in fs:
        size = int(np.prod(f.shape))
        out[f.name] = np.ascontiguousarray(block[:, off:off + size]).reshape((n,) + tuple(f.shape))
        off += size
    return out


def _run_loop(reader, wfd_holder, base, proc, deadline, problem, policy, llvm_version,
              profile=None):
  """Reads observations, answers them; returns (contexts, decisions, corrections)."""
  names = None
  wfd = wfd_holder[0]
  packer = _Packer(problem.features)
  pack = packer.pack
  prepare, validate = problem.prepare, problem.validate
  default_fn = problem.default_action
  is_default = isinstance(policy, DefaultPolicy)
  act = policy.act
  enter_function = getattr(policy, "enter_function", None)   # e.g. FunctionRouter
  has_defaults = bool(problem.hidden_features)
  contexts = {}
  order = []
  cur = None
  decisions = corrections = 0
  Observation, Context = log_lib.Observation, log_lib.Context
  next_event, write = reader.next_event, os.write
  if profile is not None:
    next_event = _Timed(next_event, profile, "read")
    act = _Timed(act, profile, "policy")
    default_fn = _Timed(default_fn, profile, "policy")
    write = _Timed(write, profile, "write")
  while True:
    ev = next_event()
    if ev is None:
      break
    if names is None:
      names = _check_header(reader, problem)
    if type(ev) is Context:  # pylint: disable=unidiomatic-typecheck
      if enter_function is not None:
        enter_function(ev.name)
      cur = contexts.get(ev.name)
      if cur is None:
        cur = contexts[ev.name] = ([], [], [])
        order.append(ev.name)
      continue
    if type(ev) is not Observation:  # pylint: disable=unidiomatic-typecheck
      continue  # outcomes: interactive streams carry none
    if cur is None:
      cur = contexts[""] = ([], [], [])
      order.append("")
    obs = dict(zip(names, ev.features))
    obs, default = prepare(obs, llvm_version)
    if is_default:
      action = default_fn(obs)
    else:
      try:
        action = act(obs)
      except Exception as e:  # a policy bug must not take the worker down
        raise _Failure(f"policy raised {type(e).__name__}: {e}") from None
    try:
      action, corrected = validate(action, obs)
    except (TypeError, ValueError, OverflowError, IndexError) as e:
      raise _Failure(f"policy returned an unusable action {action!r} ({e})") from None
    corrections += corrected
    try:
      write(wfd, action.tobytes())
    except BlockingIOError:  # 64 KiB of answers unread: it is not reading its input
      raise _Failure("the compiler does not read its decisions") from None
    except OSError as e:
      raise _Failure(f"writing the decision failed ({e.strerror or e})") from None
    cur[0].append(pack(obs))
    cur[1].append(action)
    if has_defaults:
      cur[2].append(default)
    decisions += 1
  trajs = []
  for name in order:
    rows, acts, dfl = contexts[name]
    if not rows:
      continue
    feats = packer.unpack(rows)
    trajs.append(Trajectory(name, feats, np.array(acts, dtype=problem.action.dtype),
                            np.array(dfl, dtype=problem.action.dtype) if has_defaults
                            else None))
  return trajs, decisions, corrections, order


class _TracerAnswer:
  """The answer sent while the tracer keeps the default in charge."""

  def __init__(self, fn):
    self.act = fn


def _attach_trace(problem, trace_log, trajs):
  """Sets each trajectory's default_actions from the tracer's log (same decisions in
  the same order per function); checks the tracer read our answers as we sent them."""
  tr = problem.tracer
  logs = {c.name: c for c in log_lib.read_log(trace_log)} if trajs else {}
  for t in trajs:
    c = logs.get(t.context)
    n = 0 if c is None else len(c)
    if n != len(t.actions):
      raise ValueError(f"the tracer logged {n} decisions of {t.context}, the channel had "
                       f"{len(t.actions)}")
    if tr.policy_feature:
      theirs = np.asarray(c.features[tr.policy_feature]).reshape(-1)
      if not np.array_equal(theirs.astype(np.int64), np.asarray(t.actions, np.int64)):
        raise ValueError(f"the tracer's column mapping disagrees with the channel in "
                         f"{t.context}: the tracer does not match this LLVM")
    t.default_actions = np.asarray(c.features[tr.default_feature]).reshape(-1).astype(
        problem.action.dtype)


_SHM = "/dev/shm"
_use_shm = None


def _private_dir() -> str:
  """A fresh mode-0700 directory for one compile's FIFOs and outputs.

  On tmpfs (/dev/shm) when usable: creating and removing the directory there costs
  ~0.05 ms instead of ~1.6 ms on the ext4 /tmp here. MLGO_ENV_TMPDIR takes precedence.
  """
  global _use_shm
  explicit = os.environ.get("MLGO_ENV_TMPDIR")
  if explicit:
    return tempfile.mkdtemp(prefix="mlgo-env-", dir=explicit)
  if _use_shm is not False:
    try:
      d = tempfile.mkdtemp(prefix="mlgo-env-", dir=_SHM)
      _use_shm = True
      return d
    except OSError:
      _use_shm = False
  return tempfile.mkdtemp(prefix="mlgo-env-")


def compile_module(module, problem, policy, *, llvm_version: int = toolchain_lib.DEFAULT_LLVM_VERSION,
                   timeout: float = DEFAULT_TIMEOUT, record_path=None, tool_path=None,
                   extra_flags=(), output_path=None, profile=None,
                   trace: bool = False, annotator=None) -> CompileResult:
  """Compiles `module` with `policy` answering every decision of `problem`.

  policy=CompilerDefault(): no channel at all, the compiler's own heuristic (the
  reference compile; no trajectories). trace=True (problems with a `tracer`): the
  tracer plugin keeps the default in charge and every trajectory gets the default's
  decisions in `default_actions`; `policy` is ignored (the tracer's answer is sent).
  tool_path overrides the compiler binary (fault tests use stand-ins); extra_flags go
  to the compiler (-mllvm-wrapped already for clang if needed); output_path keeps a
  copy of the object file; profile (a dict) accumulates seconds spent in "read",
  "policy" and "write" per decision. annotator (e.g. mlgo.credit.ir2native.Annotator):
  adds its compiler flags (`flags(tmpdir)`) and, after a good compile, reads the outputs
  in this process (`annotate(outputs, trajectories)`, outputs["tmpdir"] included) into
  result.annotations; its errors land in annotations["error"], the compile stays good.
  Never raises for compile failures.
  """
  t0 = time.monotonic()
  deadline = t0 + timeout
  problem = get_problem(problem)
  tmp = proc = rfd = None
  wfd_holder = [None]
  record = None
  trajs, decisions, corrections = [], 0, 0

  def fail(reason):
    return CompileResult(module, False, reason, [], {}, decisions, time.monotonic() - t0,
                         corrections, proc.stderr_tail() if proc else "")

  try:
    tmp = _private_dir()  # mode 0700
    channel = not isinstance(policy, CompilerDefault)
    base = os.path.join(tmp, "channel") if channel else None
    trace_log = os.path.join(tmp, "trace.log") if trace else None
    if trace:
      if problem.tracer is None:
        raise _Failure(f"{problem.name} has no tracer (its channel sends the default)")
      policy = _TracerAnswer(problem.tracer.answer)
    if channel:
      os.mkfifo(base + ".out", 0o600)
      os.mkfifo(base + ".in", 0o600)
    tc = toolchain_lib.toolchain(llvm_version)
    if annotator is not None:
      extra_flags = list(extra_flags) + list(annotator.flags(tmp))
    # The object only where something reads it: the reward, a kept copy, an annotator or
    # a caller's own flags (e.g. a block address map) may; a remarks reward does not.
    # (clang compiles always write one: _tool_argv reads this for llc only.)
    want_object = (problem.reward_needs_object or bool(output_path) or bool(extra_flags)
                   or annotator is not None)
    argv, obj, remarks = _tool_argv(module, problem, tc, tmp, base, tool_path, extra_flags,
                                    isinstance(policy, DefaultPolicy), trace_log,
                                    llvm_version, want_object)
    proc = Process(argv, os.path.join(tmp, "stderr.txt"), deadline)
    early_rc, silent = None, False
    if channel:
      rfd, wfd_holder[0], early_rc, silent = open_channel(base, proc, deadline)
    order = []
    if early_rc is not None and proc.timed_out:  # the watchdog was first
      return fail(f"timeout after {timeout:g}s (the compiler never opened the channel)")
    if not channel:
      pass  # the reference compile: nothing to answer, just wait for it below
    elif early_rc is not None:
      if early_rc != 0:
        return fail(proc.exit_reason(early_rc, before_channel=True))
      # Exited cleanly without asking anything (e.g. a module without call sites).
    elif silent:
      proc.timed_out = True
      return fail(f"timeout after {timeout:g}s (the compiler never opened the channel)")
    else:
      os.set_blocking(rfd, True)
      source = rfd
      if record_path:
        record = open(record_path, "wb")
        source = _Tee(rfd, record)
      reader = log_lib.StreamReader(source)
      try:
        trajs, decisions, corrections, order = _run_loop(
            reader, wfd_holder, base, proc, deadline, problem, policy, llvm_version,
            profile)
      except log_lib.LogFormatError as e:
        proc.kill()
        rc = proc.finish(deadline)
        if proc.timed_out:
          return fail(f"timeout after {timeout:g}s")
        if rc < 0 and rc != -signal.SIGKILL:
          return fail(proc.exit_reason(rc))
        if str(getattr(e, "problem", "")).startswith("stream ends"):
          return fail(f"early EOF: {e}")
        return fail(f"malformed stream: {e}")
      except _Failure as e:
        proc.kill()
        rc = proc.finish(deadline)
        if proc.timed_out:
          return fail(f"timeout after {timeout:g}s")
        if rc not in (0, -signal.SIGKILL):
          return fail(proc.exit_reason(rc))
        return fail(str(e))
    rc = proc.finish(deadline)
    if proc.timed_out:
      return fail(f"timeout after {timeout:g}s")
    if rc != 0:
      return fail(proc.exit_reason(rc))
    if obj is not None and not os.path.exists(obj):
      return fail("compiler exited with status 0 but wrote no object file")
    try:
      reward = problem.reward_fn({"object": obj, "remarks": remarks, "contexts": order})
    except ValueError as e:
      return fail(f"unreadable compiler output: {e}")
    if trace:
      try:
        _attach_trace(problem, trace_log, trajs)
      except (ValueError, log_lib.LogFormatError) as e:
        return fail(f"trace: {e}")
    annotations = None
    if annotator is not None:
      try:
        annotations = annotator.annotate({"object": obj, "remarks": remarks,
                                          "contexts": order, "tmpdir": tmp}, trajs)
      except (ValueError, KeyError, OSError) as e:
        annotations = {"error": f"{type(e).__name__}: {e}"}
    if output_path:
      shutil.copyfile(obj, output_path)
    return CompileResult(module, True, None, trajs, reward, decisions,
                         time.monotonic() - t0, corrections, "", annotations)
  except _Failure as e:
    return fail(str(e))
  except (OSError, RuntimeError, subprocess.SubprocessError, toolchain_lib.ToolchainError) as e:
    return fail(f"environment error: {type(e).__name__}: {e}")
  except Exception as e:  # pylint: disable=broad-except
    # Anything else is our bug, but one module must not take a collection worker down.
    return fail(f"internal error: {type(e).__name__}: {e}")
  finally:
    if proc is not None:
      proc.close()
    for fd in (rfd, wfd_holder[0]):
      if fd is not None:
        try:
          os.close(fd)
        except OSError:
          pass
    if record is not None:
      record.close()
    if tmp is not None:
      shutil.rmtree(tmp, ignore_errors=True)


def plain_compile(module, problem, *, llvm_version: int = toolchain_lib.DEFAULT_LLVM_VERSION,
                  output_path: str, timeout: float = DEFAULT_TIMEOUT, tool_path=None,
                  extra_flags=()) -> float:
  """The same compile without the channel (the reference object); returns seconds.
  Raises subprocess.CalledProcessError/TimeoutExpired on failure."""
  problem = get_problem(problem)
  tc = toolchain_lib.toolchain(llvm_version)
  t0 = time.monotonic()
  with tempfile.TemporaryDirectory(prefix="mlgo-plain-") as tmp:
    if problem.tool == "clang":
      argv = module.compile_argv(tool_path or tc.clang, output_path, list(extra_flags))
    else:
      llc_mod = modules_lib.llc_input(module, tmp, tc.clang)
      t0 = time.monotonic()
      argv = llc_mod.llc_argv(tool_path or tc.llc, output_path, list(extra_flags))
    subprocess.run(argv, check=True, capture_output=True, timeout=timeout)
    return time.monotonic() - t0
