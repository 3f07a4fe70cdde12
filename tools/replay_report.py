"""Replays the default decisions on every module of a corpus and reports how many
objects are byte-identical to the plain compile (inlining) and how many eviction /
priority runs with the default-equivalent policy complete.

  bazel run //tools:replay_report -- [--llvm_versions=22,19] [--corpus=DIR]
      [--problems=inlining,regalloc_eviction,regalloc_priority] [--jobs=1] [--json=FILE]

Without --corpus, each version uses its default corpus (mlgo.corpus.default_corpus,
built once if missing: LLVM 19 cannot read LLVM 22 bitcode).

A module whose replay differs is compiled again both ways with the inliner's remarks, to
say why: on clang-22 a few call sites are answered inside clang's ML advisor without an
observation on the channel (no policy can reach them; see mlgo.env.inline_remarks).
Exit status 1 on failures and on differences that this does not explain.
"""
import argparse
import json
import sys

from mlgo import corpus as corpus_lib
from mlgo.env import replay
from mlgo.util import cli


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--llvm_versions", default="22,19")
  ap.add_argument("--corpus", help="corpus dir (one version only)")
  ap.add_argument("--problems", default="inlining,regalloc_eviction,regalloc_priority")
  ap.add_argument("--jobs", type=int, default=1, help="parallel compiles (at most 2)")
  ap.add_argument("--limit", type=int, default=0,
                  help="N modules spread evenly over the corpus (0 = all)")
  ap.add_argument("--timeout", type=float, default=300.0)
  ap.add_argument("--json", help="write the full report here")
  args = ap.parse_args(argv)
  reports = []
  bad = False
  for v in [int(x) for x in args.llvm_versions.split(",") if x]:
    path = cli.user_path(args.corpus) if args.corpus else corpus_lib.default_corpus(v)
    c = corpus_lib.load_corpus(path)
    mods = c.modules
    if args.limit and args.limit < len(mods):
      step = len(mods) / args.limit
      mods = [mods[int(i * step)] for i in range(args.limit)]
    print(f"corpus {path}: {len(mods)} modules (LLVM {c.llvm_version}, -{c.opt_level})")
    for p in args.problems.split(","):
      r = replay.replay_corpus(mods, p, v, jobs=args.jobs, timeout=args.timeout)
      print(r.summary(), flush=True)
      reports.append(r.to_json())
      bad |= bool(r.failures or r.unexplained)   # explained: outside the channel's reach
  if args.json:
    with open(cli.user_path(args.json), "w") as f:
      json.dump(reports, f, indent=1)
  return 1 if bad else 0


if __name__ == "__main__":
  sys.exit(main())
