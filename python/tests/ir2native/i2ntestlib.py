"""Shared helpers of the IR2Native tests: test programs, a tiny real corpus, collected rows
and a small model fitted on them (all with the real clang-22)."""
import functools
import os

from mlgo import corpus as corpus_lib
from mlgo import env
from mlgo.ir2native import dataset, model as model_lib
from mlgo.problems import ir2vec
from mlgo.ir2native import states as states_lib
from mlgo.training import testing

LLVM = 22
FIELDS = list(states_lib.SCALARS) + list(ir2vec.DIMENSIONS)
STATE_WIDTH = 20   # 2 scalars + 18 embedding dimensions


def data_path(rel: str) -> str:
  return testing.data_path(rel)


def program(name: str) -> str:
  return testing.program(name)


def workdir() -> str:
  """A directory for built files, shared by the tests of one process."""
  return testing.process_workdir("i2ntest-")


@functools.lru_cache(maxsize=None)
def source_module(name: str) -> env.SourceModule:
  return env.module_from_source(program(name), workdir(), llvm_version=LLVM, opt="Oz")


def make_corpus(out_dir, names, heldout=()):
  """A real corpus (clang-22, -Oz) of testdata/programs files; returns it loaded."""
  path = testing.make_tiny_corpus(out_dir, [program(n) for n in names], llvm_version=LLVM,
                                  opt="Oz", heldout=heldout)
  return corpus_lib.load_corpus(path)


@functools.lru_cache(maxsize=None)
def shared_corpus():
  """calls.c and catch_rethrow.cpp (training split): the modules with decisions."""
  return make_corpus(os.path.join(workdir(), "corpus"), ("calls.c", "catch_rethrow.cpp"))


@functools.lru_cache(maxsize=None)
def shared_rows() -> str:
  """Rows of shared_corpus(), passes default and flip0.3 (cached per process)."""
  out = os.path.join(workdir(), "rows")
  stats = dataset.collect(shared_corpus().modules, out, passes=("default", "flip0.3"),
                          final_ir=0.0, jobs=2)
  assert stats["failed"] == 0, stats
  return out


@functools.lru_cache(maxsize=None)
def shared_model_dir() -> str:
  """A small IR2Native model fitted on shared_rows(), saved (cached per process)."""
  d = dataset.load(shared_rows())
  m = model_lib.fit(d["state"], d["native_size"], FIELDS, hidden=(16,), epochs=40,
                    batch=32, seed=0)
  out = os.path.join(workdir(), "model")
  m.save(out)
  return out
