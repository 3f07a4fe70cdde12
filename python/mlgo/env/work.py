"""Work items run by worker pools: one compile of one module with a policy in the loop.

A policy reference is "default" (the problem's reference: DefaultPolicy where the
channel sends the default, else the compile without the channel), "trace" (the
problem's tracer labels the default's decisions) or (spec, weights, greedy)."""
import functools
import os
import time

from mlgo import problems as problems_lib
from mlgo.env import core, policies
from mlgo.policy import policy_io

_DEFAULT = "default"


def policy_ref(policy_dir_or_spec, weights=None, greedy=True):
  """A picklable reference to a policy: "default" or (spec, weights, greedy)."""
  if policy_dir_or_spec == _DEFAULT:
    return _DEFAULT
  if weights is None:
    p = policy_io.load_policy(policy_dir_or_spec)
    return (p.spec, p.arch.w, greedy)
  return (policy_dir_or_spec, weights, greedy)


def make_policy(ref, seed=None, problem=None):
  if ref == _DEFAULT:
    return policies.reference_policy(problem) if problem is not None else policies.DefaultPolicy()
  if hasattr(ref, "act"):  # a picklable policy object (e.g. policies.ThresholdShift)
    return ref
  spec, weights, greedy = ref
  return policy_io.Policy(spec, weights, greedy=greedy, seed=seed)


def compile_one(module, problem_name: str, ref, seed=None, llvm_version: int = 22,
                timeout: float = 300.0, with_default: bool = False, annotator=None):
  """Compiles `module` with policy `ref`; with_default also compiles with the default
  heuristic first (for a missing baseline); annotator (mlgo.credit) reads the policy
  compile's outputs in the worker. Returns (result, default_result|None)."""
  problem = problems_lib.get_problem(problem_name)
  default_result = None
  if with_default and ref != _DEFAULT:
    default_result = core.compile_module(module, problem, policies.reference_policy(problem),
                                        llvm_version=llvm_version, timeout=timeout)
  t0 = time.monotonic()
  if ref == "trace":
    result = core.compile_module(module, problem, None, llvm_version=llvm_version,
                                timeout=timeout, trace=True)
  else:
    result = core.compile_module(module, problem, make_policy(ref, seed, problem),
                                llvm_version=llvm_version, timeout=timeout,
                                annotator=annotator)
  if not getattr(result, "seconds", None):
    result.seconds = time.monotonic() - t0
  return result, default_result


@functools.lru_cache(maxsize=None)
def _file_size(path) -> int:
  try:
    return os.path.getsize(path)
  except (OSError, TypeError):
    return 0


def largest_first(modules) -> list:
  """Indices of `modules`, biggest bitcode first (ties in the given order): the order to
  hand compiles to a few workers, so that a big module is not the last to start while
  the other workers idle. Callers keep results in their own order, so this can change
  how long a step takes (on 2 cores no measurable time, stop 68), never what it
  computes."""
  sizes = [_file_size(getattr(m, "bc_path", None)) for m in modules]
  return sorted(range(len(modules)), key=lambda i: -sizes[i])


def load_policy_for(policy_dir, problem_name: str):
  """The policy in `policy_dir`, checked to answer `problem_name`'s decisions."""
  policy = policy_io.load_policy(policy_dir)
  if policy.problem != problems_lib.decision_problem(problem_name):
    raise ValueError(f"{policy_dir}: a policy for {policy.problem}, not for {problem_name}")
  return policy


def select_modules(corpus, split: str = "train", names=None) -> list:
  """The modules a tool compiles: those named in `names` (in corpus order), else the
  split's ("all": every module)."""
  if names is not None:
    want = set(names)
    return [m for m in corpus.modules if m.name in want]
  return corpus.split(split) if split != "all" else list(corpus.modules)


def corpus_for(corpus_dir, problem, jobs: int = 2, stream=None):
  """The corpus a problem compiles: the corpus itself for clang problems, its prepared
  (optimized-once) form for llc problems (mlgo.env.prepared)."""
  import sys  # pylint: disable=import-outside-toplevel
  problem = problems_lib.get_problem(problem)
  if problem.tool == "llc":
    import pathlib  # pylint: disable=import-outside-toplevel
    from mlgo.env import prepared  # pylint: disable=import-outside-toplevel
    if isinstance(corpus_dir, (str, pathlib.Path)) and \
        (pathlib.Path(corpus_dir) / "manifest.json").exists():
      return prepared.load_prepared(corpus_dir)   # already a prepared corpus
    return prepared.prepare(corpus_dir, jobs=jobs, stream=stream or sys.stderr)
  if hasattr(corpus_dir, "modules"):
    return corpus_dir
  from mlgo import corpus as corpus_lib  # pylint: disable=import-outside-toplevel
  return corpus_lib.load_corpus(corpus_dir)
