"""Problem descriptions, validators and the remark-based regalloc reward."""
import numpy as np
import pytest

from mlgo import problems
from mlgo.problems import inlining, regalloc


def test_registry():
  assert problems.problem_names() == [
      "inlining", "inlining_ir2vec", "inlining_ctx", "inlining_ir2vec_ctx",
      "regalloc_eviction", "regalloc_priority", "regalloc_eviction_perf",
      "regalloc_priority_perf"]
  # Context variants: the stock features first (a policy widens into them), then the
  # plugin's five; the plugin comes with the channel.
  ctx = problems.get_problem("inlining_ir2vec_ctx")
  ir2vec = problems.get_problem("inlining_ir2vec")
  assert ctx.features[:len(ir2vec.features)] == ir2vec.features
  assert [f.name for f in ctx.features[len(ir2vec.features):]] == [
      "callee_discardable", "callee_address_taken", "callee_uses", "callee_sites_in_caller",
      "callee_times_inlined"]
  flags = ctx.channel_flags("/tmp/base")
  assert flags[0].startswith("-fpass-plugin=") and flags[0].endswith("libinline_context.so")
  assert not any(f.startswith("-fpass-plugin") for f in ir2vec.channel_flags("/tmp/base"))
  assert "callee_times_inlined" in ctx.probe_volatile
  assert not problems.same_decisions("inlining_ir2vec", "inlining_ir2vec_ctx")
  # A reward variant: the same decisions, scored by the performance model.
  perf = problems.get_problem("regalloc_eviction_perf")
  base = problems.get_problem("regalloc_eviction")
  assert perf.features == base.features and perf.action == base.action
  assert perf.variant_of == "regalloc_eviction" and perf.reward_name == "perf_model"
  assert "-basic-block-address-map" in perf.reward_flags and perf.remarks_filter is None
  assert problems.decision_problem("regalloc_eviction_perf") == "regalloc_eviction"
  assert problems.decision_problem("inlining_ir2vec") == "inlining_ir2vec"
  with pytest.raises(KeyError, match="known: inlining"):
    problems.get_problem("vectorize")
  inl = problems.get_problem("inlining")
  assert inl.tool == "clang" and len(inl.features) == 38
  assert "inlining_default" not in inl.feature_names
  # The IR2Vec variant is the same problem plus the two instruction-mix embeddings.
  wide = problems.get_problem("inlining_ir2vec")
  assert wide.feature_names[:38] == inl.feature_names
  assert wide.feature_names[38:] == ["callee_embedding", "caller_embedding"]
  assert [f.shape for f in wide.features[38:]] == [(18,), (18,)]
  assert wide.action == inl.action and wide.reward_description == inl.reward_description
  assert set(inl.enable_options) < set(wide.enable_options)
  ev = problems.get_problem("regalloc_eviction")
  assert ev.tool == "llc" and len(ev.features) == 21
  assert ev.features[0].shape == (1, 33)
  pr = problems.get_problem("regalloc_priority")
  assert pr.action.dtype == np.float32 and pr.feature_names == ["li_size", "stage", "weight"]


def test_channel_flags():
  assert problems.get_problem("inlining").channel_flags("/x/ch") == [
      "-mllvm", "-enable-ml-inliner=release", "-mllvm", "-inliner-interactive-include-default",
      "-mllvm", "-inliner-interactive-channel-base=/x/ch"]
  assert problems.get_problem("inlining").channel_flags("/x/ch", default_policy=True) == [
      "-mllvm", "-enable-ml-inliner=release", "-mllvm", "-inliner-interactive-include-default",
      "-mllvm", "-ml-advisor-size-increase-threshold=1000000",
      "-mllvm", "-inliner-interactive-channel-base=/x/ch"]
  assert problems.get_problem("regalloc_eviction").channel_flags("/x/ch") == [
      "-regalloc-enable-advisor=release", "-regalloc-evict-interactive-channel-base=/x/ch"]
  assert problems.get_problem("regalloc_priority").channel_flags("/x/ch") == [
      "-regalloc-enable-priority-advisor=release",
      "-regalloc-priority-interactive-channel-base=/x/ch"]


def _ev_obs(mask, hints=None, density=None):
  z = np.zeros((1, 33), np.float32)
  obs = {"mask": np.array(mask, np.int64).reshape(1, 33)}
  obs["nr_broken_hints"] = z.copy() if hints is None else np.array(hints, np.float32).reshape(1, 33)
  obs["use_def_density"] = z.copy() if density is None else np.array(density, np.float32).reshape(1, 33)
  return obs


