"""explain_growth on a real clang compile: the departures from clang's answers are named
by caller and callee from the inliner's remarks, each revert is a real compile, and a
policy that answers like clang has nothing to explain."""
import csv
import subprocess

import pytest

from mlgo import env
from mlgo.env import policies
from mlgo.evaluation import growth
from mlgo.training import testing
from mlgo.util import cli


@pytest.fixture(scope="module")
def module(tmp_path_factory):
  return env.module_from_source(testing.program("calls.c"),
                                str(tmp_path_factory.mktemp("bc")), opt="Oz")


# Inlines every call site whose cost is below threshold + 1000: more than clang at -Oz.
GREEDY_INLINER = policies.ThresholdShift(1000)


@pytest.fixture(scope="module")
def report(module):
  return growth.explain_module(module, GREEDY_INLINER, "inlining")


def test_departures_are_named_and_measured(module, report):
  deps = report["departures"]
  assert deps, "a policy inlining far past clang's threshold must depart somewhere"
  assert report["names"]
  source = open(testing.program("calls.c")).read()
  for d in deps:
    assert d.action != d.default
    assert d.action == 1  # only ever more inlining than clang
    assert d.features["cost_estimate"] >= d.features["threshold"]
    assert d.caller in source and d.callee in source, (d.caller, d.callee)
    assert d.saved is not None
  assert report["reverted"] == len(deps)
  # A revert is a real compile: the one at the first departure, made again by hand.
  first = deps[0]
  res = env.compile_module(module, "inlining", growth._DefaultAt(GREEDY_INLINER, first.index))
  assert report["policy"] - res.reward["text_size"] == first.saved
  assert report["policy"] != report["default"]


def test_grouping_and_files(report, tmp_path):
  groups = growth.by_site(report["departures"])
  assert sum(g["count"] for g in groups) == len(report["departures"])
  assert sum(g["saved"] for g in groups) == pytest.approx(
      sum(d.saved for d in report["departures"]))
  assert [g["saved"] for g in groups] == sorted((g["saved"] for g in groups), reverse=True)
  md = growth.markdown(report)
  assert f"{report['default']:.0f} -> {report['policy']:.0f} bytes" in md
  assert f"`{groups[0]['callee']}`" in md
  rows = growth.csv_rows(report)
  assert [int(r["index"]) for r in rows] == [d.index for d in report["departures"]]
  assert all(r["policy"] == 1 and r["clang"] == 0 for r in rows)


def test_clangs_own_answers_leave_nothing_to_explain(module):
  rep = growth.explain_module(module, policies.DefaultPolicy("inlining"), "inlining")
  assert rep["departures"] == [] and rep["decisions"] > 0
  assert rep["policy"] == rep["default"]


def test_max_reverts_leaves_the_rest_unmeasured(module, report):
  rep = growth.explain_module(module, GREEDY_INLINER, "inlining", max_reverts=1)
  assert rep["reverted"] == 1
  assert rep["departures"][0].saved == report["departures"][0].saved
  assert all(d.saved is None for d in rep["departures"][1:])
  assert "measured)" in growth.markdown(rep) or len(rep["departures"]) == 1


def test_names_are_demangled():
  assert growth.demangle(["_ZN10LogMessageC2EPKci", "run", "_Zbogus"]) == [
      "LogMessage::LogMessage(char const*, int)", "run", "_Zbogus"]
  assert growth.demangle([]) == []


def test_long_names_are_shortened_for_the_table():
  long = ("std::_Rb_tree_node<std::pair<TagLib::String const, TagLib::StringList>>* "
          "std::_Rb_tree<TagLib::String, std::pair<TagLib::String const, TagLib::StringList>>"
          "::_M_copy(std::_Rb_tree_node<std::pair<TagLib::String const, TagLib::StringList>>*)")
  assert growth.short_name(long) == ("std::_Rb_tree_node<...>* std::_Rb_tree<...>::_M_copy("
                                     "std::_Rb_tree_node<...>*)")
  assert growth.short_name("run") == "run"
  assert growth.short_name("x" * 90 + "::operator<(int)").endswith("operator<(int)")


def test_only_inlining_problems():
  with pytest.raises(ValueError, match="regalloc_eviction"):
    growth.explain_module(None, GREEDY_INLINER, "regalloc_eviction")


def _tool():
  built = cli.built_file("tools/explain_growth")
  if built is None:
    pytest.skip("tools/explain_growth is not built (run under bazel test)")
  return str(built)


def test_the_tool_explains_a_source_and_names_a_missing_list(tmp_path):
  policy = testing.shipped_policy("inlining_oz")
  out = tmp_path / "out"
  p = subprocess.run([_tool(), f"--policy={policy}", f"--module={testing.program('calls.c')}",
                      f"--output={out}"], capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr
  assert "## calls: " in p.stdout and "decisions differ from clang's" in p.stdout
  rows = list(csv.DictReader(open(out / "growth.csv")))
  assert all(r["module"] == "calls" and r["policy"] != r["clang"] for r in rows)
  assert (out / "growth.md").read_text().count("## calls: ") == 1
  bad = subprocess.run([_tool(), f"--policy={policy}", f"--evaluation={tmp_path}",
                        f"--output={tmp_path / 'bad'}"], capture_output=True, text=True,
                       timeout=600)
  assert bad.returncode != 0
  assert f"{tmp_path / 'regressed_modules.csv'}: missing" in bad.stderr
  assert not (tmp_path / "bad").exists()
