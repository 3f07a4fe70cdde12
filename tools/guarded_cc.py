"""A C/C++ compiler wrapper: clang-22, with each object's register allocation guarded.

  make CC="bazel-bin/tools/guarded_cc --policy=$PWD/models/regalloc_eviction --" \
       CXX="bazel-bin/tools/guarded_cc --cxx --policy=$PWD/models/regalloc_eviction --"
  bazel-bin/tools/guarded_cc --policy=release --llc=PREFIX/bin/llc -- -O2 -c x.c -o x.o

Every `-c` compile of one C/C++ source runs clang exactly as asked (the object, dependency
files and diagnostics are clang's), then rebuilds the object from the same optimized
bitcode with llc: per function the better register allocation of the default and the
policy, by the allocator's spill/reload/copy cost (mlgo/env/guarded.py; two or three llc
runs), or with --problem=regalloc_eviction_perf by the learned performance model's
estimated cycles per call (models/perf_model). Without a policy, llc with the flags taken
from clang's own cc1 command gives clang's object byte for byte, so the objects differ
only where the policy won.
Anything else (linking, -E, -S, several sources) goes to clang unchanged.

--inline_plugin=SO (inlining for size): each object is the smaller, by .text, of clang's
own and clang's with the inline advisor plugin (-fpass-plugin): never bigger than clang.

If the guarded rebuild fails (llc crash or timeout, a policy error), the wrapper keeps
clang's object, prints a warning naming the source and exits 0: a build never breaks on
the guard. --policy_functions=FILE replaces the cost comparison by a list made elsewhere,
e.g. by measured run time (tools/select_functions): exactly the listed functions keep the
policy's allocation; with --candidates=DIR,... a `NAME INDEX` line gives the function the
allocation of that policy (0: --policy, 1: the first candidate, ...). --samples=N adds N
sampled allocations of --policy after the candidates; to profile sample k, build with
--unguarded --samples=k. Without --policy_functions, --candidates and --samples widen the
cost comparison: per function the lowest cost of clang's allocation, --policy's and each
candidate's (one llc run each, and one more). --no_more_spill_code lets an allocation win
a function only if it also adds no spill code counted without block frequencies: in the
whole function, or with --no_more_spill_code=loops inside loops at every nesting depth;
--no_more_spill_code=perf only if the learned performance model does not estimate it
slower than clang's; --no_more_spill_code=robust only if its frequency-weighted spill code
is not larger for trip counts off by up to 4x per loop level; --no_more_spill_code=trades
(recommended with --candidates and --samples) only if it does not add spill code at one
loop depth while removing some at a deeper one.
--log=FILE appends one JSON line per object (source, per-object cost totals, llc runs,
functions that kept the policy's decisions, and with candidates each one's `route`).
"""
import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

SOURCE_EXTS = (".c", ".cc", ".cpp", ".cxx", ".C", ".c++")
# Options whose next argument is a separate value (so it is not a source file).
_WITH_VALUE = {"-o", "-MF", "-MT", "-MQ", "-I", "-D", "-U", "-include", "-isystem",
               "-iquote", "-idirafter", "-x", "-Xclang", "-mllvm", "-target", "-arch",
               "-imacros", "-isysroot", "--sysroot", "-Xlinker", "-Xassembler",
               "-Xpreprocessor", "-L", "-l"}
_NOT_AN_OBJECT = {"-E", "-S", "-emit-llvm", "-fsyntax-only", "-M", "-MM", "-###"}
_DEP_FLAGS = {"-MD", "-MMD", "-MP"}
_DEP_WITH_VALUE = {"-MF", "-MT", "-MQ"}


def _joined_output(a: str):
  """The file of a joined `-oFILE`, else None."""
  return a[2:] if a.startswith("-o") and len(a) > 2 and not a.startswith("-obj") else None


