"""Measured per-function credit (mlgo.credit.function_size): the arithmetic on hand-made
sizes, then real clang-22 compiles of a tiny corpus: remarks and symbol tables line up,
a single flipped decision is credited with exactly what it did to its caller (and its
callee's survival), and in PPO a decision's reward is its credit alone with
module_reward_weight 0."""
import copy
import os

import numpy as np
import pytest

from mlgo import corpus as corpus_lib
from mlgo.credit import function_size
from mlgo.env import core, inline_remarks, policies
from mlgo.ir2native import states as states_lib
from mlgo.training import ppo, testing


def test_caller_and_presence_terms():
  own = {"main": 120, "f": 40}                       # g deleted here
  others = [{"main": 100, "f": 40, "g": 30}, {"main": 110, "f": 44, "g": 30}]
  callers = ["f", "main", "main", "main"]
  callees = ["g", "g", "f", "h"]
  inlined = [True, True, False, False]
  d = function_size.decision_deltas(own, others, callers, callees, inlined)
  # f: 40 - mean(40, 44) = -2; g's deletion (-30: every other compile kept g) is shared
  # by the two decisions that inlined g, so it counts once.
  np.testing.assert_allclose(d, [-2 - 15, 15 - 15, 15, 15])
  # Kept here, deleted in half the others: the refusals to inline it pay half its size.
  d = function_size.decision_deltas({"main": 50, "g": 20}, [{"main": 70}, {"main": 48, "g": 20}],
                                    ["main", "main"], ["g", "g"], [False, True])
  np.testing.assert_allclose(d, [(50 - 59) + 10, 50 - 59])
  # A caller deleted here has no measured change: its decisions get nothing, not even
  # the deletion of the callee they inlined.
  d = function_size.decision_deltas({"main": 90}, [{"main": 80, "h": 12, "g": 30}],
                                    ["h", "main"], ["g", "h"], [True, True])
  np.testing.assert_allclose(d, [0, 10 - 12])
  # Nothing to compare with: no caller term; a function no compile kept: no presence term.
  d = function_size.decision_deltas({"main": 50}, [{}], ["main", "x"], ["y", "y"], [True, False])
  np.testing.assert_allclose(d, [0, 0])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  path = testing.make_tiny_corpus(tmp_path_factory.mktemp("c"),
                                  [testing.program("calls.c"),
                                   testing.program("catch_rethrow.cpp")],
                                  llvm_version=22, opt="Oz")
  return corpus_lib.load_corpus(path)


class _KeepRemarks(function_size.Annotator):
  """Also keeps the raw ML-advisor remarks, as the test's own record of who is who."""

  def annotate(self, outputs, trajectories):
    out = super().annotate(outputs, trajectories)
    path = os.path.join(outputs["tmpdir"], states_lib.REMARKS_FILE)
    out["raw"] = [(r.caller, r.callee, r.name) for r in inline_remarks.parse(path)
                  if r.name in inline_remarks.ML_DECISIONS]
    return out


def _compile(module, policy):
  return core.compile_module(module, "inlining", policy, llvm_version=22,
                             annotator=_KeepRemarks())


class _Result:
  def __init__(self, res):
    self.module_name, self.annotations = res.module_name, copy.deepcopy(res.annotations)


