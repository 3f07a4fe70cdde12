"""The learned performance model of machine basic blocks (regalloc's runtime-grounded
reward): profile real programs, fit the model, judge it on held-out programs.

  bazel run //tools:perf_model -- collect --output=DATA [--policy=models/regalloc_eviction]
      [--programs=lua,bzip2] [--role=model|heldout] [--variants=default,policy,sampled]
  bazel run //tools:perf_model -- train --data=DATA [--model=models/perf_model/cost_model.json]
  bazel run //tools:perf_model -- report --data=DATA --model=M --output=DIR
  bazel run //tools:perf_model -- corpus --output=DIR [--role=model]

collect  builds the runtime_check programs from Debian sources with the default
         allocator and with a policy (greedy and sampling), llc writing its basic-block
         address map, runs each under callgrind and writes one row per executed block
         (mlgo/evaluation/block_profiles.py). Resumable.
train    fits the block cost model on the programs of role "model".
report   its error on the blocks of the "heldout" programs next to llvm-mca and the
         static spill-weight proxy, and how well each ranks the per-function change
         between two allocations (report.md, report.json, report.png).
corpus   a prepared llc corpus of the "model" programs' units compiled with their measured
         profiles (PGO), so llc's block frequencies, and the reward, are measured ones
         (mlgo/evaluation/profiled_corpus.py); train on it with --corpus=DIR.
Train a policy with it: --problem=regalloc_eviction_perf (configs/regalloc_eviction_perf.gin).
"""
import argparse
import sys

from mlgo.util.cli import policy_path, user_path


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  sub = ap.add_subparsers(dest="cmd", required=True)
  c = sub.add_parser("collect")
  c.add_argument("--output", required=True)
  c.add_argument("--problem", default="regalloc_eviction")
  c.add_argument("--policy", default=None)
  c.add_argument("--programs", default="")
  c.add_argument("--role", default=None, choices=["model", "heldout"])
  c.add_argument("--variants", default="")
  c.add_argument("--jobs", type=int, default=2)
  t = sub.add_parser("train")
  t.add_argument("--data", required=True)
  t.add_argument("--model", default="models/perf_model/cost_model.json")
  r = sub.add_parser("report")
  r.add_argument("--data", required=True)
  r.add_argument("--model", default="models/perf_model/cost_model.json")
  r.add_argument("--output", required=True)
  k = sub.add_parser("corpus")
  k.add_argument("--output", required=True)
  k.add_argument("--role", default="model", choices=["model", "heldout"])
  k.add_argument("--programs", default="")
  k.add_argument("--jobs", type=int, default=2)
  a = ap.parse_args(argv)
  if a.cmd == "corpus":
    from mlgo.evaluation import profiled_corpus  # pylint: disable=import-outside-toplevel
    c = profiled_corpus.build(user_path(a.output), role=a.role, jobs=a.jobs,
                              programs=[p for p in a.programs.split(",") if p] or None)
    print(f"{len(c.modules)} modules in {c.path} (--corpus={c.path})")
    return 0 if c.modules else 1
  from mlgo.evaluation import block_profiles, perf_model  # pylint: disable=import-outside-toplevel
  if a.cmd == "collect":
    s = block_profiles.collect(a.problem, user_path(a.output),
                               policy_dir=policy_path(a.policy) if a.policy else None,
                               programs=[p for p in a.programs.split(",") if p] or None,
                               role=a.role,
                               variants=[v for v in a.variants.split(",") if v] or None,
                               jobs=a.jobs)
    print(f"{len(s)} program builds profiled under {user_path(a.output)}")
    return 0 if s else 1
  if a.cmd == "train":
    perf_model.train(user_path(a.data), policy_path(a.model))
    print(f"wrote {policy_path(a.model)}")
    return 0
  perf_model.report(user_path(a.data), policy_path(a.model), user_path(a.output))
  return 0


if __name__ == "__main__":
  from mlgo.util.files import private_tempdir
  private_tempdir()
  sys.exit(main())