def split_compile(args):
  """(sources, output) of a `-c` compile of exactly one source to a native object,
  else None (-flto objects are bitcode: their allocation happens at link time)."""
  if ("-c" not in args or any(a in _NOT_AN_OBJECT for a in args)
      or any(a.startswith("-flto") and a != "-flto=none" for a in args)):
    return None
  sources, out, i = [], None, 0
  while i < len(args):
    a = args[i]
    if a in _WITH_VALUE:
      if a == "-o" and i + 1 < len(args):
        out = args[i + 1]
      i += 2
      continue
    if _joined_output(a) is not None:
      out = _joined_output(a)
    elif not a.startswith("-") and a.endswith(SOURCE_EXTS):
      sources.append(a)
    i += 1
  if len(sources) != 1 or out == "-":
    return None
  src = sources[0]
  if out is None:
    out = os.path.splitext(os.path.basename(src))[0] + ".o"
  return src, out


def bitcode_args(args, bc_path):
  """The same compile writing optimized bitcode to bc_path, without dependency files."""
  return without_outputs(args) + ["-emit-llvm", "-o", bc_path]


def without_outputs(args):
  """The compile's arguments without its output and dependency-file options."""
  out, i = [], 0
  while i < len(args):
    a = args[i]
    if a in _DEP_WITH_VALUE or a == "-o":
      i += 2
      continue
    if (a in _DEP_FLAGS or a.startswith(("-MF", "-MT", "-MQ", "-Wp,-MD", "-Wp,-MMD"))
        or _joined_output(a) is not None):
      i += 1
      continue
    out.append(a)
    i += 1
  return out


def cc1_flags(compiler, args):
  r = subprocess.run([compiler, "-###"] + args, capture_output=True, text=True)
  for line in r.stderr.splitlines():
    if '"-cc1"' in line:
      return shlex.split(line)[1:]
  raise RuntimeError(f"no cc1 command in `{compiler} -### ...`: {r.stderr[-500:]}")


