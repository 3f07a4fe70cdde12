"""The basic-block address map (exact llc blocks with static frequencies) and the learned
block cost model: fitted on a live callgrind profile of a real program built by
clang-22, its error cases, and the performance-model reward of a real llc compile."""
import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from mlgo import env, problems
from mlgo.profiles import bbmap, blocks, cost_model
from mlgo.training import testing

HERE = pathlib.Path(__file__).resolve().parent
PRESSURE = pathlib.Path(testing.data_path("testdata/programs/pressure.c"))
MAP_FLAGS = ["-fbasic-block-address-map", "-mllvm", "-pgo-analysis-map=bb-freq"]


def _build(tmp_path, flags):
  exe = tmp_path / "p"
  subprocess.run(["clang-22", "-O2", *flags, "-o", str(exe), str(PRESSURE),
                  str(HERE / "pressure_main.c")], check=True)
  return exe


def test_map_gives_llcs_blocks_and_static_frequencies(tmp_path):
  exe = _build(tmp_path, MAP_FLAGS)
  maps = {f.name: f for f in bbmap.read(exe)}
  assert {"churn", "blend", "main"} <= set(maps)
  churn = maps["churn"]
  assert churn.has_freq and churn.blocks[0].mbb == 0 and churn.blocks[0].rel_freq == 1.0
  # The loop body runs more often than the entry by llc's static estimate.
  assert max(b.rel_freq for b in churn.blocks) > 4.0
  bl = [b for b in blocks.disassemble(str(exe)) if b.function == "churn"]
  assert [b.mbb for b in bl] == [b.mbb for b in churn.blocks if b.size > 0]
  for b, mb in zip(bl, [b for b in churn.blocks if b.size > 0]):
    end = b.instructions[-1][0] + b.instructions[-1][1]
    assert b.start == mb.start and end == mb.start + mb.size


def test_without_a_map_blocks_fall_back_and_reading_says_why(tmp_path):
  exe = _build(tmp_path, [])
  with pytest.raises(bbmap.MapError, match="no basic-block address map"):
    bbmap.read(exe)
  bl = blocks.disassemble(str(exe))
  assert bl and all(b.mbb is None and b.rel_freq is None for b in bl)
  with pytest.raises(bbmap.MapError, match="not JSON"):
    bbmap.parse("garbage", "x.o")


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind not installed")
def test_fit_on_a_live_profile_and_score_functions(tmp_path):
  exe = _build(tmp_path, MAP_FLAGS)
  _, prof = blocks.profile_run(exe, [], tmp_path, tmp_path / "cg.out")
  bl = blocks.disassemble(str(exe))
  rows = blocks.join(bl, prof, str(exe))
  assert all("mbb" in r for r in rows if r["function"] in ("churn", "blend"))
  model = cost_model.CostModel.fit(rows, meta={"programs": ["pressure"]})
  for w in model.weights.values():
    assert np.all(w >= 0)
  y = cost_model.measured_per_execution(rows)
  ex = np.array([r["executions"] for r in rows], float)
  pred = model.predict_rows(rows)
  # Never below the instruction count (a block runs whole), and the execution-weighted
  # total within 25% of the measured cycles.
  assert np.all(pred >= np.array([r["instructions"] for r in rows]) - 1e-9)
  assert abs((pred * ex).sum() / (y["cycles"] * ex).sum() - 1) < 0.25
  # Save / load round trip, and a function's cost is rel_freq-weighted block cycles.
  model.save(tmp_path / "m" / "cost_model.json")
  again = cost_model.CostModel.load(tmp_path / "m" / "cost_model.json")
  costs = again.function_costs(bl)
  churn = [b for b in bl if b.function == "churn"]
  want = sum(b.rel_freq * c for b, c in zip(churn, again.predict_rows(
      [b.features() for b in churn])))
  assert costs["churn"] == pytest.approx(want)
  assert costs["churn"] > costs["blend"] > 0


def test_bad_models_are_refused(tmp_path):
  p = tmp_path / "m.json"
  p.write_text("{")
  with pytest.raises(cost_model.ModelError, match="m.json"):
    cost_model.CostModel.load(p)
  p.write_text(json.dumps({"version": 99, "inputs": []}))
  with pytest.raises(cost_model.ModelError, match="retrain"):
    cost_model.CostModel.load(p)
  w = {h: [0.0] * len(cost_model.INPUTS) for h in cost_model.HEADS}
  w["ll_misses"][0] = -1.0
  with pytest.raises(cost_model.ModelError, match="non-negative"):
    cost_model.CostModel(w)
  with pytest.raises(cost_model.ModelError, match="too few"):
    cost_model.CostModel.fit([{"executions": 1, "Ir": 3, "instructions": 3}])


