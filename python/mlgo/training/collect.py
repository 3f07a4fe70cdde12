"""Work items run by worker pools: one compile of one module with a policy in the loop."""
import time

from mlgo.training import envshim, policy_io

_DEFAULT = "default"


def policy_ref(policy_dir_or_spec, weights=None, greedy=True):
  """A picklable reference to a policy: "default" or (spec, weights, greedy)."""
  if policy_dir_or_spec == _DEFAULT:
    return _DEFAULT
  if weights is None:
    p = policy_io.load_policy(policy_dir_or_spec)
    return (p.spec, p.arch.w, greedy)
  return (policy_dir_or_spec, weights, greedy)


def make_policy(ref, seed=None):
  env, _ = envshim.env_and_problems()
  if ref == _DEFAULT:
    return env.DefaultPolicy()
  if hasattr(ref, "act"):  # a picklable policy object (e.g. mlgo.training.heuristics)
    return ref
  spec, weights, greedy = ref
  return policy_io.Policy(spec, weights, greedy=greedy, seed=seed)


def compile_one(module, problem_name: str, ref, seed=None, llvm_version: int = 22,
                timeout: float = 300.0, with_default: bool = False):
  """Compiles `module` with policy `ref`; with_default also compiles with the default
  heuristic first (for a missing baseline). Returns (result, default_result|None)."""
  env, problems = envshim.env_and_problems()
  problem = problems.get_problem(problem_name)
  default_result = None
  if with_default and ref != _DEFAULT:
    default_result = env.compile_module(module, problem, env.DefaultPolicy(),
                                        llvm_version=llvm_version, timeout=timeout)
  t0 = time.monotonic()
  result = env.compile_module(module, problem, make_policy(ref, seed),
                              llvm_version=llvm_version, timeout=timeout)
  if not getattr(result, "seconds", None):
    result.seconds = time.monotonic() - t0
  return result, default_result
