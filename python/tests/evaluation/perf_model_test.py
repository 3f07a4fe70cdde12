"""perf_model: fit the block cost model and report it against its baselines, on real
profiles of a real program built two ways (LLVM's eviction and a random one, llc with its
basic-block address map), and the clear errors of bad or missing profile data."""
import json
import pathlib
import shutil
import subprocess

import pytest

from mlgo import env
from mlgo.env.policies import RandomPolicy
from mlgo.evaluation import block_profiles, perf_model
from mlgo.profiles import bbmap, blocks, cost_model
from mlgo.training import testing

SOURCES = [testing.program("pressure.c"),
           testing.data_path("python/tests/profiles/pressure_main.c")]

pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None,
                                reason="valgrind not installed")


def _build(d: pathlib.Path, prog: str, variant: str, role: str):
  """One build of the pressure program laid out as block_profiles writes it."""
  vdir = d / prog / variant
  vdir.mkdir(parents=True)
  objs, functions = [], {}
  for i, src in enumerate(SOURCES):
    bc = vdir / f"{i}.bc"
    subprocess.run(["clang-22", "-O2", "-c", "-emit-llvm", src, "-o", str(bc)], check=True)
    policy = env.CompilerDefault() if variant == "default" else RandomPolicy(seed=3)
    obj = vdir / f"{i}.o"
    res = env.compile_module(env.LlcModule(f"{i}", str(bc), ["-O2", "-relocation-model=pic"]), "regalloc_eviction",
                             policy, extra_flags=list(bbmap.FLAGS_LLC), output_path=str(obj))
    assert res.ok, res.reason
    functions.update(res.reward["functions"])
    objs.append(str(obj))
  exe = vdir / prog
  subprocess.run(["clang-22", "-o", str(exe)] + objs, check=True)
  (vdir / "functions.json").write_text(json.dumps(functions))
  _, prof = blocks.profile_run(exe, [], vdir, vdir / "callgrind.out")
  rows = blocks.join(blocks.disassemble(str(exe)), prof, str(exe))
  for r in rows:
    r.update(program=prog, variant=variant, role=role, cycles=block_profiles.block_cycles(r))
  (vdir / "blocks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
  return rows


@pytest.fixture(scope="module")
def data(tmp_path_factory):
  d = tmp_path_factory.mktemp("perfdata")
  for prog, role in (("fit_me", "model"), ("judge_me", "heldout")):
    for variant in ("default", "random"):
      _build(d, prog, variant, role)
  return d


def test_train_and_report_against_the_baselines(data, tmp_path):
  model = perf_model.train(data, tmp_path / "cm.json")
  assert model.meta["programs"] == ["fit_me"]
  assert cost_model.CostModel.load(tmp_path / "cm.json").weights.keys() == model.weights.keys()
  rep = perf_model.report(data, tmp_path / "cm.json", tmp_path / "rep")
  assert rep["heldout_programs"] == ["judge_me"] and rep["training_programs"] == ["fit_me"]
  assert set(rep["blocks"]) == {"model", "static proxy", "llvm-mca"}
  for e in rep["blocks"].values():
    assert e["blocks"] > 10 and 0 <= e["mape"] < 10
  # The random eviction rewrote churn's hot loop: its change is in the allocation table,
  # for every predictor, and the model fitted on the same code ranks it right.
  assert rep["functions_changed"] >= 1
  assert set(rep["allocations"]) == {"model (profile)", "model (static)",
                                     "llvm-mca (profile)", "remarks (static)"}
  assert rep["allocations"]["model (profile)"]["sign_agreement"] == 1.0
  for name in ("report.md", "report.json", "report.png"):
    assert (tmp_path / "rep" / name).stat().st_size > 0
  assert "| model |" in (tmp_path / "rep" / "report.md").read_text()


def test_bad_and_missing_data_name_the_file(data, tmp_path):
  with pytest.raises(ValueError, match="no block profiles"):
    perf_model.load(tmp_path)
  bad = tmp_path / "p" / "default"
  bad.mkdir(parents=True)
  (bad / "blocks.jsonl").write_text('{"function": "f"}\n{not json\n')
  with pytest.raises(ValueError, match=r"blocks.jsonl:2: not a JSON row"):
    perf_model.load(tmp_path)
  # Nothing else is touched: the real data still loads and fits.
  assert len(perf_model.load(data)) == 4
  only_heldout = tmp_path / "only_heldout"
  shutil.copytree(data / "judge_me", only_heldout / "judge_me")
  with pytest.raises(ValueError, match="role 'model'"):
    perf_model.train(only_heldout, tmp_path / "x.json")
