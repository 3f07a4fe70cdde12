"""The recorded real streams (testdata/streams) decode, match their manifest and the
problem descriptions, and recording reproduces what the compiler sends."""
import json

import numpy as np
import pytest

from mlgo import env, log, problems

import envtestlib as lib

MANIFEST = json.load(open(lib.data_path("testdata/streams/manifest.json")))


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_recorded_stream_matches_manifest(name):
  info = MANIFEST[name]
  data = open(lib.data_path(f"testdata/streams/{name}"), "rb").read()
  problem = problems.get_problem(info["problem"])
  for reader_mod in (log.pyreader, log):
    ctxs = reader_mod.read_log(data)
    n = sum(len(c) for c in ctxs)
    assert n == info["decisions"]
    r = log.pyreader.StreamReader(data)
    r.next_event()
    names = [s.name for s in r.header]
    assert set(problem.feature_names) <= set(names)
    assert r.advice.name == problem.action.name
  if info["problem"] == "inlining":
    (ctx,) = ctxs
    slot = "inlining_default" if info["llvm_version"] >= 22 else "callee_basic_block_count"
    np.testing.assert_array_equal(ctx.features[slot].ravel(), info["actions"])
    if info["llvm_version"] == 19:
      assert (ctx.features["inlining_default"] == 0).all()


def test_record_path_captures_the_exact_stream(tmp_path):
  rec = tmp_path / "s.bin"
  res = env.compile_module(lib.inlining_module("calls.c", 22), "inlining", env.DefaultPolicy(),
                           record_path=str(rec))
  assert res.ok
  (ctx,) = log.read_log(rec.read_bytes())
  (traj,) = res.trajectories
  for n in problems.get_problem("inlining").feature_names:
    np.testing.assert_array_equal(ctx.features[n], traj.features[n])
  assert rec.read_bytes() == open(lib.data_path("testdata/streams/inlining-clang22.bin"),
                                  "rb").read()
