"""Shared helpers of the environment tests: data paths, runfiles, module builders, leak
checks."""
import functools
import os
import pathlib

import pytest

from mlgo import env
from mlgo.env import process
from mlgo.training import testing
from mlgo.util import cli

_CHECKOUT = pathlib.Path(__file__).resolve().parents[3]


def data_path(rel: str) -> str:
  return testing.data_path(rel)


def program(name: str) -> str:
  return testing.program(name)


def runfile(rel: str, marker: str = "") -> pathlib.Path:
  """The first existing copy of `rel` (a directory: one holding `marker`) among Bazel's
  runfiles, else the checkout's; the test fails if there is none."""
  for p in cli.runfile_candidates(rel) + [_CHECKOUT / rel]:
    if (p / marker if marker else p).exists():
      return p
  pytest.fail(f"{rel} is neither in the runfiles nor in the checkout")


def shipped_eviction_model() -> pathlib.Path:
  return runfile("models/regalloc_eviction", "policy.json")


def workdir() -> str:
  """A directory for built bitcode, shared by the tests of one process."""
  return testing.process_workdir("envtest-")


@functools.lru_cache(maxsize=None)
def inlining_module(name: str, version: int) -> env.SourceModule:
  return env.module_from_source(program(name), workdir(), llvm_version=version, opt="Oz")


@functools.lru_cache(maxsize=None)
def llc_module(name: str, version: int) -> env.LlcModule:
  return env.modules.optimized_module_from_source(program(name), workdir(),
                                                  llvm_version=version)


def live_children() -> list[int]:
  """Non-zombie processes whose parent is this process."""
  return process.live_processes(1, os.getpid())


def alive(pids) -> list[int]:
  return process.alive(pids)


def env_dirs(tmp: str) -> list[str]:
  return [d for d in os.listdir(tmp) if d.startswith("mlgo-env-")]
