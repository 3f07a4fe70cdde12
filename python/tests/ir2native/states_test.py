"""mlgo.ir2native.states on a real decision stream: clang-22's inlining_ir2vec channel and
the ML advisor's remarks of the same compile (calls.c, 14 decisions)."""
import dataclasses

import numpy as np
import pytest

from mlgo import env
from mlgo.env import inline_remarks
from mlgo.ir2native import states

import i2ntestlib as lib


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("states")
  f = str(tmp / "remarks.yaml")
  res = env.compile_module(lib.source_module("calls.c"), "inlining_ir2vec",
                           env.DefaultPolicy(), llvm_version=lib.LLVM,
                           extra_flags=["-opt-record-file", f, "-opt-record-passes", "inline"])
  assert res.ok, res.reason
  (t,) = res.trajectories
  return res, t, inline_remarks.parse(f)


@pytest.fixture(scope="module")
def stream(compiled):
  _, t, remarks = compiled
  return states.Stream.of(t.features, t.actions, remarks)


def test_one_named_decision_per_channel_decision(compiled, stream):
  res, t, _ = compiled
  assert res.decisions == 14
  n = len(stream.decisions)
  assert n == res.decisions == len(t.actions)
  assert stream.caller.shape == stream.callee.shape == (n, lib.STATE_WIDTH)
  assert stream.inlined.shape == (n,)
  # The action the compiler carried out is what the default answered here.
  np.testing.assert_array_equal(stream.inlined, np.asarray(t.actions).ravel() != 0)
  assert 0 < stream.inlined.sum() < n
  # The scalar columns are the channel's own caller/callee features, in order.
  np.testing.assert_array_equal(stream.caller[:, 0],
                                np.asarray(t.features["caller_basic_block_count"]).ravel())
  np.testing.assert_array_equal(stream.callee[:, 1], np.asarray(
      t.features["callee_conditionally_executed_blocks"]).ravel())
  np.testing.assert_array_equal(stream.callee[:, 2:],
                                np.asarray(t.features["callee_embedding"]))
  # calls.c's call sites by name: run calls each of fill, energy, window_max, checksum
  # and vec_push once.
  assert [d.callee for d in stream.decisions if d.caller == "run"] == [
      "fill", "energy", "window_max", "checksum", "vec_push"]
  # A deleted callee was inlined (its last use).
  assert all(d.inlined for d in stream.decisions if d.deleted)
  assert any(d.deleted for d in stream.decisions)


def test_end_states(stream):
  ends = stream.end_states()
  callers = {d.caller for d in stream.decisions}
  callees = {d.callee for d in stream.decisions}
  assert callers <= set(ends) and set(ends) == callers | callees
  for fn, (state, src) in ends.items():
    assert state.shape == (lib.STATE_WIDTH,)
    assert src == ("caller" if fn in callers else "callee")
  # A caller ends as its last decision left it: state + callee's if that one inlined.
  last = {d.caller: i for i, d in enumerate(stream.decisions)}
  for fn, i in last.items():
    want = stream.caller[i] + (stream.callee[i] if stream.inlined[i] else 0)
    np.testing.assert_array_equal(ends[fn][0], want)
  # A never-caller ends as last seen as a callee.
  for fn in callees - callers:
    i = max(j for j, d in enumerate(stream.decisions) if d.callee == fn)
    np.testing.assert_array_equal(ends[fn][0], stream.callee[i])


def test_next_caller_state(stream):
  after = stream.next_caller_state()
  assert after.shape == stream.caller.shape
  ds = stream.decisions
  pairs = [i for i in range(len(ds) - 1)
           if ds[i].caller == ds[i + 1].caller and stream.inlined[i]]
  assert pairs, "calls.c has a caller with an inline followed by another decision"
  changed = 0
  for i in pairs:
    # The caller's observed state at its next decision, not an estimate.
    np.testing.assert_array_equal(after[i], stream.caller[i + 1])
    changed += not np.array_equal(stream.caller[i + 1], stream.caller[i])
  assert changed, "inlining changed the caller's features in at least one pair"
  # run inlines fill (its first decision): its state grows before it calls energy.
  i = next(j for j, d in enumerate(ds) if (d.caller, d.callee) == ("run", "fill"))
  assert stream.inlined[i] and ds[i + 1].caller == "run"
  assert stream.caller[i + 1][0] > stream.caller[i][0]   # more basic blocks
  # A caller's last decision: state + callee's if inlined, else unchanged.
  last = {d.caller: i for i, d in enumerate(ds)}
  for i in last.values():
    want = stream.caller[i] + (stream.callee[i] if stream.inlined[i] else 0)
    np.testing.assert_array_equal(after[i], want)


def test_dropped_remark_is_a_mismatch(compiled):
  _, t, remarks = compiled
  ml = [i for i, r in enumerate(remarks) if r.name in inline_remarks.ML_DECISIONS]
  cut = remarks[:ml[3]] + remarks[ml[3] + 1:]
  with pytest.raises(states.StreamMismatch, match="13 ML-advisor remarks for 14 decisions"):
    states.Stream.of(t.features, t.actions, cut, where="calls")
  # Remarks of the default inline advisor are not decisions: dropping them all is fine.
  only_ml = [remarks[i] for i in ml]
  assert len(states.Stream.of(t.features, t.actions, only_ml).decisions) == 14


def test_remark_says_inlined_where_the_answer_was_no(compiled):
  _, t, remarks = compiled
  acts = np.asarray(t.actions).copy().ravel()
  i = int(np.flatnonzero(acts)[0])
  acts[i] = 0
  with pytest.raises(states.StreamMismatch, match="inlined where the answer was no"):
    states.Stream.of(t.features, acts, remarks)
  # The other way is fine: a yes the compiler could not carry out is a no.
  ml = [r for r in remarks if r.name in inline_remarks.ML_DECISIONS]
  j = next(k for k, r in enumerate(ml) if r.name == "InliningSuccess")
  ml[j] = dataclasses.replace(ml[j], name="InliningAttemptedAndUnsuccessful")
  s = states.Stream.of(t.features, t.actions, ml)
  assert not s.inlined[j] and s.inlined.sum() == np.count_nonzero(t.actions) - 1


def test_problem_without_embeddings_is_refused(tmp_path):
  f = str(tmp_path / "r.yaml")
  res = env.compile_module(lib.source_module("calls.c"), "inlining", env.DefaultPolicy(),
                           llvm_version=lib.LLVM,
                           extra_flags=["-opt-record-file", f, "-opt-record-passes", "inline"])
  assert res.ok, res.reason
  (t,) = res.trajectories
  with pytest.raises(KeyError, match="inlining_ir2vec"):
    states.Stream.of(t.features, t.actions, inline_remarks.parse(f))