def test_a_flipped_decision_is_credited_with_its_callers_change(corpus):
  mod = next(m for m in corpus.modules if m.name == "calls")
  base = _compile(mod, policies.DefaultPolicy("inlining"))
  assert base.ok, base.reason
  ann = base.annotations
  assert "error" not in ann, ann
  (callers, callees, inlined), = ann["decisions"]
  n = len(callers)
  assert n == base.decisions > 3
  # Remark names are the object's symbol names: a caller the object lacks was itself
  # inlined away (it is some decision's callee), and most callers are found.
  missing = set(callers) - set(ann["function_sizes"])
  assert missing <= set(callees), missing
  assert len(missing) < len(set(callers))
  assert sum(ann["function_sizes"].values()) == base.reward["text_size"]
  default_actions = [int(a) for a in base.trajectories[0].actions]
  changed = 0
  for at in range(n):
    flip = _compile(mod, policies.PrefixFlip(default_actions, at, policies.DefaultPolicy("inlining")))
    assert flip.ok, flip.reason
    a, b = _Result(flip), _Result(base)
    function_size.Annotator.complete([a, b])
    delta = a.annotations["decision_delta"][0]
    fs, bs = flip.annotations["function_sizes"], ann["function_sizes"]
    caller, callee, name = flip.annotations["raw"][at]
    did_inline = name.startswith("InliningSuccess")
    expect = fs.get(caller, 0) - bs[caller] if caller in fs and caller in bs else 0.0
    known = {c for c, _, _ in flip.annotations["raw"] if c in fs and c in bs}
    # The callee's deletion (or survival) is shared by the decisions that made it.
    same_callee = [(n_.startswith("InliningSuccess"), e_ == callee and c_ in known)
                   for c_, e_, n_ in flip.annotations["raw"]]
    if caller not in known:
      assert delta[at] == 0
      continue
    if callee not in fs and callee in bs and did_inline:
      expect -= bs[callee] / sum(1 for inl, same in same_callee if inl and same)
    if callee in fs and callee not in bs and not did_inline:
      expect += fs[callee] / sum(1 for inl, same in same_callee if not inl and same)
    assert delta[at] == pytest.approx(expect), (at, caller, callee)
    # Decisions of functions whose size did not move get nothing.
    for i, (c, e, _) in enumerate(flip.annotations["raw"]):
      if fs.get(c) == bs.get(c) and c in fs:
        assert delta[i] == 0 or (e in fs) != (e in bs), (i, c, e)
    # Seen from the default's compile, the flipped caller moved the other way.
    back = b.annotations["decision_delta"][0]
    if caller in fs and caller in bs and not (callee in fs) != (callee in bs):
      assert back[at] == pytest.approx(-delta[at])
    changed += int(flip.reward["text_size"] != base.reward["text_size"])
  assert changed >= 1     # the test exercised at least one flip that moved the size


def test_ppo_reward_is_the_credit_alone(corpus, tmp_path):
  cfg = ppo.PPOConfig(modules_per_iteration=2, trace_modules=2, jobs=2, seed=3,
                      samples_per_module=3, baseline="group", credit="function_size",
                      module_reward_weight=0.0, credit_weight=1.0)
  t = ppo.Trainer(corpus.path, tmp_path / "run", problem_name="inlining", config=cfg)
  w = t.current_weights()
  batch, stats = t.collect(sorted(t.train_modules, key=lambda m: m.name), w)
  assert stats["failed"] == 0 and len(batch) == 6
  state = copy.deepcopy(t.state)
  exp, _, sizes = t.make_experience(batch, w)
  assert sizes["credit_missing"] == 0
  expect = []
  for res in batch:
    d0 = state["default_scores"][res.module_name]
    for ti in range(len(res.trajectories)):
      expect.append(-np.asarray(res.annotations["decision_delta"][ti], np.float64)
                    / (d0 + t.problem.reward_delta))
  expect = np.concatenate(expect)
  np.testing.assert_allclose(exp["rewards"], expect, rtol=1e-5, atol=1e-9)


def test_bad_settings_fail_before_any_compile(corpus, tmp_path):
  with pytest.raises(ValueError, match="samples_per_module >= 2"):
    ppo.Trainer(corpus.path, tmp_path / "a", problem_name="inlining",
                config=ppo.PPOConfig(credit="function_size", samples_per_module=1))
  from mlgo import credit
  from mlgo import problems
  with pytest.raises(ValueError, match="not an inlining problem"):
    credit.make_annotator("function_size", "", problems.get_problem("regalloc_eviction"))


def test_probes_measure_the_function_size_credit(corpus, tmp_path):
  """Rollout probes with the measured credit: every flip is compiled with remarks, and
  each probe's prediction is what the flip did to its caller (and its callee's
  survival); in these small modules that is most of the measured module change."""
  from mlgo.training import rollouts
  stats = rollouts.probe_corpus(corpus.path, testing.data_path("models/inlining_oz"),
                                tmp_path / "probes", max_probes=40, jobs=1,
                                credit_kind="function_size")
  assert stats["modules"] == 2 and stats["failed"] == 0
  (sh,) = list(rollouts.ProbeStore(tmp_path / "probes").shards())
  ok = np.isfinite(sh["probe_sizes"])
  assert ok.sum() > 5 and np.isfinite(sh["probe_predicted"][ok]).all()
  measured = sh["probe_sizes"][ok] - sh["base_size"][sh["probe_module"]][ok]
  pred = sh["probe_predicted"][ok]
  assert stats["credit_probes"] == int(ok.sum())
  assert np.mean(pred == measured) >= 0.5 and stats["credit_spearman"] > 0.3