def test_nnls_matches_an_exact_non_negative_solution():
  rng = np.random.default_rng(0)
  a = rng.uniform(0, 3, (200, 5))
  w = np.array([0.5, 0.0, 2.0, 0.0, 1.0])
  assert np.allclose(cost_model.nnls(a, a @ w), w, atol=1e-6)
  # The unconstrained optimum has a negative weight: it is clamped at 0.
  w2 = cost_model.nnls(a, a @ np.array([1.0, -1.0, 0, 0, 0]))
  assert np.all(w2 >= 0) and w2[1] == 0


def test_perf_reward_of_a_real_llc_compile(tmp_path, monkeypatch):
  # A hand-made model: every instruction costs 1 cycle, every reload 4 more.
  w = {h: [0.0] * len(cost_model.INPUTS) for h in cost_model.HEADS}
  w["l1_misses"][cost_model.INPUTS.index("reloads")] = 0.4
  cost_model.CostModel(w).save(tmp_path / "cm.json")
  monkeypatch.setenv("MLGO_PERF_MODEL", str(tmp_path / "cm.json"))
  bc = tmp_path / "p.bc"
  subprocess.run(["clang-22", "-O2", "-c", "-emit-llvm", str(PRESSURE), "-o", str(bc)],
                 check=True)
  mod = env.LlcModule("p", str(bc), ["-O2"])
  obj = tmp_path / "p.o"
  res = env.compile_module(mod, "regalloc_eviction_perf", env.CompilerDefault(),
                           output_path=str(obj))
  assert res.ok, res.reason
  bl = blocks.disassemble(str(obj))
  by_fn = {}
  for b in bl:
    f = b.features()
    by_fn[b.function] = by_fn.get(b.function, 0.0) + b.rel_freq * (
        f["instructions"] + 4 * f["reloads"])
  assert res.reward["functions"] == pytest.approx(by_fn)
  # The same compile under the static reward: the object's code is the same.
  res2 = env.compile_module(mod, "regalloc_eviction", env.CompilerDefault(),
                            output_path=str(tmp_path / "q.o"))
  assert res2.ok and set(res2.reward["functions"]) <= set(by_fn)
  assert problems.same_decisions("regalloc_eviction_perf", "regalloc_eviction")
  assert not problems.same_decisions("regalloc_eviction_perf", "regalloc_priority")
  # A module of data only compiles to no functions and a zero cost, like the remarks
  # reward's.
  data = tmp_path / "data.c"
  data.write_text("const int table[4] = {1, 2, 3, 4};\n")
  subprocess.run(["clang-22", "-O2", "-c", "-emit-llvm", str(data), "-o",
                  str(tmp_path / "data.bc")], check=True)
  only_data = env.compile_module(env.LlcModule("d", str(tmp_path / "data.bc"), ["-O2"]),
                                 "regalloc_eviction_perf", env.CompilerDefault())
  assert only_data.ok and only_data.reward == {"functions": {}, "total": 0.0}
  # A missing model fails the compile with a clear reason, nothing raised.
  monkeypatch.setenv("MLGO_PERF_MODEL", str(tmp_path / "none.json"))
  cost_model._LOADED.clear()
  bad = env.compile_module(mod, "regalloc_eviction_perf", env.CompilerDefault())
  assert not bad.ok and "none.json" in bad.reason


def test_map_sections_are_all_read():
  # llvm-readobj prints one "BBAddrMap" key per map section in the same JSON object
  # (e.g. main in .text.startup or a profile's .text.hot, the rest in .text).
  def fn(name, at):
    return {"Function": {"At": at, "Name": name, "BB Ranges": [
        {"Base Address": at, "BB Entries": [{"ID": 0, "Offset": 0, "Size": 4},
                                           {"ID": 1, "Offset": 4, "Size": 2}]}],
        "PGO analyses": {"PGO BB entries": [{"Frequency": 8}, {"Frequency": 80}]}}}
  text = ('[{"FileSummary": {}, "BBAddrMap": [' + json.dumps(fn("f", 0)) + '], '
          '"BBAddrMap": [' + json.dumps(fn("main", 0)) + ']}]')
  funcs = bbmap.parse(text)
  assert [f.name for f in funcs] == ["f", "main"]
  assert [b.rel_freq for b in funcs[1].blocks] == [1.0, 10.0]