def test_eviction_validate_and_default():
  mask = [0] * 33
  mask[5] = mask[7] = mask[32] = 1
  dens = [1.0] * 33
  dens[5], dens[7], dens[32] = 0.5, 0.2, 0.9
  obs = _ev_obs(mask, density=dens)
  assert regalloc.eviction_default(obs) == 7  # lightest valid interference
  assert regalloc.eviction_validate(np.int64(5), obs) == (5, False)
  for bad in (4, 33, -1, 2**40, np.nan):
    a, corrected = regalloc.eviction_validate(bad, obs)
    assert corrected and mask[a] == 1
  dens[7] = dens[5] = 2.0  # everything heavier than the candidate: evict nothing
  assert regalloc.eviction_default(_ev_obs(mask, density=dens)) == 32
  hints = [0.0] * 33
  hints[7] = 1.0
  dens = [1.0] * 33
  dens[5], dens[7], dens[32] = 0.5, 0.2, 0.9
  assert regalloc.eviction_default(_ev_obs(mask, hints, dens)) == 5  # fewer broken hints first
  only_candidate = [0] * 32 + [1]
  assert regalloc.eviction_default(_ev_obs(only_candidate)) == 32
  # LLVM sends NaN densities next to unspillable ranges: they rank after every number,
  # and a NaN-only choice is kept (a NaN is never "not lighter" than the candidate).
  dens = [1.0] * 33
  dens[5], dens[7], dens[32] = float("nan"), 0.6, 0.9
  assert regalloc.eviction_default(_ev_obs(mask, density=dens)) == 7
  dens[7] = float("nan")
  assert regalloc.eviction_default(_ev_obs(mask, density=dens)) == 5
  must_evict = [0] * 33
  must_evict[3] = must_evict[9] = 1
  assert regalloc.eviction_default(_ev_obs(must_evict, density=[2.0] * 33)) == 3


def test_priority_validate():
  obs = {"li_size": np.array([40], np.int64)}
  assert regalloc.priority_validate(np.float32(3.5), obs) == (np.float32(3.5), False)
  assert regalloc.priority_validate(np.nan, obs) == (np.float32(40), True)
  assert regalloc.priority_validate(-2.0, obs) == (np.float32(0), True)
  assert regalloc.priority_validate(1e20, obs)[1] is True


def test_inlining_prepare_by_version():
  raw = {n: np.array([7], np.int64) for n in inlining.FEATURE_NAMES}
  raw["inlining_default"] = np.array([0], np.int64)
  raw["callee_basic_block_count"] = np.array([1], np.int64)
  obs19, d19 = inlining.prepare(dict(raw), 19)
  assert d19 == 1 and obs19["callee_basic_block_count"][0] == 0
  assert obs19["inlining_default"][0] == 1
  obs22, d22 = inlining.prepare(dict(raw), 22)
  assert d22 == 0 and obs22["callee_basic_block_count"][0] == 1
  assert inlining.validate(np.int64(3), obs22) == (1, True)
  assert inlining.validate(np.int64(0), obs22) == (0, False)


REMARKS = """--- !Missed
Pass:            regalloc
Name:            LoopSpillReloadCopies
Function:        f
Args:
  - NumSpills:       '3'
  - TotalSpillsCost: '3.000000e+01'
...
--- !Missed
Pass:            regalloc
Name:            SpillReloadCopies
Function:        f
Args:
  - NumSpills:       '4'
  - String:          ' spills '
  - TotalSpillsCost: '3.200000e+01'
  - NumReloads:      '2'
  - TotalReloadsCost: '1.000000e+01'
  - NumFoldedReloads: '1'
  - TotalFoldedReloadsCost: '2.500000e+00'
  - NumFoldedSpills: '1'
  - TotalFoldedSpillsCost: '1.000000e+00'
  - NumVRCopies:     '5'
  - TotalCopiesCost: '5.000000e+00'
  - String:          generated in function
...
--- !Missed
Pass:            regalloc
Name:            SpillReloadCopies
Function:        'odd''name'
Args:
  - NumVRCopies:     '1'
  - TotalCopiesCost: '1.000000e+00'
...
"""


def test_remark_reward():
  r = regalloc.reward_from_remarks(REMARKS, functions=["f", "clean"])
  # stores 32*1 + loads 10*4 + folded reloads 2.5*4 + folded spills 1*1 + copies 5*0.2
  assert r["functions"]["f"] == pytest.approx(32 + 40 + 10 + 1 + 1.0)
  assert r["functions"]["odd'name"] == pytest.approx(0.2)
  assert r["functions"]["clean"] == 0.0
  assert r["total"] == pytest.approx(84.2)
  # The same weights on the counts, without frequencies: 4 + 2*4 + 1*4 + 1 + 5*0.2.
  assert r["spill_code"] == pytest.approx({"f": 4 + 8 + 4 + 1 + 1.0, "odd'name": 0.2,
                                           "clean": 0.0})
