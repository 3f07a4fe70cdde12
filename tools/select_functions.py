"""The functions whose register allocation by a policy ran faster than the default's, from
two cachegrind profiles of the same workload: the list `guarded_cc --policy_functions`
builds with (a guard judged by measured run time; mlgo/evaluation/measured_guard.py).

  # both builds of your program: clang's own and the policy's (every function)
  make CC=clang-22 && mv prog prog.default
  make clean && make CC="bazel-bin/tools/guarded_cc --unguarded \
      --policy=$PWD/models/regalloc_eviction --"
  # a representative workload under cachegrind, names as llc knows them
  valgrind --tool=cachegrind --cache-sim=yes --branch-sim=yes --demangle=no \
      --cachegrind-out-file=cg.default ./prog.default WORKLOAD
  valgrind ... --cachegrind-out-file=cg.policy ./prog WORKLOAD
  bazel run //tools:select_functions -- --default=$PWD/cg.default --policy=$PWD/cg.policy \
      --output=$PWD/functions.txt
  make clean && make CC="bazel-bin/tools/guarded_cc --policy=$PWD/models/regalloc_eviction \
      --policy_functions=$PWD/functions.txt --"

A function is listed when its estimated cycles (instructions + 10 per L1 miss + 100 per
LL miss + 15 per mispredicted branch, as runtime_check counts them) are lower in the
policy's profile. Functions the workload did not run are not listed, so they keep
clang's allocation. Like PGO it is only as good as the workload: judge the result on
another one.

Several policies: give --policy once per policy build's profile, in the order of
guarded_cc's --policy and --candidates; each line is then `FUNCTION INDEX`, the policy
whose build ran the function fastest (0: --policy, 1: the first candidate, ...).
"""
import argparse
import sys

from mlgo.util.cli import user_path


def main(argv=None) -> int:
  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import measured_guard
  from mlgo.profiles.callgrind import ProfileError
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--default", required=True, help="cachegrind output of the default build")
  ap.add_argument("--policy", required=True, action="append",
                  help="cachegrind output of the policy's build (repeat for candidates)")
  ap.add_argument("--output", required=True, help="the function list to write")
  a = ap.parse_args(argv)
  files = [a.default] + a.policy
  cost = []
  try:
    for path in files:
      cost.append(measured_guard.function_cycles(user_path(path)))
  except ProfileError as e:
    print(f"select_functions: {e}", file=sys.stderr)
    return 1
  for path, c in zip(files, cost):
    demangled = [f for f in c if "(" in f and "(below main)" != f]
    if demangled:   # llc names functions by their symbols: the list would match nothing
      print(f"select_functions: {path}: names are demangled (e.g. {demangled[0]!r}); "
            f"run cachegrind with --demangle=no", file=sys.stderr)
      return 1
  route = measured_guard.fastest_policy(cost[0], cost[1:])
  s = measured_guard.summarize(cost[0], cost[1:], route)
  chosen = sorted(route)
  out = user_path(a.output)
  several = len(cost) > 2
  out.write_text("".join(f"{f} {route[f]}\n" if several else f + "\n" for f in chosen))
  est = lambda x: 100.0 * (x / s["default"] - 1.0) if s["default"] else 0.0
  each = ", ".join(f"{est(sum(c.values())):+.2f}%" for c in cost[1:])
  print(f"select_functions: {len(chosen)} of {s['functions_run']} functions run are faster "
        f"with {'a' if several else 'the'} policy; estimated cycles on this workload: "
        f"{'policies' if several else 'policy'} {each}, selection "
        f"{est(s['selected_estimate']):+.2f}% (if costs add up); wrote {out}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