def main(argv=None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  if "--" not in argv:
    print("usage: guarded_cc (--policy=DIR|release [--llc=PATH] | --inline_plugin=SO) "
          "[--cxx] [--log=FILE] -- CLANG-ARGS... (the compiler itself is clang-22, or "
          "clang++-22 with --cxx)", file=sys.stderr)
    return 2
  k = argv.index("--")
  from mlgo.util import cli  # pylint: disable=import-outside-toplevel
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--policy",
                  help="eviction policy dir, or 'release' (the --llc's compiled-in model)")
  ap.add_argument("--inline_plugin",
                  help="instead of a regalloc policy: an inline advisor plugin "
                       "(tools/export_policy's inline_advisor.so); each object is the "
                       "smaller of clang's and the plugin's by .text size")
  ap.add_argument("--llc", help="with --policy=release: an llc with the model compiled in")
  cli.add_guard_problem_flag(ap)
  ap.add_argument("--cxx", action="store_true", help="drive clang++ (else clang)")
  ap.add_argument("--log", help="append one JSON line per guarded object here")
  ap.add_argument("--timeout", type=float, default=600.0, help="seconds per llc run")
  ap.add_argument("--policy_functions",
                  help="a file of function names (one a line; tools/select_functions "
                       "writes it from measured profiles): exactly these keep the policy's "
                       "allocation, every other function clang's, whatever the costs say; "
                       "`NAME INDEX` lines route a function to --candidates' INDEX-th "
                       "policy (0: --policy)")
  ap.add_argument("--candidates", default="",
                  help="more policy dirs, comma-separated: with --policy_functions the "
                       "list's indices 1, 2, ... name them; without it each function gets "
                       "the lowest cost of clang's, --policy's and theirs")
  ap.add_argument("--samples", type=int, default=0,
                  help="N sampled allocations of --policy (seeds 1..N, each function with "
                       "its own seed) as candidates after the --candidates; alone (with "
                       "--unguarded) the object of sample --samples")
  cli.add_spill_code_flag(ap)
  ap.add_argument("--unguarded", action="store_true",
                  help="for comparison: keep the policy's own object (every function "
                       "follows the policy); the log still has all three costs")
  a = ap.parse_args(argv[:k])
  args = argv[k + 1:]
  from mlgo.util.toolchain import toolchain  # pylint: disable=import-outside-toplevel
  tc = toolchain(22)
  compiler = tc.clangxx if a.cxx else tc.clang
  if bool(a.policy) == bool(a.inline_plugin):
    print("guarded_cc: give --policy (register allocation) or --inline_plugin (inlining)",
          file=sys.stderr)
    return 2
  if a.no_more_spill_code and (a.policy_functions or a.inline_plugin or a.unguarded):
    print("guarded_cc: --no_more_spill_code is a rule of the cost comparison; not with "
          "--policy_functions, --inline_plugin or --unguarded", file=sys.stderr)
    return 2
  selection = None
  if a.policy_functions:
    if a.inline_plugin or a.unguarded:
      print("guarded_cc: --policy_functions selects register allocations; it goes with "
            "--policy, not --inline_plugin or --unguarded", file=sys.stderr)
      return 2
    try:
      selection = _read_selection(a.policy_functions)
    except (OSError, ValueError) as e:
      print(f"guarded_cc: --policy_functions: {e}", file=sys.stderr)
      return 2
    n = 1 + len([c for c in a.candidates.split(",") if c]) + max(0, a.samples)
    past = sorted(f for f, k in selection.items() if k >= n)
    if past or a.policy == "release" and n > 1:
      print(f"guarded_cc: --policy_functions routes {len(past)} functions (e.g. "
            f"{past[:1]}) to a policy beyond the {n} given (--policy, --candidates; "
            f"not with --policy=release)", file=sys.stderr)
      return 2
  elif a.candidates and a.unguarded:
    print("guarded_cc: --unguarded builds one allocation; --candidates are for the guard "
          "to choose from", file=sys.stderr)
    return 2
  if a.samples < 0 or (a.samples or a.candidates) and a.policy == "release":
    print("guarded_cc: --candidates and --samples need a policy dir (not release) and "
          "--samples a count >= 0", file=sys.stderr)
    return 2
  a.selection = selection
  if a.inline_plugin and not os.path.isfile(a.inline_plugin):
    print(f"guarded_cc: {a.inline_plugin}: no such plugin", file=sys.stderr)
    return 2
  if a.policy == "release" and not a.llc:
    print("guarded_cc: --policy=release needs --llc (an llc with the model compiled in)",
          file=sys.stderr)
    return 2
  if a.policy and a.policy != "release" and \
      not os.path.exists(os.path.join(a.policy, "policy.json")):
    print(f"guarded_cc: {a.policy}: not a policy dir (no policy.json)", file=sys.stderr)
    return 2
  r = subprocess.run([compiler] + args)
  compile_ = split_compile(args)
  if r.returncode != 0 or compile_ is None:
    return r.returncode
  src, out = compile_
  try:
    info = (_guard_inlining(a, compiler, args, src, out) if a.inline_plugin
            else _guard(a, compiler, args, src, out))
  except Exception as e:  # pylint: disable=broad-except
    info = {"source": src, "ok": False, "reason": f"{type(e).__name__}: {e}"}
  if not info["ok"]:
    print(f"guarded_cc: warning: {src}: kept clang's object ({info['reason']})",
          file=sys.stderr)
  if a.log:
    with open(a.log, "a", encoding="utf-8") as f:
      f.write(json.dumps(info) + "\n")
  return 0


