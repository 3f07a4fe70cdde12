"""Compiles one module with a policy in the loop; prints the decisions and the reward.

  bazel run //tools:compile_one -- --problem=inlining --module=M.bc --cmd=M.cmd
  bazel run //tools:compile_one -- --problem=regalloc_eviction --module=opt.bc \
      [--llc_flags=-O2,-relocation-model=pic] --policy=random --record=stream.bin

  bazel run //tools:compile_one -- --problem=regalloc_eviction --module=opt.bc \
      --policy=models/regalloc_eviction --guarded --output=out.o

--guarded (regalloc, a policy dir): per function the better of the default and the
policy by the allocator's spill/reload/copy cost (mlgo/env/guarded.py; two or three llc
runs); prints each function's three costs. `--guarded --policy=release --llc=PREFIX/bin/llc`
does the same with the compiled-in model of a release prefix (//llvm_patches:clang_release),
no policy in Python.
--module may also be a .c/.cc source: it is compiled to bitcode first (pre-optimization
bitcode at --opt for inlining, optimized bitcode for regalloc).
"""
import argparse
import json
import sys
import tempfile

import numpy as np

from mlgo import env, problems
from mlgo.util import cli, toolchain


def make_policy(spec: str, problem, seed: int):
  if spec == "default":
    return env.DefaultPolicy(problem.name)
  if spec == "random":
    return env.RandomPolicy(seed, problem.name)
  if spec == "mlp":
    return env.MLPPolicy(problem.name, seed=seed)
  from mlgo.policy import policy_io  # pylint: disable=import-outside-toplevel
  return policy_io.load_policy(str(cli.user_path(spec)))


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--problem", required=True, choices=problems.problem_names())
  ap.add_argument("--module", required=True, help=".bc (or .c/.cc source)")
  ap.add_argument("--cmd", help="the module's .cmd (cc1 flags, NUL-separated); inlining")
  ap.add_argument("--llc_flags", default="-O2", help="comma-separated llc flags (regalloc)")
  ap.add_argument("--opt", default=None, help="opt level for a source --module (Oz/O2)")
  ap.add_argument("--policy", default="default", help="default | random | mlp | POLICY_DIR")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--record", help="write the raw stream received from the compiler here")
  ap.add_argument("--output", help="keep the object file here")
  ap.add_argument("--llvm_version", type=int, default=toolchain.DEFAULT_LLVM_VERSION)
  ap.add_argument("--timeout", type=float, default=300.0)
  ap.add_argument("--quiet", action="store_true", help="no per-decision lines")
  ap.add_argument("--guarded", action="store_true",
                  help="regalloc: per function the better of the default and --policy")
  ap.add_argument("--llc", help="with --guarded --policy=release: the llc whose release "
                  "advisor has the model compiled in")
  args = ap.parse_args(argv)

  problem = problems.get_problem(args.problem)
  path = cli.user_path(args.module)
  with tempfile.TemporaryDirectory(prefix="mlgo-compile-one-") as tmp:
    if path.suffix in (".c", ".cc", ".cpp", ".cxx"):
      if problem.tool == "clang":
        module = env.module_from_source(str(path), tmp, llvm_version=args.llvm_version,
                                        opt=args.opt or "Oz")
      else:
        module = env.modules.optimized_module_from_source(
            str(path), tmp, llvm_version=args.llvm_version, opt=args.opt or "O2")
    else:
      try:
        module = env.module_from_files(
            str(path), str(cli.user_path(args.cmd)) if args.cmd else None,
            llc_flags=[f for f in args.llc_flags.split(",") if f])
      except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
      if problem.tool == "clang" and not args.cmd:
        print(f"error: {args.problem} compiles with clang -cc1 and needs --cmd "
              f"(the module's cc1 flags)", file=sys.stderr)
        return 2
    if args.guarded:
      policy = None if args.policy == "release" else make_policy(args.policy, problem,
                                                                  args.seed)
      return _guarded(args, module, problem, policy)
    policy = make_policy(args.policy, problem, args.seed)
    res = env.compile_module(
        module, problem, policy, llvm_version=args.llvm_version, timeout=args.timeout,
        record_path=str(cli.user_path(args.record)) if args.record else None,
        output_path=str(cli.user_path(args.output)) if args.output else None)
  if not args.quiet:
    for t in res.trajectories:
      for i, a in enumerate(t.actions):
        line = {"context": t.context, "index": i, "action": a.item()}
        if t.default_actions is not None:
          line["default"] = t.default_actions[i].item()
        print(json.dumps(line))
  print(json.dumps({"module": res.module_name, "problem": problem.name, "ok": res.ok,
                    "reason": res.reason, "decisions": res.decisions,
                    "corrections": res.corrections, "reward": res.reward,
                    "seconds": round(res.seconds, 4)}))
  return 0 if res.ok else 1


def _guarded(args, module, problem, policy) -> int:
  from mlgo.env import guarded  # pylint: disable=import-outside-toplevel
  try:
    guarded.check_problem(problem)
  except ValueError as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  if args.policy in ("default", "random", "mlp"):
    print("error: --guarded needs a policy dir or 'release' (a deterministic policy: every "
          "function must get the same decisions in each compile)", file=sys.stderr)
    return 2
  release = {}
  if policy is None:
    if not args.llc:
      print("error: --policy=release needs --llc (an llc with the model compiled in)",
            file=sys.stderr)
      return 2
    release = guarded.release_advisor(problem, cli.user_path(args.llc))
  g = guarded.guarded_compile(
      module, problem, policy, llvm_version=args.llvm_version, timeout=args.timeout,
      output_path=str(cli.user_path(args.output)) if args.output else None, **release)
  missing = problem.missing_score or 0.0
  for f in sorted(set(g.default_scores) | set(g.policy_scores)) if g.ok else ():
    print(json.dumps({"function": f, "default": g.default_scores.get(f, missing),
                      "policy": g.policy_scores.get(f, missing),
                      "guarded": g.scores.get(f, missing),
                      "kept": "policy" if f in g.policy_functions else "default"}))
  print(json.dumps({"module": g.result.module_name, "problem": problem.name, "ok": g.ok,
                    "reason": g.result.reason, "guarded": True, "compiles": g.compiles,
                    "default_total": sum(g.default_scores.values()),
                    "policy_total": sum(g.policy_scores.values()),
                    "guarded_total": sum(g.scores.values()),
                    "mismatches": g.mismatches}))
  return 0 if g.ok and not g.mismatches else 1


if __name__ == "__main__":
  sys.exit(main())
