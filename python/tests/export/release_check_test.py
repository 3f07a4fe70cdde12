"""tools/release_check: the Bazel-built release plugin of the tiny context policy against
an evaluation of the same policy through the training channel, on a real tiny corpus."""
import csv
import io
import json
import pathlib
import subprocess

import pytest

from mlgo.evaluation import evaluate
from mlgo.export import release_check
from mlgo.training import testing
from mlgo.util import cli

POLICY = pathlib.Path("cc/aot/tiny_inlining_ctx")
PLUGIN = pathlib.Path("cc/inline_plugin/plugin_tiny_ctx.so")
PROGRAMS = sorted(pathlib.Path("testdata/release").glob("*.c"))


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
  d = tmp_path_factory.mktemp("rc")
  corpus = testing.make_tiny_corpus(d / "corpus", PROGRAMS,
                                    heldout=[p.stem for p in PROGRAMS])
  ev = d / "eval"
  evaluate("inlining", corpus, POLICY, ev, split="heldout", jobs=2,
                    stream=io.StringIO(), use_cache=False)
  exp = d / "export"
  exp.mkdir()
  (exp / "export.json").write_text(json.dumps(
      {"problem": "inlining_ctx", "files": {"plugin_llvm22": str(PLUGIN.resolve())},
       "checks": {}}))
  return corpus, ev, exp


def _rows(ev):
  return list(csv.DictReader(open(ev / "per_key.csv")))


def test_the_plugin_gives_the_evaluated_sizes(evaluated):
  corpus, ev, exp = evaluated
  rows = _rows(ev)
  assert len(rows) == len(PROGRAMS)
  # The policy must inline otherwise than clang somewhere, or agreement proves little.
  assert any(r["policy"] != r["default"] for r in rows)
  res = release_check.check_release(exp, ev, jobs=2, stream=io.StringIO())
  assert [r.status for r in res.rows] == ["same"] * len(PROGRAMS)
  assert res.ok
  assert {r.module: r.plugin for r in res.rows} == {r["module"]: int(float(r["policy"]))
                                                   for r in rows}
  assert res.summary().startswith(f"release_check: modules={len(PROGRAMS)} same=4 ")
  out = res.write(ev.parent / "rc_out")
  assert json.loads((out / "release_check.json").read_text())["different"] == 0
  # every=2 checks half of the modules, in name order.
  half = release_check.check_release(exp, ev, every=2, stream=io.StringIO())
  assert [r.module for r in half.rows] == sorted(r["module"] for r in rows)[::2]


def test_a_size_that_differs_is_reported(evaluated, tmp_path):
  corpus, ev, exp = evaluated
  bad = tmp_path / "eval"
  bad.mkdir()
  (bad / "summary.json").write_text((ev / "summary.json").read_text())
  rows = _rows(ev)
  rows[1]["policy"] = str(int(float(rows[1]["policy"])) + 8)
  with open(bad / "per_key.csv", "w", newline="") as f:
    wr = csv.DictWriter(f, fieldnames=list(rows[0]))
    wr.writeheader()
    wr.writerows(rows)
  res = release_check.check_release(exp, bad, corpus=corpus, stream=io.StringIO())
  assert [r.module for r in res.rows if r.status == "different"] == [rows[1]["module"]]
  assert not res.ok and res.count("same") == len(PROGRAMS) - 1


def test_inputs_that_cannot_be_checked(evaluated, tmp_path):
  corpus, ev, exp = evaluated
  with pytest.raises(release_check.ReleaseCheckError, match="export.json: missing"):
    release_check.check_release(tmp_path, ev)
  reg = tmp_path / "reg"
  reg.mkdir()
  (reg / "export.json").write_text(json.dumps({"problem": "regalloc_eviction", "files": {}}))
  with pytest.raises(release_check.ReleaseCheckError, match="only inline advisor plugins"):
    release_check.check_release(reg, ev)
  with pytest.raises(release_check.ReleaseCheckError, match="summary.json: cannot read"):
    release_check.check_release(exp, tmp_path)
  (tmp_path / "summary.json").write_text("{}")
  (tmp_path / "per_key.csv").write_text("module,policy\nm,lots\n")
  with pytest.raises(release_check.ReleaseCheckError, match=r"per_key.csv line 2: bad"):
    release_check.check_release(exp, tmp_path)


def test_the_tool_fails_on_a_difference_and_names_bad_input(evaluated, tmp_path):
  built = cli.built_file("tools/release_check")
  if built is None:
    pytest.skip("tools/release_check is not built (run under bazel test)")
  corpus, ev, exp = evaluated
  ok = subprocess.run([str(built), f"--export={exp}", f"--evaluation={ev}",
                       f"--output={tmp_path / 'ok'}"], capture_output=True, text=True,
                      timeout=600)
  assert ok.returncode == 0, ok.stderr
  assert ok.stdout.splitlines()[-1].startswith("release_check: modules=4 same=4 different=0")
  assert (tmp_path / "ok" / "release_check.csv").exists()
  bad = subprocess.run([str(built), f"--export={tmp_path}", f"--evaluation={ev}",
                        f"--output={tmp_path / 'bad'}"], capture_output=True, text=True,
                       timeout=600)
  assert bad.returncode == 1
  assert f"{tmp_path / 'export.json'}: missing" in bad.stderr
