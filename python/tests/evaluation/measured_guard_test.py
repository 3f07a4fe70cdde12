"""The guard judged by measured run time (mlgo.evaluation.measured_guard and
runtime_check --measured_guard): cachegrind's per-function counts read from a real run,
bad outputs refused with the file named, the second workload, and one program built
with the selection end to end."""
import json
import subprocess

import pytest

from mlgo.evaluation import measured_guard as mg
from mlgo.evaluation import runtime_build as rb
from mlgo.evaluation import runtime_check as rc
from mlgo.evaluation import runtime_programs as rp
from mlgo.profiles.callgrind import ProfileError
from mlgo.util import cli
from mlgo.util.toolchain import toolchain

import runtime_testlib

PROGRAM = "cjson"   # a "model" program: three translation units, well under a second

CXX = r"""
#include <cstdio>
#include <cstdlib>
namespace demo {
__attribute__((noinline)) long spin(long n) {
  long s = 0;
  for (long i = 0; i < n; i++) s += i % 7;
  return s;
}
}
static long quiet(long n) { return n * 3; }
int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 100000;
  std::printf("%ld %ld\n", demo::spin(n), quiet(n));
  return 0;
}
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
  """A real cachegrind output of a small C++ program, names not demangled."""
  d = tmp_path_factory.mktemp("cg")
  (d / "p.cc").write_text(CXX)
  subprocess.run([toolchain(22).clangxx, "-O1", str(d / "p.cc"), "-o", str(d / "p")],
                 check=True)
  out = d / "cachegrind.out"
  stdout, summary = rb.cachegrind(d / "p", ["200000"], d, out, demangle=False)
  assert stdout.strip()
  return out, summary


def test_recorded_output_per_function(recorded):
  path, summary = recorded
  events, per_fn = mg.function_events(path)
  assert events[:2] == ["Ir", "I1mr"]
  for i, e in enumerate(events):   # the reader checks this too; here against run()'s sums
    assert sum(c[i] for c in per_fn.values()) == summary[e], e
  spin = "_ZN4demo4spinEl"         # the symbol llc knows, not "demo::spin(long)"
  assert spin in per_fn and "main" in per_fn
  ir = events.index("Ir")
  assert per_fn[spin][ir] > 200000 * 3     # the loop: a few instructions an iteration
  assert per_fn[spin][ir] > 0.5 * summary["Ir"]


def test_bad_outputs_name_the_file(recorded, tmp_path):
  path, _ = recorded
  text = path.read_text()
  cases = {
      "empty": "",
      "truncated": text[: len(text) // 2].rsplit("\n", 1)[0] + "\n",  # no summary
      "garbage": text.replace("fn=main", "this is not cachegrind", 1),
      "wrong_sum": text.replace("summary: ", "summary: 1", 1),
      "too_many_counts": text.replace("\nfn=main\n", "\nfn=main\n1 " + "1 " * 20 + "\n", 1),
  }
  for name, body in cases.items():
    f = tmp_path / name
    f.write_text(body)
    with pytest.raises(ProfileError, match=str(f)):
      mg.function_events(f)
  with pytest.raises(ProfileError, match="cannot read"):
    mg.function_events(tmp_path / "missing")


def test_one_policy_choice_and_summary():
  d = {"a": 100.0, "b": 50.0, "c": 10.0, "only_default": 5.0}
  p = {"a": 90.0, "b": 50.0, "c": 12.0, "only_policy": 1.0}
  assert mg.fastest_policy(d, [p]) == {"a": 0}     # ties and one-sided names stay default
  s = mg.summarize(d, p, ["a"])
  assert s["chosen"] == 1 and s["functions_run"] == 5
  assert s["default"] == 165.0 and s["policy"] == 153.0
  assert s["selected_estimate"] == 90.0 + 50.0 + 10.0 + 5.0


def test_fastest_policy_routes_each_function_to_its_cheapest_build():
  d = {"a": 100.0, "b": 50.0, "c": 10.0, "d": 7.0}
  p0 = {"a": 90.0, "b": 40.0, "c": 12.0, "d": 6.0}
  p1 = {"a": 95.0, "b": 30.0, "c": 10.0, "d": 6.0}
  route = mg.fastest_policy(d, [p0, p1])
  assert route == {"a": 0, "b": 1, "d": 0}     # c: a tie with the default; d: the earlier
  s = mg.summarize(d, [p0, p1], route)
  assert s["chosen_per_policy"] == [2, 1] and s["candidates"] == [141.0]
  assert s["selected_estimate"] == 90.0 + 30.0 + 10.0 + 6.0


def test_mean_costs_over_layouts():
  got = mg.mean_costs([{"a": 10.0, "b": 4.0}, {"a": 14.0}, {"a": 12.0, "c": 3.0}])
  assert got == pytest.approx({"a": 12.0, "b": 4.0 / 3, "c": 1.0})
  with pytest.raises(ValueError, match="no layout"):
    mg.mean_costs([])


def test_selection_over_layouts_chooses_on_the_mean(tmp_path, monkeypatch):
  """selection_layouts=2: each build also runs the second workload in a layout of its
  own (code moved inside functions, not one of the judged layouts), and the route is
  fastest_policy over the two runs' mean per function."""
  runtime_testlib.program_with_source(PROGRAM, tmp_path, monkeypatch)
  model = next(p for p in cli.runfile_candidates("models/regalloc_eviction")
               if (p / "policy.json").exists())
  out = tmp_path / "rc"
  n = mg.SELECTION_LAYOUT_BASE + 1
  (row,) = rc.run("regalloc_eviction", model, out, programs=[PROGRAM], measured_guard=True,
                  selection_layouts=2)
  sel = json.loads((out / PROGRAM / "measured" / "selection.json").read_text())
  assert sel["selection_layouts"] == row["selection"]["selection_layouts"] == 2
  costs = {}
  for side in ("default", "policy"):
    plain = out / PROGRAM / f"selection.cachegrind.{side}"
    moved = out / PROGRAM / f"selection.cachegrind.{side}.layout-{n}"
    one, two = mg.function_cycles(plain), mg.function_cycles(moved)
    assert one != two, side          # another layout: other cycle counts somewhere
    costs[side] = mg.mean_costs([one, two])
    # The allocation compiled again with other block offsets, not the same objects.
    objs = sorted((out / PROGRAM / side).glob("*.o"))
    assert objs and any(o.read_bytes() != (o.parent / f"layout-{n}" / o.name).read_bytes()
                        for o in objs), side
  want = mg.fastest_policy(costs["default"], [costs["policy"]])
  assert sorted(sel["functions"]) == sorted(want)
  assert sel["default"] == pytest.approx(sum(costs["default"].values()))
  with pytest.raises(ValueError, match="selection_layouts"):
    rc.run("regalloc_eviction", model, out, programs=[PROGRAM], selection_layouts=2)


