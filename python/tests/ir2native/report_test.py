"""mlgo.ir2native.report (what `ir2native report` writes) on rows collected from real
compiles, with final-IR costs everywhere, and a model fitted on real rows."""
import json

import numpy as np

from mlgo.ir2native import dataset, model as model_lib, report

import i2ntestlib as lib


def test_report(tmp_path):
  c = lib.make_corpus(tmp_path / "corpus", ("calls.c", "catch_rethrow.cpp"),
                      heldout=("catch_rethrow",))
  rows = tmp_path / "rows"
  stats = dataset.collect(c.modules, rows, passes=("default", "flip0.3"), final_ir=1.0,
                          jobs=2)
  assert stats["failed"] == 0
  m = model_lib.SizeModel.load(lib.shared_model_dir())
  out = tmp_path / "report"
  rep = report.run(m, [str(rows)], {"heldout": ([str(rows)], ("heldout",)),
                                    "nothing": ([str(rows)], ("no_such_split",))}, out)
  assert set(rep["suites"]) == {"heldout"}      # a suite without rows is left out
  s = rep["suites"]["heldout"]
  test = dataset.load(rows, splits=("heldout",), passes=("default",))
  assert s["rows"] == len(test["native_size"]) > 10
  assert s["rows_with_final_ir"] == int(np.isfinite(test["final_instructions"]).sum()) > 0
  assert s["packages"] == ["catch_rethrow"]
  assert set(s["same_functions"]) == set(report.PREDICTORS)
  for name, met in s["same_functions"].items():
    assert 0 <= met["mape"] < 10 and -1 <= met["spearman"] <= 1, (name, met)
  # The numbers are compare()'s on the same rows.
  train = dataset.load(rows, splits=("train",))
  want = model_lib.compare(m, train, test)
  assert s["same_functions"]["tti_code_size"]["mape"] == want["same_functions"][
      "tti_code_size"]["mape"]
  assert rep["training_rows"] == len(train["native_size"])
  assert json.loads((out / "report.json").read_text())["suites"]["heldout"]["rows"] == s["rows"]
  md = (out / "report.md").read_text()
  for p in report.PREDICTORS:
    assert f"| heldout | {s['rows_with_final_ir']} | {p} | " in md
  assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
