"""Helpers for command-line entry points run through `bazel run`."""
import os
import pathlib


def user_path(path: str | os.PathLike) -> pathlib.Path:
  """Resolves a path the user typed relative to where they ran `bazel run`.

  `bazel run` starts the program inside its runfiles tree; Bazel passes the user's
  directory in BUILD_WORKING_DIRECTORY, so relative paths must be anchored there.
  """
  p = pathlib.Path(os.path.expanduser(str(path)))
  if p.is_absolute():
    return p
  base = os.environ.get("BUILD_WORKING_DIRECTORY") or os.getcwd()
  return pathlib.Path(base) / p


def mlgo_home() -> pathlib.Path:
  """Cache directory for corpora, venvs and prepared artifacts (MLGO_HOME)."""
  return pathlib.Path(os.environ.get("MLGO_HOME") or pathlib.Path.home() / ".cache" / "mlgo")


def repo_root() -> pathlib.Path | None:
  """The source checkout, when known (bazel run sets BUILD_WORKSPACE_DIRECTORY)."""
  ws = os.environ.get("BUILD_WORKSPACE_DIRECTORY")
  if ws:
    return pathlib.Path(ws)
  here = pathlib.Path(__file__).resolve()
  for parent in here.parents:
    if (parent / "WORKSPACE").exists():
      return parent
  return None


def policy_path(value: str) -> pathlib.Path:
  """A tool's --policy value: the path as the user typed it, or else the same path in
  the checkout (so `--policy=models/inlining_oz` works from any directory)."""
  p = user_path(value)
  root = repo_root()
  if not p.exists() and root is not None and (root / value).exists():
    return root / value
  return p


def runfile_candidates(rel: str) -> list[pathlib.Path]:
  """Where Bazel puts the file `rel` (repository-relative) for the running program: the
  runfiles trees of `bazel run`/`bazel test` (RUNFILES_DIR, TEST_SRCDIR, or the .runfiles
  directory this module sits in), under the workspace name or not. Existence unchecked."""
  roots = [pathlib.Path(os.environ[v]) for v in ("RUNFILES_DIR", "TEST_SRCDIR")
           if os.environ.get(v)]
  roots += [p for p in pathlib.Path(__file__).resolve().parents if p.name.endswith(".runfiles")]
  out = []
  for r in roots:
    out += [r / "mlgo" / rel, r / "__main__" / rel, r / rel]
  return out


def built_file(rel: str) -> pathlib.Path | None:
  """A Bazel-built file of this repository (e.g. cc/x/tool): from the runfiles, else from
  the checkout's bazel-bin; None if it is not built."""
  cands = runfile_candidates(rel)
  root = repo_root()
  if root is not None:
    cands.append(root / "bazel-bin" / rel)
  return next((c for c in cands if c.exists()), None)


def add_candidate_flags(ap, guard: str = "--guarded"):
  """--candidates and --samples: more allocations for a per-function guard to choose
  from (mlgo.env.guarded.candidate_policies); read back with candidate_dirs."""
  ap.add_argument("--candidates", default="",
                  help=f"with {guard}: more policy dirs, comma-separated; each function "
                       "gets the best of the default, --policy and these")
  ap.add_argument("--samples", type=int, default=0,
                  help=f"with {guard}: also N sampled allocations of --policy as "
                       "candidates (each function with its own seed)")
  add_spill_code_flag(ap, "with --guarded: ")


# The per-function (regalloc) problems a guarded build can be judged by: the base
# problems by the remarks cost, their _perf variants by the learned performance model.
GUARD_PROBLEMS = ("regalloc_eviction", "regalloc_priority",
                  "regalloc_eviction_perf", "regalloc_priority_perf")


def add_guard_problem_flag(ap):
  """--problem for the tools that build programs with a regalloc policy: its decisions,
  and, for --guarded, the reward that judges each function."""
  ap.add_argument("--problem", default="regalloc_eviction", choices=GUARD_PROBLEMS,
                  help="the policy's problem; with --guarded also the judge of each "
                       "function (a _perf variant: the learned performance model's "
                       "estimated cycles, else the allocator's remarks cost)")


# The static guard's rules (mlgo.env.guarded.spill_code_rule): defined here, below env,
# so the flag offers exactly what the guard takes.
SPILL_CODE_RULES = ("function", "loops", "perf", "robust", "trades")


def add_spill_code_flag(ap, prefix: str = ""):
  """--no_more_spill_code[=function|loops|perf|robust|trades]: the static guard's rule
  (mlgo.env.guarded); alone it means "function"."""
  ap.add_argument("--no_more_spill_code", nargs="?", const="function", default=None,
                  choices=SPILL_CODE_RULES,
                  help=prefix + "a policy's or candidate's allocation wins a function only "
                       "if it also adds no spill code counted without block frequencies: "
                       "in the whole function (function, the default), or inside loops at "
                       "every nesting depth (loops; read from the objects); or (perf) only "
                       "if the learned performance model does not estimate it slower "
                       "than the default's; or (robust) only if its frequency-weighted "
                       "spill code is not larger however LLVM's estimated trip counts "
                       "are wrong, by up to 4x at each loop level; or (trades) only if "
                       "it does not add spill code at one loop depth while removing some "
                       "at a deeper one")


def add_final_flag(ap, default: str, prefix: str = ""):
  """--final: which binary the measured guard ships (measured_guard.fastest_binary)."""
  ap.add_argument("--final", choices=("fastest", "routed"), default=default,
                  help=prefix + "fastest: the fastest binary measured on the choice's own "
                       "workload (the per-function routed build, one allocation's whole "
                       "build, or clang's); routed: always the routed build "
                       f"(default: {default})")


def candidate_dirs(ap, a, guarded: bool) -> list:
  """The --candidates dirs (add_candidate_flags), checked: they and --samples need a
  guard, --no_more_spill_code the static one (--guarded), and --samples a count >= 0
  (argparse errors otherwise)."""
  if (a.candidates or a.samples) and not guarded:
    ap.error("--candidates and --samples go with a guard (--guarded or --measured_guard)")
  if a.no_more_spill_code and not getattr(a, "guarded", False):
    ap.error("--no_more_spill_code goes with --guarded")
  if a.samples < 0:
    ap.error("--samples must be >= 0")
  return [policy_path(c) for c in a.candidates.split(",") if c]
