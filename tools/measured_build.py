"""Builds your program with the register allocation that measured fastest, per function:
clang's, a policy's, other policies' and sampled allocations, each built and run on your
workload under cachegrind (mlgo/evaluation/measured_build.py has the steps).

  bazel build //tools:guarded_cc
  bazel run //tools:measured_build -- --source=$PWD/zstd-1.5.4 \\
      --build='make -C programs zstd CC="{cc}"' --program=programs/zstd \\
      --run='-q -3 -c /data/in1.txt' --run='-q -19 -c /data/in1.txt' \\
      --check='-q -3 -c /data/in2.txt' \\
      --policy=$PWD/models/regalloc_eviction --candidates=$PWD/models/regalloc_eviction_wide \\
      --samples=3 --output=/tmp/zstd-measured

{cc} and {cxx} in --build stand for the compiler of each build (quote them if the build
splits words: CC="{cc}"). --run arguments choose the allocations; --check arguments
(other inputs) measure the result; without --check the report is measured on the --run
ones, in-sample. Runs start in the build's copy of the source tree. The output dir holds
each build, the profiles, functions.txt (guarded_cc --policy_functions), the final
program and report.md/.json/.png; running the same command again continues where it
stopped. The program shipped is the fastest binary measured on the --run workloads: the
per-function routed build (guarded/src/PROGRAM), one side's whole build, or clang's own
(--final=routed: always the routed build); report.json's "binary" names it.
"""
import argparse
import sys

from mlgo.util import cli


def main(argv=None) -> int:
  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import measured_build as mb
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--source", required=True, help="the source tree (copied per build)")
  ap.add_argument("--build", required=True,
                  help="build command run in a copy of the tree; {cc} / {cxx} are replaced")
  ap.add_argument("--program", required=True, help="the program the build makes, relative "
                                                   "to the tree")
  ap.add_argument("--run", action="append", default=[],
                  help="arguments of one run of the workload the choice is made on (repeat)")
  ap.add_argument("--check", action="append", default=[],
                  help="arguments of one run the result is measured on (repeat; other "
                       "inputs than --run)")
  ap.add_argument("--policy", required=True, help="the eviction policy dir")
  ap.add_argument("--candidates", default="", help="more policy dirs, comma-separated")
  ap.add_argument("--samples", type=int, default=0,
                  help="N sampled allocations of --policy as more candidates")
  ap.add_argument("--layouts", type=int, default=0,
                  help="repeat each check run in N more stack layouts a side: mean change "
                       "and a rank-sum verdict per run (4 or more to reach p < 0.05)")
  ap.add_argument("--select_on", choices=("cycles", "data"), default="cycles",
                  help="what each function's choice compares: estimated cycles, or only "
                       "their terms that do not move with the code's addresses "
                       "(instructions and data-cache misses)")
  cli.add_final_flag(ap, "fastest")
  ap.add_argument("--jobs", type=int, default=2,
                  help="profiled runs at a time (cachegrind uses one core a run)")
  ap.add_argument("--output", required=True, help="output dir (outside the source tree)")
  a = ap.parse_args(argv)
  if a.samples < 0 or a.layouts < 0 or a.jobs < 1:
    ap.error("--samples and --layouts must be >= 0, --jobs >= 1")
  gcc = cli.built_file("tools/guarded_cc")
  if gcc is None:
    print("measured_build: tools/guarded_cc is not built; run `bazel build "
          "//tools:guarded_cc` first", file=sys.stderr)
    return 1
  try:
    r = mb.measured_build(cli.user_path(a.source), a.build, a.program, a.run,
                          cli.user_path(a.output), policy=cli.policy_path(a.policy),
                          candidates=[cli.policy_path(c) for c in a.candidates.split(",") if c],
                          samples=a.samples, check_runs=a.check, guarded_cc=gcc,
                          layouts=a.layouts, select_on=a.select_on,
                          final_mode=a.final, jobs=a.jobs)
  except mb.MeasuredBuildError as e:
    print(f"measured_build: {e}", file=sys.stderr)
    return 1
  print(mb.markdown(r))
  print(f"measured_build: the program: {r['binary']}; report in {cli.user_path(a.output)}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