def test_second_workload_differs_but_is_deterministic(tmp_path):
  a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
  inp, script = rp.write_workload(a)
  rp.write_workload(b, variant=1)
  rp.write_workload(c, variant=1)
  for f in ("input.txt", "doc.md", "doc.xml", "doc.json", "doc.yaml", "utf8.txt"):
    assert (a / f).read_bytes() != (b / f).read_bytes(), f
    assert (b / f).read_bytes() == (c / f).read_bytes(), f
    assert abs((a / f).stat().st_size - (b / f).stat().st_size) < 0.2 * (a / f).stat().st_size
  with pytest.raises(ValueError, match="variant"):
    rp.write_workload(tmp_path / "d", variant=-1)
  # Every program does other work on the second workload: other files, or other args.
  for p in rp.PROGRAMS:
    args = rp.program_args(p, inp, script, selection=True)
    reads = any(x in " ".join(p.args) for x in ("{input}", "{work}"))
    assert reads or p.name == "lua" or args != rp.program_args(p, inp, script), p.name


def test_measured_guard_build_of_one_program(tmp_path, monkeypatch):
  """runtime_check --measured_guard on one small program: the second workload is
  profiled on both plain builds, and the selected build has, per function, the policy's
  allocation cost for exactly the functions that ran faster there, the default's for
  every other."""
  runtime_testlib.program_with_source(PROGRAM, tmp_path, monkeypatch)
  model = next(p for p in cli.runfile_candidates("models/regalloc_eviction")
               if (p / "policy.json").exists())
  out = tmp_path / "rc"
  (row,) = rc.run("regalloc_eviction", model, out, programs=[PROGRAM], measured_guard=True)
  sel = json.loads((out / PROGRAM / "measured" / "selection.json").read_text())
  assert row["selection"]["chosen"] == len(sel["functions"]) == sel["chosen"]
  assert 0 < sel["chosen"] < sel["functions_run"]
  assert sel["selected_estimate"] <= min(sel["default"], sel["policy"])
  d_cyc = mg.function_cycles(out / PROGRAM / "selection.cachegrind.default")
  p_cyc = mg.function_cycles(out / PROGRAM / "selection.cachegrind.policy")
  for f in sel["functions"]:
    assert p_cyc[f] < d_cyc[f], f
  scores = {v: json.loads((out / PROGRAM / v / "functions.json").read_text())
            for v in ("default", "policy", "measured")}
  chosen = set(sel["functions"])
  differ = 0
  for f in set(scores["default"]) | set(scores["policy"]):
    side = "policy" if f in chosen else "default"
    assert scores["measured"].get(f, 0.0) == pytest.approx(scores[side].get(f, 0.0),
                                                           rel=1e-9), f
    differ += scores["policy"].get(f, 0.0) != scores["default"].get(f, 0.0)
  assert differ > 0
  assert row["default"]["cycles"] > 0 and row["policy"]["cycles"] > 0
  with pytest.raises(ValueError, match="pick one"):
    rc.run("regalloc_eviction", model, out, programs=[PROGRAM], measured_guard=True,
           guarded=True)


