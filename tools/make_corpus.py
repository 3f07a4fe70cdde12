"""Builds a corpus of pre-optimization bitcode from Debian source packages.

  bazel run //tools:make_corpus -- --output=DIR [--packages=a,b,@extra] [--opt=Oz|O2] [--jobs=N]
      [--llvm_version=22]
  bazel run //tools:make_corpus -- --output=DIR --import=MLGO_UTILS_CORPUS
  bazel run //tools:make_corpus -- --default [--opt=O2]   # build/reuse the default corpus
"""
import argparse
import sys

from mlgo.corpus import build
from mlgo.corpus import format as fmt
from mlgo.corpus import sources
from mlgo.util import cli


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument("--output", help="corpus directory to write (replaced if it exists)")
  p.add_argument("--packages", default="@default",
                 help="comma-separated Debian source packages; @default and @extra stand "
                 "for the package sets in mlgo.corpus.sources (default: %(default)s)")
  p.add_argument("--opt", default="Oz", help="optimization level: Oz (inlining) or O2 "
                 "(regalloc); default %(default)s")
  p.add_argument("--jobs", type=int, default=2, help="parallel compiles (default 2)")
  p.add_argument("--llvm_version", type=int, default=None,
                 help="LLVM whose clang makes the bitcode (default 22)")
  p.add_argument("--import", dest="import_dir", default=None,
                 help="import a corpus made by mlgo-utils extract_ir/make_corpus instead")
  p.add_argument("--default", action="store_true",
                 help="build (or reuse) the default corpus in the cache directory")
  p.add_argument("--cache", default=None, help="source package cache "
                 "(default: $MLGO_HOME/sources)")
  a = p.parse_args(argv)
  try:
    if a.default:
      path = build.default_corpus(a.llvm_version, opt=a.opt, jobs=a.jobs)
      print(f"default corpus: {path}")
      print(fmt.load_corpus(path).summary())
      return 0
    if not a.output:
      p.error("--output is required (or --default)")
    out = cli.user_path(a.output)
    if a.import_dir:
      stats = build.import_corpus(cli.user_path(a.import_dir), out, a.llvm_version)
      print(f"imported {stats['modules']} modules ({stats['c++_modules']} C++) from "
            f"{stats['packages_with_modules']} packages, {stats['skipped']} unusable "
            f"(listed in {out / 'skipped.txt'})")
    else:
      packages = sources.expand_packages(a.packages)
      stats = build.make_corpus(out, packages, opt=a.opt, jobs=a.jobs,
                                llvm_version=a.llvm_version,
                                cache=cli.user_path(a.cache) if a.cache else None)
      print(build.format_stats(stats))
      print(f"skipped units with reasons: {out / 'skipped.txt'}")
    print(f"corpus: {out}")
    print(fmt.load_corpus(out).summary())
    return 0
  except (build.BuildError, fmt.CorpusError) as e:
    print(f"make_corpus: error: {e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
  sys.exit(main())
