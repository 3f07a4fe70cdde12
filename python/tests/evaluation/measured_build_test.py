"""tools/measured_build: a small two-file program built with every allocation through
tools/guarded_cc, profiled under cachegrind, and rebuilt with the fastest allocation per
function: each chosen function has exactly the chosen build's code (same instruction
count in a profiled run), the rest clang's; a second run reuses everything; a build that
fails, and a build whose program prints something else, are handled."""
import hashlib
import json
import pathlib
import subprocess

import pytest

from mlgo.evaluation import measured_build as mb
from mlgo.evaluation import measured_guard as mg
from mlgo.evaluation import runtime_build as rb
from mlgo.training import testing
from mlgo.util import cli

MAIN = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
uint64_t churn(const uint64_t *in, int n, uint64_t *out);
double blend(const double *p, int n);
uint64_t across_calls(uint64_t a, uint64_t b, uint64_t c, uint64_t d, int n);
static uint64_t seen;
void sink(uint64_t a, uint64_t b, uint64_t c, uint64_t d) { seen ^= a + b + c + d; }
int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 3;
  static uint64_t in[2048], out[8];
  static double p[2048];
  for (int i = 0; i < 2048; ++i) { in[i] = i * 2654435761u + rounds; p[i] = i * 0.001; }
  uint64_t h = 0;
  for (int r = 0; r < rounds; ++r) h ^= churn(in, 2048, out);
#ifdef OTHER_OUTPUT
  h += 1;
#endif
#ifdef CRASH_NOW
  abort();
