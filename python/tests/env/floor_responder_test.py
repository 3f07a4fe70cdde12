"""The native floor responder (cc/channel_floor) that bench_env times as the floor of
interactive mode: answering the compiler's own decision must give the plain object, so
the floor measures the same compile."""
import filecmp

import pytest

from mlgo import env
from mlgo.env import bench

import envtestlib as lib


def _responder():
  path = bench.floor_responder_path()
  assert path, "//cc/channel_floor:floor_responder is not in the runfiles"
  return path


@pytest.mark.parametrize("version", [22, 19])
@pytest.mark.parametrize("name", ["calls.c", "catch_rethrow.cpp"])
def test_floor_inlining_gives_the_plain_object(tmp_path, name, version):
  m = lib.inlining_module(name, version)
  out = tmp_path / "floor.o"
  secs = bench.floor_compile(m, "inlining", llvm_version=version, responder=_responder(),
                             output_path=str(out))
  assert secs is not None and secs > 0
  plain = tmp_path / "plain.o"
  env.plain_compile(m, "inlining", llvm_version=version, output_path=str(plain))
  assert filecmp.cmp(out, plain, shallow=False)


def test_floor_eviction_completes_like_the_default_policy(tmp_path):
  m = lib.llc_module("pressure.c", 22)
  out = tmp_path / "floor.o"
  secs = bench.floor_compile(m, "regalloc_eviction", llvm_version=22,
                             responder=_responder(), output_path=str(out))
  assert secs is not None
  ref = tmp_path / "default.o"
  res = env.compile_module(m, "regalloc_eviction", env.DefaultPolicy(), llvm_version=22,
                           output_path=str(ref))
  assert res.ok and res.decisions > 0
  assert filecmp.cmp(out, ref, shallow=False)


def test_floor_reports_a_compiler_that_fails(tmp_path):
  bad = tmp_path / "bad.bc"
  bad.write_bytes(b"BC\\xc0\\xde not bitcode")
  m = env.modules.SourceModule(name="bad", bc_path=str(bad), cc1_flags=["-cc1", "-Oz"])
  assert bench.floor_compile(m, "inlining", llvm_version=22, responder=_responder(),
                             timeout=60) is None