def _read_selection(path) -> dict:
  """{function: policy index} from a --policy_functions file: `NAME` (policy 0) or
  `NAME INDEX` a line; anything else is an error naming the line."""
  out = {}
  with open(path, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      parts = line.split()
      if not parts:
        continue
      if len(parts) > 2 or len(parts) == 2 and not parts[1].isdigit():
        raise ValueError(f"{path}:{n}: expected `FUNCTION` or `FUNCTION INDEX`, "
                         f"got {line.strip()[:80]!r}")
      out[parts[0]] = int(parts[1]) if len(parts) == 2 else 0
  return out


def _guard(a, compiler, args, src, out) -> dict:
  from mlgo.env import guarded, modules  # pylint: disable=import-outside-toplevel
  from mlgo.problems import get_problem  # pylint: disable=import-outside-toplevel
  problem = get_problem(a.problem)
  with tempfile.TemporaryDirectory(prefix="mlgo-guarded-cc-") as tmp:
    bc = os.path.join(tmp, "module.bc")
    r = subprocess.run([compiler] + bitcode_args(args, bc), capture_output=True, text=True)
    if r.returncode != 0:
      return {"source": src, "ok": False, "reason": "bitcode compile failed: "
              + r.stderr[-300:]}
    module = modules.LlcModule(src, bc, modules.llc_flags_from_cc1(cc1_flags(compiler, args)))
    kw = {}
    if a.policy == "release":
      policy = None
      kw = guarded.release_advisor(problem, a.llc)
    else:
      from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
      from mlgo.env import policies  # pylint: disable=import-outside-toplevel
      policy = policy_io.load_policy(a.policy)
      others = guarded.candidate_policies(
          policy, [c for c in a.candidates.split(",") if c], a.samples, problem)
      if a.unguarded and a.samples and a.selection is None:
        policy = others[-1]      # the build to profile for sample N
      elif others and a.selection is not None:
        policy = policies.FunctionRouter([policy] + others, a.selection)
      elif others:               # the static guard chooses among them per function
        kw = {"candidates": others}
    if a.no_more_spill_code:
      kw["no_more_spill_code"] = a.no_more_spill_code
    obj = os.path.join(tmp, "guarded.o")
    g = guarded.guarded_compile(module, problem, policy, timeout=a.timeout,
                                output_path=obj, policy_functions=(
                                    None if a.selection is None else set(a.selection)),
                                **kw)
    info = {"source": src, "output": out, "ok": g.ok and not g.mismatches,
            "reason": g.result.reason or (f"{len(g.mismatches)} functions not at the "
                                          "chosen side's cost" if g.mismatches else None),
            "llc_runs": g.compiles, "default_cost": sum(g.default_scores.values()),
            "policy_cost": sum(g.policy_scores.values()),
            "guarded_cost": sum(g.scores.values()),
            "policy_functions": g.policy_functions}
    if g.route:
      info["route"] = g.route
    if info["ok"] and a.unguarded:
      from mlgo.env import core  # pylint: disable=import-outside-toplevel
      from mlgo.env.policies import CompilerDefault  # pylint: disable=import-outside-toplevel
      r = core.compile_module(module, problem, policy or CompilerDefault(),
                              timeout=a.timeout, output_path=obj,
                              tool_path=kw.get("tool_path"),
                              extra_flags=kw.get("policy_flags", []))
      info.update(ok=bool(r.ok), reason=r.reason, unguarded=True)
    if info["ok"]:
      _copy_over(obj, out)
    return info


def _guard_inlining(a, compiler, args, src, out) -> dict:
  """Per object: clang's (already at `out`) unless the plugin's has less .text."""
  from mlgo.util.toolchain import text_size  # pylint: disable=import-outside-toplevel
  with tempfile.TemporaryDirectory(prefix="mlgo-guarded-cc-") as tmp:
    obj = os.path.join(tmp, "plugin.o")
    r = subprocess.run([compiler] + without_outputs(args) +
                       [f"-fpass-plugin={a.inline_plugin}", "-o", obj],
                       capture_output=True, text=True)
    if r.returncode != 0:
      return {"source": src, "ok": False, "reason": "plugin compile failed: "
              + r.stderr[-300:]}
    d, p = text_size(out), text_size(obj)
    kept = p < d
    if kept or a.unguarded:
      _copy_over(obj, out)
    return {"source": src, "output": out, "ok": True, "reason": None,
            "default_text": d, "policy_text": p, "guarded_text": min(d, p),
            "kept": "policy" if kept or a.unguarded else "default",
            **({"unguarded": True} if a.unguarded else {})}


def _copy_over(src, dst):
  """Replace dst atomically (a parallel build may read it as soon as it appears)."""
  tmp = f"{dst}.guarded-tmp{os.getpid()}"
  shutil.copyfile(src, tmp)
  os.replace(tmp, dst)


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