def test_measured_guard_over_two_policies(tmp_path, monkeypatch):
  """--candidates: each function gets the allocation of whichever build (default, the
  policy, the candidate) ran it fastest on the second workload; the selected build's
  per-function cost is that build's."""
  runtime_testlib.program_with_source(PROGRAM, tmp_path, monkeypatch)
  models = [next(p for p in cli.runfile_candidates(m) if (p / "policy.json").exists())
            for m in ("models/regalloc_eviction", "models/regalloc_eviction_wide")]
  out = tmp_path / "rc"
  (row,) = rc.run("regalloc_eviction", models[0], out, programs=[PROGRAM],
                  measured_guard=True, candidates=[models[1]], final="fastest")
  sel = json.loads((out / PROGRAM / "measured" / "selection.json").read_text())
  # final="fastest": the routed build ran the second workload too, and the side measured
  # is the fastest binary there (the default's own unless one is faster).
  def whole(side):
    events, per_fn = mg.function_events(out / PROGRAM / f"selection.cachegrind.{side}")
    return rb.metrics(dict(zip(events, map(sum, zip(*per_fn.values())))))["cycles"]
  base = whole("default")
  want = {s: 100 * (whole(s) / base - 1) for s in ("routed", "policy", "candidate-1")}
  assert sel["binaries_pct"] == pytest.approx(want, abs=1e-9)
  best = min(want, key=want.get)
  assert sel["shipped"] == (best if want[best] < 0 else "default")
  if sel["shipped"] == "default":
    assert row["policy"]["cycles"] == row["default"]["cycles"]
  assert sel["chosen_per_policy"][0] > 0 and sel["chosen_per_policy"][1] > 0
  assert row["selection"]["chosen"] == len(sel["route"])
  scores = {v: json.loads((out / PROGRAM / v / "functions.json").read_text())
            for v in ("default", "policy", "candidate-1", "measured")}
  sides = ["policy", "candidate-1"]
  routed = 0
  for f in set(scores["default"]) | set(scores["policy"]) | set(scores["candidate-1"]):
    side = sides[sel["route"][f]] if f in sel["route"] else "default"
    assert scores["measured"].get(f, 0.0) == pytest.approx(scores[side].get(f, 0.0),
                                                           rel=1e-9), (f, side)
    routed += side == "candidate-1" and scores[side].get(f, 0.0) != scores["policy"].get(f, 0.0)
  assert routed > 0
  with pytest.raises(ValueError, match="are for a guard"):
    rc.run("regalloc_eviction", models[0], out, programs=[PROGRAM], candidates=[models[1]])
  with pytest.raises(ValueError, match="only for the measured guard"):
    rc.run("regalloc_eviction", models[0], out, programs=[PROGRAM], final="fastest")
