"""Problems: what the policy decides inside the compiler, described as data.

A `Problem` says which tool runs (clang or llc), which flags turn on LLVM's interactive
channel, what the compiler sends (features), what it expects back (action), how the
compiler's default heuristic decides (or a deterministic stand-in when the channel does
not send it), how the reward is computed and scored (per module or per function), and
which network architecture its policies use. Collection, training, export and
evaluation code only talk to this description: a new problem is a file here (plus a gin
file), registered in the table below.

    problem = mlgo.problems.get_problem("inlining")
    problem.features      # list[FeatureSpec] the policy sees
    problem.action        # ActionSpec(name, dtype, shape, low, high)

Registered: "inlining" and "inlining_ir2vec" (inlining.py; the variant also sends the
callee's and caller's instruction mix, ir2vec.py), "inlining_ctx" and
"inlining_ir2vec_ctx" (call-site context features from a clang plugin), "regalloc_eviction" and "regalloc_priority"
(regalloc.py), and their "_perf" variants scored by the learned performance model.
Each module's docstring documents its reward precisely.
"""
from mlgo.problems.base import ActionSpec, Problem, ProblemError
from mlgo.problems import inlining as _inlining
from mlgo.problems import regalloc as _regalloc

_REGISTRY = {
    "inlining": _inlining.make_problem,
    "inlining_ir2vec": lambda: _inlining.make_problem(with_ir2vec=True),
    # Call-site context from the context plugin (inlining.CONTEXT_FEATURES).
    "inlining_ctx": lambda: _inlining.make_problem(with_context=True),
    "inlining_ir2vec_ctx": lambda: _inlining.make_problem(with_ir2vec=True, with_context=True),
    "regalloc_eviction": _regalloc.make_eviction_problem,
    "regalloc_priority": _regalloc.make_priority_problem,
    # The same decisions scored by the learned performance model (regalloc.py).
    "regalloc_eviction_perf": lambda: _regalloc.with_perf_reward(
        _regalloc.make_eviction_problem()),
    "regalloc_priority_perf": lambda: _regalloc.with_perf_reward(
        _regalloc.make_priority_problem()),
}
_CACHE: dict = {}


def problem_names() -> list[str]:
  return list(_REGISTRY)


def get_problem(name: str) -> Problem:
  """The registered problem `name`; KeyError listing the known names otherwise."""
  if isinstance(name, Problem):
    return name
  if name not in _REGISTRY:
    raise KeyError(f"unknown problem {name!r}; known: {', '.join(_REGISTRY)}")
  if name not in _CACHE:
    _CACHE[name] = _REGISTRY[name]()
  return _CACHE[name]


def same_decisions(a, b) -> bool:
  """Whether a policy of problem `a` can decide for problem `b`: the same channel,
  features and action (a reward variant such as regalloc_eviction_perf of
  regalloc_eviction), whatever reward each scores."""
  a, b = get_problem(a), get_problem(b)
  return (a.name == b.name or
          (a.tool == b.tool and a.channel_option == b.channel_option and
           a.features == b.features and a.action == b.action))


def decision_problem(name) -> str:
  """The problem a policy trained on `name` decides for: the base problem of a reward
  variant (a regalloc_eviction_perf policy is an eviction policy that export, the
  plugin and the release compiler take as such), else `name` itself."""
  p = get_problem(name)
  if p.variant_of and same_decisions(p.variant_of, p):
    return p.variant_of
  return p.name


__all__ = ["ActionSpec", "Problem", "ProblemError", "decision_problem", "get_problem",
           "problem_names", "same_decisions"]
