"""The generalization report on a real tiny corpus: suite and package tables agree with
evaluate's per-key rows (totals, median module, modules more than 1% worse, largest
growth first), and the files a user opens are there."""
import csv
import json
import math
import pathlib

import pytest

from mlgo.evaluation import generalization
from mlgo.training import testing

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROGRAMS = sorted((pathlib.Path(__file__).parents[1] / "training" / "programs").glob("*.c*"))
POLICY = ROOT / "models" / "inlining_oz"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return testing.make_tiny_corpus(tmp_path_factory.mktemp("corpus"), PROGRAMS, variants=2)


def test_report_matches_per_key_rows(corpus, tmp_path, capsys):
  rep = generalization.run("inlining", POLICY, tmp_path, suites=[str(corpus)])
  (row,) = rep["suites"]
  name = pathlib.Path(corpus).name
  rows = list(csv.DictReader(open(tmp_path / name / "per_key.csv")))
  assert row["modules"] == len(rows) == 8
  d = sum(float(r["default"]) for r in rows)
  p = sum(float(r["policy"]) for r in rows)
  assert row["change_pct"] == pytest.approx((p / d - 1) * 100)
  changes = sorted((float(r["policy"]) + 1) / (float(r["default"]) + 1) - 1 for r in rows)
  assert row["median_module_change_pct"] == pytest.approx(100 * changes[len(changes) // 2])
  # Geomean per key (a module here) of (policy + 1) / (default + 1).
  logs = [math.log(1 + c) for c in changes]
  assert row["key_geomean_change_pct"] == pytest.approx(
      100 * (math.exp(sum(logs) / len(logs)) - 1))
  assert min(changes) <= row["key_geomean_change_pct"] / 100 <= max(changes)
  worse = [c for c in changes if c > 0.01]
  assert row["modules_regressed"] == len(worse)
  assert row["modules_regressed_pct"] == pytest.approx(100 * len(worse) / 8)
  listed = list(csv.DictReader(open(tmp_path / name / "regressed_modules.csv")))
  assert len(listed) == len(worse)
  growth = [float(r["change_pct"]) for r in listed]
  assert growth == sorted(growth, reverse=True)
  # Packages: one row each, "worse" means above +0.5% in total.
  per_pkg = {}
  for r in rows:
    t = per_pkg.setdefault(r["package"], [0.0, 0.0])
    t[0] += float(r["default"])
    t[1] += float(r["policy"])
  assert set(row["per_package"]) == set(per_pkg)
  expect_worse = {k for k, (dd, pp) in per_pkg.items() if (pp / dd - 1) * 100 > 0.5}
  assert set(row["packages_worse"]) == expect_worse
  out = capsys.readouterr().out
  assert out.strip().splitlines()[-1] == generalization.format_line(row)
  for f in ("generalization.md", "generalization.json", "generalization.png"):
    assert (tmp_path / f).stat().st_size > 0
  assert json.loads((tmp_path / "generalization.json").read_text())["suites"][0]["suite"] == name
  assert (tmp_path / name / "report.txt").read_text().count("modules=") == 1


def test_guarded_report_gives_the_plain_one_from_the_same_compiles(corpus, tmp_path):
  """--guarded with plain_output: the plain report equals a separate plain run's, and the
  guarded one has no module bigger than the default's (inlining guards per module)."""
  plain = generalization.run("inlining", POLICY, tmp_path / "p", suites=[str(corpus)])
  both = generalization.run("inlining", POLICY, tmp_path / "g", suites=[str(corpus)],
                            guarded=True, plain_output=tmp_path / "gp")
  (p,), (q,), (g,) = plain["suites"], both["plain"]["suites"], both["suites"]
  for k in ("modules", "change_pct", "modules_regressed", "keys_improved", "line"):
    assert q[k] == p[k], k
  assert both["guarded"] and not both["plain"]["guarded"]
  assert "better of the two" in (tmp_path / "g" / "generalization.md").read_text()
  # A guard with more allocations (regalloc's --candidates/--samples) says which.
  md = generalization.markdown({**both, "guard_choice": {"candidates": ["W"], "samples": 3}})
  assert "best of the default, the policy, W and 3 sampled allocations" in md.splitlines()[0]
  md = generalization.markdown({**both, "guard_choice": {"candidates": [], "samples": 0,
                                                        "no_more_spill_code": True}})
  assert "better of the two, none adding spill code" in md.splitlines()[0]
  md = generalization.markdown({**both, "guard_choice": {"candidates": [], "samples": 0,
                                                        "no_more_spill_code": "loops"}})
  assert "better of the two, none adding spill code to a loop" in md.splitlines()[0]
  assert g["modules_regressed"] == 0 and g["change_pct"] <= min(p["change_pct"], 0.0)
  name = pathlib.Path(corpus).name
  for d in ("g", "gp"):
    assert (tmp_path / d / "generalization.md").exists()
    assert (tmp_path / d / name / "report.txt").read_text().count("modules=") == 1
