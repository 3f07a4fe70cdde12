"""Problems: what the policy decides inside the compiler, described as data.

A `Problem` says which tool runs (clang or llc), which flags turn on LLVM's interactive
channel, what the compiler sends (features), what it expects back (action), how the
compiler's default heuristic decides (or a deterministic stand-in when the channel does
not send it), how the reward is computed and scored (per module or per function), and
which network architecture its policies use. Collection, training, export and
evaluation code only talk to this description.

A new problem is one file plus one gin file, and nothing else names it: a module here
(or a file in a directory on $MLGO_PROBLEMS_PATH) whose `PROBLEMS` dict maps each name it
defines to a function that returns its `Problem`, and `configs/NAME.gin` (or NAME.gin
beside a file from $MLGO_PROBLEMS_PATH) with its budgets and hyperparameters. A reward
variant without a gin file of its own uses its base problem's.

    problem = mlgo.problems.get_problem("inlining")
    problem.features      # list[FeatureSpec] the policy sees
    problem.action        # ActionSpec(name, dtype, shape, low, high)

Defined here: "inlining" and "inlining_ir2vec" (inlining.py; the variant also sends the
callee's and caller's instruction mix, ir2vec.py), "inlining_ctx" and
"inlining_ir2vec_ctx" (call-site context features from a clang plugin),
"regalloc_eviction" and "regalloc_priority" (regalloc.py), and their "_perf" variants
scored by the learned performance model. Each module's docstring documents its reward
precisely.
"""
import hashlib
import importlib
import importlib.util
import os
import pathlib
import pkgutil
import sys

from mlgo.problems.base import ActionSpec, Problem, ProblemError

PATH_VARIABLE = "MLGO_PROBLEMS_PATH"
_REGISTRY: dict = {}   # name -> factory, filled on first use (_registry)
_SOURCES: dict = {}    # name -> the file that defines it
_CACHE: dict = {}
_BUILT_FOR: list = []  # the $MLGO_PROBLEMS_PATH the registry was filled for


def _load_file(path: pathlib.Path):
  """A problem file outside the package, imported under a name derived from its path
  (so worker processes that load it again pickle its functions by the same name)."""
  digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
  name = f"mlgo_problem_file_{path.stem}_{digest}"
  if name in sys.modules:
    return sys.modules[name]
  spec = importlib.util.spec_from_file_location(name, path)
  module = importlib.util.module_from_spec(spec)
  sys.modules[name] = module
  try:
    spec.loader.exec_module(module)
  except Exception as e:
    del sys.modules[name]
    raise ProblemError(f"{path}: cannot load this problem file: {type(e).__name__}: {e}") from e
  return module


def _problem_modules():
  for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
    yield importlib.import_module(f"{__name__}.{info.name}")
  for d in filter(None, os.environ.get(PATH_VARIABLE, "").split(os.pathsep)):
    if not pathlib.Path(d).is_dir():
      raise ProblemError(f"${PATH_VARIABLE}: {d} is not a directory")
    for f in sorted(pathlib.Path(d).glob("*.py")):
      yield _load_file(f)


def _registry() -> dict:
  """name -> factory; filled again when $MLGO_PROBLEMS_PATH changed since."""
  path = os.environ.get(PATH_VARIABLE, "")
  if _BUILT_FOR == [path]:
    return _REGISTRY
  found, sources = {}, {}
  for module in _problem_modules():
    table = getattr(module, "PROBLEMS", None)
    if table is None:
      if not module.__name__.startswith(__name__ + "."):
        raise ProblemError(f"{module.__file__}: defines no PROBLEMS dict "
                           "(name -> function returning a Problem)")
      continue  # helper modules of the package (base, ir2vec)
    if not isinstance(table, dict) or not all(
        isinstance(k, str) and callable(v) for k, v in table.items()):
      raise ProblemError(f"{module.__file__}: PROBLEMS must map names to functions "
                         "that return a Problem")
    for name, factory in table.items():
      if name in found:
        raise ProblemError(f"problem {name!r} is defined twice: in {sources[name]} and "
                           f"in {module.__file__}")
      found[name], sources[name] = factory, module.__file__
  for table in (_REGISTRY, _SOURCES, _CACHE):
    table.clear()
  _REGISTRY.update(found)
  _SOURCES.update(sources)
  _BUILT_FOR[:] = [path]
  return _REGISTRY


def problem_names() -> list[str]:
  return list(_registry())


def get_problem(name: str) -> Problem:
  """The registered problem `name`; KeyError listing the known names otherwise."""
  if isinstance(name, Problem):
    return name
  registry = _registry()
  if name not in registry:
    raise KeyError(f"unknown problem {name!r}; known: {', '.join(registry)}")
  if name not in _CACHE:
    problem = registry[name]()
    if not isinstance(problem, Problem) or problem.name != name:
      raise ProblemError(f"{_SOURCES[name]}: PROBLEMS[{name!r}] must return the Problem "
                         f"named {name!r}, got {getattr(problem, 'name', problem)!r}")
    _CACHE[name] = problem
  return _CACHE[name]


def gin_file(name: str) -> pathlib.Path | None:
  """The problem's gin file: configs/NAME.gin in the checkout, else NAME.gin beside the
  file that defines it, else its base problem's (a reward or feature variant); None if
  there is none."""
  from mlgo.util.cli import repo_root  # pylint: disable=import-outside-toplevel
  problem = get_problem(name)
  root = repo_root()
  for path in ([root / "configs" / f"{name}.gin"] if root is not None else []) + [
      pathlib.Path(_SOURCES[name]).with_name(f"{name}.gin")]:
    if path.exists():
      return path
  if problem.variant_of and problem.variant_of != name:
    return gin_file(problem.variant_of)
  return None


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
           "gin_file", "problem_names", "same_decisions"]