#endif
  printf("%llu %.3f %llu\n", (unsigned long long)h, blend(p, 2048),
         (unsigned long long)(across_calls(1, 2, 3, 4, 50 * rounds) ^ seen));
  return 0;
}
"""
BUILD = "{cc} -O2 -c pressure.c -o p.o && {cc} -O2 -c main.c -o m.o && {cc} -o prog p.o m.o"


@pytest.fixture()
def source(tmp_path):
  src = tmp_path / "src"
  src.mkdir()
  (src / "main.c").write_text(MAIN)
  (src / "pressure.c").write_text(
      pathlib.Path(testing.data_path("testdata/programs/pressure.c")).read_text())
  return src


def _tool():
  gcc = cli.built_file("tools/guarded_cc")
  assert gcc is not None, "tools/guarded_cc is not built"
  return gcc


def _model():
  return cli.policy_path("models/regalloc_eviction")


class Log(list):
  """A stream that keeps what the tool printed, one write an item."""
  def write(self, s):
    self.append(s)

  def flush(self):
    pass


def _ir(cg):
  events, per_fn = mg.function_events(cg)
  i = events.index("Ir")
  return {f: c[i] for f, c in per_fn.items()}


def test_fastest_allocation_per_function(source, tmp_path):
  out = tmp_path / "out"
  log = Log()
  r = mb.measured_build(source, BUILD, "prog", ["3", "5"], out, policy=_model(), samples=1,
                        check_runs=["4"], guarded_cc=_tool(), stream=log)
  assert r["sides_kept"] == ["policy", "candidate-1"] and r["sides_left_out"] == []
  # The shipped binary is the fastest of those measured on the --run workloads, each
  # against clang's build by the geomean over the runs; clang's own unless one is faster.
  totals = {s: json.loads((out / d / "profile.json").read_text())["totals"]
            for s, d in (("default", "default"), ("routed", "guarded"),
                         ("policy", "policy"), ("candidate-1", "candidate-1"))}
  want = {s: 100 * (((t[0] / totals["default"][0]) * (t[1] / totals["default"][1])) ** 0.5 - 1)
          for s, t in totals.items() if s != "default"}
  assert r["final"] == "fastest" and r["selection_change_pct"].keys() == want.keys()
  for s, v in want.items():
    assert r["selection_change_pct"][s] == pytest.approx(v, abs=1e-9), s
  best = min(want, key=want.get)
  assert r["shipped"] == (best if want[best] < 0 else "default")
  ship_dir = out / {"routed": "guarded"}.get(r["shipped"], r["shipped"])
  assert r["binary"] == str(ship_dir / "src" / "prog")
  shipped_check = json.loads((ship_dir / "check.json").read_text())["totals"][0][0]
  assert r["runs"][0]["shipped_cycles"] == round(shipped_check)
  assert f"Shipped: **{r['shipped']}**" in (out / "report.md").read_text()
  assert len(r["runs"]) == 1 and r["runs"][0]["run"] == "4"
  assert abs(r["runs"][0]["instructions_change_pct"]) < 50 and "instructions" in \
      (out / "report.md").read_text()
  for name in ("report.json", "report.md", "report.png", "functions.txt"):
    assert (out / name).stat().st_size > 0, name
  prof = {s: json.loads((out / s / "profile.json").read_text())["functions"]["cycles"]
          for s in ("default", "policy", "candidate-1")}
  listing = dict(line.split() for line in (out / "functions.txt").read_text().splitlines())
  route = {f: int(k) for f, k in listing.items()}
  own = mb.program_functions(out / "default" / "src" / "prog")
  assert {"main", "churn", "blend", "across_calls", "sink"} <= own and "printf" not in own
  assert route == mg.fastest_policy({f: c for f, c in prof["default"].items() if f in own},
                                    [prof["policy"], prof["candidate-1"]])
  assert set(route) <= own
  assert r["functions_chosen"] == len(route)
  # The final program: each chosen function runs the chosen build's code, every other one
  # clang's (instruction counts per function on the first run, which all builds made).
  fin = out / "final.cg"
  stdout, _ = rb.cachegrind(out / "guarded" / "src" / "prog", ["3"], out / "guarded" / "src",
                            fin, demangle=False)
  ir = _ir(fin)
  sides = {"default": _ir(out / "default" / "cg.select.0"),
           0: _ir(out / "policy" / "cg.select.0"), 1: _ir(out / "candidate-1" / "cg.select.0")}
  mine = [f for f in ("churn", "blend", "across_calls") if f in ir]
  assert {f for f in mine if f in route}, "no function left clang's allocation"
  for f in mine:
    assert ir[f] == sides[route.get(f, "default")][f], f
  assert json.loads((out / "default" / "profile.json").read_text())["output_sha256"][0] == \
      hashlib.sha256(stdout).hexdigest()
  # Again: everything is reused (no build, no profile); another check run only measures.
  log.clear()
  again = mb.measured_build(source, BUILD, "prog", ["3", "5"], out, policy=_model(),
                            samples=1, check_runs=["4"], guarded_cc=_tool(), stream=log)
  assert again == r
  assert not any(w in x for x in log for w in ("building", "profiling", "measuring"))
  # --final=routed: the routed build whatever it measured, from the same builds.
  routed = mb.measured_build(source, BUILD, "prog", ["3", "5"], out, policy=_model(),
                             samples=1, check_runs=["4"], guarded_cc=_tool(),
                             final_mode="routed", stream=log)
  assert routed["shipped"] == "routed" and routed["selection_change_pct"] == {}
  assert routed["binary"] == str(out / "guarded" / "src" / "prog")
  assert not any("building" in x or "profiling" in x for x in log)
  other = mb.measured_build(source, BUILD, "prog", ["3", "5"], out, policy=_model(),
                            samples=1, check_runs=["2"], guarded_cc=_tool(), layouts=4,
                            stream=log)
  assert other["runs"][0]["run"] == "2" and not any("building" in s for s in log)
  # Five stack layouts a side: the mean change and a rank-sum verdict.
  (row,) = other["runs"]
  assert row["layouts"] == 5 and 0 < row["p_slower"] <= 1 and 0 < row["p_faster"] <= 1
  assert row["verdict"] in ("faster", "slower", "within layout noise")
  assert (row["verdict"] == "faster") == (row["p_faster"] < 0.05 and row["change_pct"] < 0)
  check = json.loads((out / "guarded" / "check.json").read_text())
  assert len(check["totals"]) == 5 and "verdict" in (out / "report.md").read_text()
  # The layouts ran two at a time; one at a time gives the same counts to the event.
  alone = mb._check(out / "guarded", "prog", ["2"], "alone", log, layouts=4, jobs=1)  # pylint: disable=protected-access
  assert alone["totals"] == check["totals"] and alone["instructions"] == check["instructions"]
  # Choosing on the terms that do not move with code addresses: the same builds and
  # profiles, another list (from each function's instructions and data-cache misses).
  log.clear()
  data = mb.measured_build(source, BUILD, "prog", ["3", "5"], out, policy=_model(),
                           samples=1, check_runs=["4"], guarded_cc=_tool(),
                           select_on="data", stream=log)
  assert data["select_on"] == "data" and not any("profiling" in x for x in log)
  dprof = {s: json.loads((out / s / "profile.json").read_text())["functions"]["data"]
           for s in ("default", "policy", "candidate-1")}
  listing = dict(line.split() for line in (out / "functions.txt").read_text().splitlines())
  assert {f: int(k) for f, k in listing.items()} == mg.fastest_policy(
      {f: c for f, c in dprof["default"].items() if f in own},
      [dprof["policy"], dprof["candidate-1"]])
  events, per_fn = mg.function_events(out / "policy" / "cg.select.0")
  ev = dict(zip(events, per_fn["churn"]))
  want = ev["Ir"] + 10 * (ev.get("D1mr", 0) + ev.get("D1mw", 0)) + 100 * (
      ev.get("DLmr", 0) + ev.get("DLmw", 0))
  assert mg.function_cycles(out / "policy" / "cg.select.0", "data")["churn"] == want
  with pytest.raises(ValueError, match="'time' is not one of cycles, data"):
    mg.function_cycles(out / "policy" / "cg.select.0", "time")


def test_a_side_that_prints_otherwise_is_left_out(source, tmp_path):
  # Fault injection: the sampled build's main prints another number.
  build = BUILD.replace("-c main.c", "-c main.c $(case '{cc}' in *unguarded*samples*) "
                        "echo -DOTHER_OUTPUT;; esac)")
  r = mb.measured_build(source, build, "prog", ["2"], tmp_path / "out", policy=_model(),
                        samples=1, guarded_cc=_tool(), stream=open("/dev/null", "w"))
  assert r["sides_kept"] == ["policy"] and r["sides_left_out"] == ["candidate-1"]
  assert r["check_on_selection_runs"]
  assert all(k == "0" for k in (tmp_path / "out" / "functions.txt").read_text().split()[1::2])
  # The same for a side whose program crashes: left out, the rest goes on.
  build = BUILD.replace("-c main.c", "-c main.c $(case '{cc}' in *unguarded*samples*) "
                        "echo -DCRASH_NOW;; esac)")
  r = mb.measured_build(source, build, "prog", ["2"], tmp_path / "crash", policy=_model(),
                        samples=1, guarded_cc=_tool(), stream=open("/dev/null", "w"))
  assert r["sides_kept"] == ["policy"] and r["sides_left_out"] == ["candidate-1"]


def test_the_fastest_binary_is_shipped_and_ties_go_to_clang():
  default = [100.0, 200.0]
  name, pct = mg.fastest_binary(default, {"routed": [99.0, 199.0], "policy": [90.0, 230.0],
                                          "candidate-1": [98.0, 198.0]})
  assert name == "candidate-1" and list(pct) == ["routed", "policy", "candidate-1"]
  assert pct["policy"] == pytest.approx(100 * ((0.9 * 1.15) ** 0.5 - 1))
  # Nothing faster than clang's build: clang's is shipped, also on an exact tie.
  assert mg.fastest_binary(default, {"routed": [101.0, 200.0], "policy": [100.0, 200.0]})[0] \
      == "default"
  assert mg.fastest_binary(default, {})[0] == "default"
  # Equal figures: the first measured wins (the routed build comes first).
  assert mg.fastest_binary(default, {"routed": [99.0, 200.0], "policy": [99.0, 200.0]})[0] \
      == "routed"


def test_a_routed_program_that_prints_otherwise_is_not_shipped(source, tmp_path):
  # Fault injection: only the routed build (guarded_cc --policy_functions) prints another
  # number; the sides and clang's agree, so one of them is shipped and nothing is lost.
  build = BUILD.replace("-c main.c", "-c main.c $(case '{cc}' in *policy_functions*) "
                        "echo -DOTHER_OUTPUT;; esac)")
  log = Log()
  r = mb.measured_build(source, build, "prog", ["2"], tmp_path / "out", policy=_model(),
                        guarded_cc=_tool(), stream=log)
  assert "routed" not in r["selection_change_pct"] and r["shipped"] in ("default", "policy")
  assert any("routed program printed something else" in x for x in log)
  assert r["binary"] == str(tmp_path / "out" / r["shipped"] / "src" / "prog")


def test_bad_input_is_named(source, tmp_path):
  with pytest.raises(mb.MeasuredBuildError, match=r"the build failed \(exit 1\); its log: .*build.log"):
    mb.measured_build(source, "{cc} -c missing.c", "prog", ["1"], tmp_path / "a",
                      policy=_model(), guarded_cc=_tool(), stream=open("/dev/null", "w"))
  with pytest.raises(mb.MeasuredBuildError, match="made no nothere"):
    mb.measured_build(source, BUILD, "nothere", ["1"], tmp_path / "b", policy=_model(),
                      guarded_cc=_tool(), stream=open("/dev/null", "w"))
  with pytest.raises(mb.MeasuredBuildError, match="not a directory"):
    mb.measured_build(tmp_path / "none", BUILD, "prog", ["1"], tmp_path / "c",
                      policy=_model(), guarded_cc=_tool(), stream=open("/dev/null", "w"))
  with pytest.raises(mb.MeasuredBuildError, match="outside the source tree"):
    mb.measured_build(source, BUILD, "prog", ["1"], source / "out", policy=_model(),
                      guarded_cc=_tool(), stream=open("/dev/null", "w"))
  with pytest.raises(mb.MeasuredBuildError, match="select_on: 'time' is not one of"):
    mb.measured_build(source, BUILD, "prog", ["1"], tmp_path / "e", policy=_model(),
                      guarded_cc=_tool(), select_on="time", stream=open("/dev/null", "w"))
  with pytest.raises(mb.MeasuredBuildError, match="final: 'best' is not one of fastest, routed"):
    mb.measured_build(source, BUILD, "prog", ["1"], tmp_path / "f", policy=_model(),
                      guarded_cc=_tool(), final_mode="best", stream=open("/dev/null", "w"))
  with pytest.raises(mb.MeasuredBuildError, match="no --run"):
    mb.measured_build(source, BUILD, "prog", [], tmp_path / "d", policy=_model(),
                      guarded_cc=_tool(), stream=open("/dev/null", "w"))


def test_test_images_are_seeded_ppm(tmp_path):
  from mlgo.evaluation import runtime_workloads as rw  # pylint: disable=import-outside-toplevel
  a, b, c = tmp_path / "a.ppm", tmp_path / "b.ppm", tmp_path / "c.ppm"
  rw.make_ppm(a, 40, 30, seed=1)
  rw.make_ppm(b, 40, 30, seed=1)
  rw.make_ppm(c, 40, 30, seed=2)
  assert a.read_bytes().startswith(b"P6\n40 30\n255\n") and len(a.read_bytes()) == 13 + 40 * 30 * 3
  assert a.read_bytes() == b.read_bytes() != c.read_bytes()


def test_the_command_line(source, tmp_path):
  tool = cli.built_file("tools/measured_build")
  assert tool is not None, "tools/measured_build is not built"
  r = subprocess.run([str(tool), f"--source={source}", f"--build={BUILD}", "--program=prog",
                      "--run=2", "--check=3", "--policy=models/regalloc_eviction",
                      f"--output={tmp_path / 'out'}"], capture_output=True, text=True,
                     timeout=600)
  assert r.returncode == 0, r.stderr[-2000:]
  assert "Geomean change" in r.stdout and "measured_build: building policy" in r.stderr
  bad = subprocess.run([str(tool), f"--source={source}", "--build=false", "--program=prog",
                        "--run=2", "--policy=models/regalloc_eviction",
                        f"--output={tmp_path / 'bad'}"], capture_output=True, text=True,
                       timeout=600)
  assert bad.returncode == 1 and "measured_build: the build failed" in bad.stderr
