"""runtime_check --measured_guard --final=fastest when no binary beat the default's on the
second workload: the default build is shipped from a copy of its own (the layouts relink
in place, and each side needs its dir), and the figures are the default's to the count."""
import json

from mlgo.evaluation import measured_guard as mg
from mlgo.evaluation import runtime_check as rc
from mlgo.util import cli

import runtime_testlib

PROGRAM = "cjson"


def test_default_shipped_from_its_own_copy(tmp_path, monkeypatch):
  runtime_testlib.program_with_source(PROGRAM, tmp_path, monkeypatch)
  model = next(p for p in cli.runfile_candidates("models/regalloc_eviction")
               if (p / "policy.json").exists())
  chose = {}

  def nothing_faster(default_totals, measured):   # the fault: every binary measured slower
    chose.update(measured)
    return "default", {k: 1.0 for k in measured}
  monkeypatch.setattr(mg, "fastest_binary", nothing_faster)
  out = tmp_path / "rc"
  (row,) = rc.run("regalloc_eviction", model, out, programs=[PROGRAM], measured_guard=True,
                  final="fastest", layouts=1)
  assert set(chose) == {"routed", "policy"}   # the routed build was profiled too
  sel = json.loads((out / PROGRAM / "measured" / "selection.json").read_text())
  assert sel["shipped"] == "default" and sel["binaries_pct"] == {"routed": 1.0, "policy": 1.0}
  copy = out / PROGRAM / "shipped-default"
  assert (copy / PROGRAM).exists() and (copy / "layout-1" / PROGRAM).exists()
  assert (copy / PROGRAM).read_bytes() == (out / PROGRAM / "default" / PROGRAM).read_bytes()
  # The same binary on both sides, in the same layouts: the same counts.
  assert row["policy"] == row["default"]
  assert row["layouts"]["policy"] == row["layouts"]["default"]
