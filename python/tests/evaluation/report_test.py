"""The evaluation report's figures, from hand-made per-module scores (no compiles): totals,
regressions, the per-key geomean, the median module, per-package tables, the list of
modules that got worse and the failed modules."""
import csv
import io
import json
import types

import pytest

from mlgo.evaluation import report


def _module(name, package, language="c"):
  return types.SimpleNamespace(name=name, package=package, language=language)


def _side(scores, ok=True, decisions=3):
  return {"ok": ok, "reason": None if ok else "crashed", "scores": scores,
          "decisions": decisions, "seconds": 0.5}


def test_report_figures_for_hand_made_regalloc_scores(tmp_path):
  t = report.Tally()
  # Keys are functions: f grows 10% (a regression), g shrinks 50%, h is even.
  assert t.add(_module("a.c", "pa"), _side({"f": 100.0, "g": 300.0}),
               _side({"f": 110.0, "g": 150.0}), "local", None)
  assert t.add(_module("b.cpp", "pb", "c++"), _side({"h": 50.0}), _side({"h": 50.0}),
               "local", None)
  # A failed policy compile is counted and left out of the totals.
  assert not t.add(_module("c.c", "pa"), _side({"k": 1.0}), _side({}, ok=False), "local", None)
  out, stream = tmp_path / "e", io.StringIO()
  s = report.write_report(t, "regalloc_eviction", "P", types.SimpleNamespace(path="C"),
                          "all", out, stream)
  assert (s["modules"], s["keys"], s["failed"]) == (2, 3, 1)
  assert s["default"] == 450.0 and s["policy_score"] == 310.0
  assert s["change_pct"] == pytest.approx(-31.111, abs=1e-3)
  assert s["regressions"] == 1 and s["improvements"] == 1
  geo = ((111 / 101) * (151 / 301) * 1.0) ** (1 / 3) - 1
  assert s["key_geomean_change_pct"] == pytest.approx(100 * geo)
  # Module a: (260 + 1) / (400 + 1) - 1 = -34.9%; b: 0; median of two is the larger.
  assert s["median_module_change_pct"] == pytest.approx(0.0)
  assert s["per_package"]["pa"]["change_pct"] == pytest.approx(-35.0)
  assert s["per_language"]["c++"]["keys"] == 1
  assert s["modules_regressed"] == 0   # a's function grew, the module did not
  rows = list(csv.DictReader(open(out / "per_key.csv")))
  assert [r["key"] for r in rows] == ["f", "g", "h"] and rows[0]["regression"] == "1"
  assert "c.c" in (out / "failed.csv").read_text() and "crashed" in (out / "failed.csv").read_text()
  assert json.loads((out / "summary.json").read_text())["line"] == s["line"]
  assert s["line"] == ("modules=2 functions=3 default_cost=450.0 policy_cost=310.0 "
                       "change=-31.11% regressions=1")
  assert (out / "changes.png").stat().st_size > 0
  assert stream.getvalue().rstrip().endswith(s["line"])


def test_regressed_modules_largest_growth_first_with_package(tmp_path):
  t = report.Tally()
  for name, pkg, d, p in [("small.c", "zlib", 1000, 1020), ("big.c", "expat", 1000, 1100),
                          ("even.c", "zlib", 500, 500), ("gain.c", "lz4", 800, 700)]:
    t.add(_module(name, pkg), _side({name: d}), _side({name: p}), "local", None)
  stream = io.StringIO()
  s = report.write_report(t, "inlining", "P", types.SimpleNamespace(path="C"), "heldout",
                          tmp_path, stream)
  assert s["modules_regressed"] == 2 and s["modules_regressed_pct"] == 50.0
  rows = list(csv.DictReader(open(tmp_path / "regressed_modules.csv")))
  assert [(r["module"], r["package"]) for r in rows] == [("big.c", "expat"), ("small.c", "zlib")]
  assert float(rows[0]["change_pct"]) == pytest.approx(100 * (1101 / 1001 - 1), abs=1e-3)
  assert "big.c  (expat" in stream.getvalue()
  assert s["line"].startswith("modules=4 default_text=3300 policy_text=3320 change=+0.61%")


def test_missing_score_counts_a_key_one_side_lacks(tmp_path):
  # Regalloc: a function with spill code under the policy only has default score 0.
  t = report.Tally()
  t.add(_module("a.c", "pa"), _side({"f": 10.0}), _side({"f": 10.0, "new": 5.0}), "local", 0.0)
  s = report.write_report(t, "regalloc_eviction", "P", types.SimpleNamespace(path="C"),
                          "all", tmp_path, io.StringIO())
  assert s["keys"] == 2 and s["policy_score"] == 15.0 and s["regressions"] == 1
