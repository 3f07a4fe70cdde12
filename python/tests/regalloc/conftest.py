"""Shared fixtures: optimized bitcode of the test programs, a tiny O2 corpus."""
import pathlib
import subprocess

import pytest

from mlgo.util.toolchain import toolchain

DATA = pathlib.Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def opt_bc(tmp_path_factory):
  """name -> optimized (-O2) bitcode of each test program, ready for llc."""
  d = tmp_path_factory.mktemp("bc")
  tc = toolchain(22)
  out = {}
  for src in sorted(DATA.glob("*.c")):
    bc = d / (src.stem + ".bc")
    subprocess.run([tc.clang, "-O2", "-c", "-emit-llvm", str(src), "-o", str(bc)], check=True)
    out[src.stem] = str(bc)
  return out
