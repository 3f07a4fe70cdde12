"""The default heuristic's .text sizes on a corpus: the number trained policies must beat.

  bazel run //tools:baseline_report -- --corpus=DIR [--jobs=N] [--output=DIR]
  bazel run //tools:baseline_report                 # on the default corpus (built once)

Writes OUTPUT/baseline.csv (per module: package, language, split, status, .text size,
seconds, failure reason) and OUTPUT/summary.json; prints totals per language and package.
Unusable modules (corrupt .bc, missing .cmd) are reported as failures naming the file.
"""
import argparse
import sys

from mlgo.corpus import baseline
from mlgo.corpus import build
from mlgo.corpus import format as fmt
from mlgo.util import cli
from mlgo import workers


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--corpus", default=None, help="corpus directory (default: the default "
                 "corpus, built on first use)")
  p.add_argument("--jobs", type=int, default=2, help="parallel compiles (default 2)")
  p.add_argument("--output", default=None,
                 help="report directory (default: CORPUS/baseline_report)")
  p.add_argument("--llvm_version", type=int, default=None,
                 help="LLVM to compile with (default: the corpus' own)")
  workers.add_flags(p)
  a = p.parse_args(argv)
  workers.apply_flags(a)
  try:
    if a.corpus:
      path = cli.user_path(a.corpus)
    else:
      path = build.default_corpus(a.llvm_version)
    corpus = fmt.load_corpus(path)
    for prob in corpus.problems:
      print(f"baseline_report: error: {prob.message}", file=sys.stderr)
    print(f"corpus: {corpus.summary()}", file=sys.stderr)
    report = baseline.run_baseline(corpus, jobs=a.jobs, llvm_version=a.llvm_version)
    out = cli.user_path(a.output) if a.output else path / "baseline_report"
    csv_path = report.write(out)
    print(report.format())
    print(f"CSV: {csv_path}")
    return 0 if report.ok else 1
  except (fmt.CorpusError, build.BuildError) as e:
    print(f"baseline_report: error: {e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
  sys.exit(main())
