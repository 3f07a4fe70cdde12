"""Corpora of pre-optimization bitcode in LLVM mlgo-utils format (format.py reads, writer.py writes).

    corpus = mlgo.corpus.load_corpus(path)          # ours or mlgo-utils', as it is
    argv = corpus.modules[0].compile_argv(clang, "out.o", extra_flags)
    path = mlgo.corpus.default_corpus(22)           # built once into mlgo_home()
"""
from mlgo.corpus.format import (Corpus, CorpusError, CorpusModule, CorpusProblem,
                                clean_cc1_flags, load_corpus, read_cmd, split_for, kind_of,
                                HELDOUT_FRACTION)
from mlgo.corpus.writer import CorpusWriter, write_corpus


def default_corpus(llvm_version: int | None = None, opt: str = "Oz", **kwargs):
  """Path of the default corpus for LLVM `llvm_version` at -`opt`, building it once.

  Built into mlgo_home()/corpora/default-llvm<V>-<opt> from Debian source packages
  (a few minutes on 2 cores); later calls return the cached directory.
  """
  from mlgo.corpus import build  # heavy: only when needed
  return build.default_corpus(llvm_version, opt=opt, **kwargs)


def corpus_arg(value, opt: str = "Oz"):
  """A tool's --corpus value: that directory (relative to where the user ran the tool),
  `@SET` for a package set's corpus (@default, @extra, @unseen, @fresh, @sealed; built
  once, cached), or the default corpus at -O`opt` (a problem's `corpus_opt`) when it is
  not given."""
  if value and str(value).startswith("@"):
    return default_corpus(22, opt=opt, package_set=str(value)[1:])
  if value:
    from mlgo.util.cli import user_path  # pylint: disable=import-outside-toplevel
    return user_path(value)
  return default_corpus(22, opt=opt) if opt != "Oz" else default_corpus()


__all__ = ["Corpus", "CorpusError", "CorpusModule", "CorpusProblem", "CorpusWriter",
           "clean_cc1_flags", "load_corpus", "read_cmd", "split_for", "write_corpus",
           "default_corpus", "corpus_arg", "kind_of", "HELDOUT_FRACTION"]
