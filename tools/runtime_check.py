"""Measured execution: programs built with the default allocator vs with a policy.

  bazel run //tools:runtime_check -- --problem=regalloc_eviction --policy=DIR
      [--output=DIR] [--programs=NAME,...] [--role=model|heldout] [--jobs=2]
      [--guarded [--no_more_spill_code] | --measured_guard [--selection_layouts=3]]
      [--candidates=DIR,...]
      [--samples=N] [--pgo]
      [--layouts=4]
Builds each program from its Debian source package twice (every translation unit
through llc with the default allocator, then with the policy), runs both under
cachegrind (cache + branch simulation) on a generated, deterministic workload, checks
the outputs are identical, and prints instructions, D1/LL misses, mispredictions and
estimated cycles (formula in mlgo/evaluation/runtime_check.py), default vs policy.
Hardware counters (perf stat) are used too where the machine has them; the first line
says whether they are.

Memory layout: where code and data land changes cache and branch-predictor behaviour
by a few tenths of a percent on its own. With --layouts=N (default 4) both sides are
also built N more times: the same allocation compiled with other offsets inside its
functions (blocks nothing falls into aligned to 2, 4, 8 or 16 bytes; the padding is
never run), linked with the objects shuffled and code, constants and data moved by a
padding object, and run with the stack moved too (every run has the same fixed
environment). The second table compares the means and calls a program slower or faster
only when a rank-sum test over the layouts says so (p < 0.05), else "within layout
noise". --layouts=0 measures the one layout only.
Writes runtime_check.json and runtime_check.png (per-layout dots, mean bars) to --output.

Programs (role "model": profiles may fit a performance model; role "heldout": from
@unseen/@extra packages, never used to train a model or a policy; role "reserve": held
out and not yet run with any policy, kept to judge a rule written down first; they run
only when named or with --role=reserve):
{programs}
"""
import argparse
import json
import sys

from mlgo.util.cli import (add_candidate_flags, add_final_flag, add_guard_problem_flag,
                            candidate_dirs, policy_path, user_path)


def main(argv=None):
  # pylint: disable=import-outside-toplevel
  from mlgo.evaluation import runtime_check, runtime_programs, runtime_report
  from mlgo.evaluation.measured_guard import SELECTION_LAYOUTS
  names = ", ".join(f"{p.name} ({p.role})" for p in runtime_programs.PROGRAMS)
  ap = argparse.ArgumentParser(description=__doc__.format(
      programs=runtime_programs.describe()), formatter_class=argparse.RawDescriptionHelpFormatter)
  add_guard_problem_flag(ap)
  ap.add_argument("--policy", required=True)
  ap.add_argument("--output", default="runtime_check")
  ap.add_argument("--programs", default="",
                  help=f"comma-separated subset (default: all, or all of --role): {names}")
  ap.add_argument("--role", choices=runtime_programs.ROLES, default=None,
                  help="only the programs of this role")
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--guarded", action="store_true",
                  help="build the policy side with guarded compiles (per function the "
                       "better of the default and the policy by the allocator's cost)")
  ap.add_argument("--measured_guard", action="store_true",
                  help="build the policy side with per-function selection by measured run "
                       "time: both builds run under cachegrind on a second workload (other "
                       "generated inputs) and a function keeps the policy's allocation "
                       "only if it ran faster there")
  add_candidate_flags(ap, "--guarded or --measured_guard")
  ap.add_argument("--select_on", choices=("cycles", "data"), default="cycles",
                  help="with --measured_guard: what each function's choice compares: "
                       "estimated cycles, or only their terms that do not move with the "
                       "code's addresses (instructions and data-cache misses)")
  add_final_flag(ap, "routed", "with --measured_guard: ")
  ap.add_argument("--selection_layouts", type=int, default=None,
                  help="with --measured_guard: run each build on the second workload in "
                       "this many memory layouts of its own (other code offsets than the "
                       "judged layouts) and choose each function on its mean cost, not "
                       "on where its branches happened to lie in one (default "
                       f"{SELECTION_LAYOUTS})")
  ap.add_argument("--pgo", action="store_true",
                  help="PGO builds on both sides: each program's own workload profiled "
                       "first (llc's block frequencies measured, not estimated)")
  ap.add_argument("--layouts", type=int, default=4,
                  help="extra memory layouts per side (0: the plain link only)")
  a = ap.parse_args(argv)
  if a.layouts < 0:
    ap.error("--layouts must be >= 0")
  if a.guarded and a.measured_guard:
    ap.error("--guarded and --measured_guard are two different guards; pick one")
  if a.select_on != "cycles" and not a.measured_guard:
    ap.error("--select_on goes with --measured_guard")
  if a.final != "routed" and not a.measured_guard:
    ap.error("--final goes with --measured_guard")
  if a.selection_layouts is not None and not a.measured_guard:
    ap.error("--selection_layouts goes with --measured_guard")
  if a.selection_layouts is None:
    a.selection_layouts = SELECTION_LAYOUTS if a.measured_guard else 1
  if a.selection_layouts < 1:
    ap.error("--selection_layouts must be >= 1")
  candidates = candidate_dirs(ap, a, a.guarded or a.measured_guard)
  p = policy_path(a.policy)
  out = user_path(a.output)
  rows = runtime_check.run(a.problem, p, out,
                           programs=[x for x in a.programs.split(",") if x] or None,
                           role=a.role, jobs=a.jobs, guarded=a.guarded,
                           pgo=a.pgo, layouts=a.layouts,
                           measured_guard=a.measured_guard,
                           candidates=candidates,
                           samples=a.samples,
                           no_more_spill_code=a.no_more_spill_code,
                           select_on=a.select_on, final=a.final,
                           selection_layouts=a.selection_layouts)
  (out / "runtime_check.json").write_text(json.dumps(rows, indent=1) + "\n")
  runtime_report.plot(rows, out / "runtime_check.png")
  print(runtime_report.format_table(rows))
  print(f"runtime_check: wrote {out / 'runtime_check.json'} and {out / 'runtime_check.png'}")
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()  # nothing the tool or TensorFlow writes is left in /tmp
  sys.exit(main())
