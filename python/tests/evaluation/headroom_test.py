"""The headroom report on a real tiny corpus: per module the best is the smallest of the
default and its variants, `policy+0` is the policy itself (evaluate's figures), the
greedy search keeps only flips that shrink, a crashing variant is counted and skipped,
and the inputs it cannot use are refused."""
import csv
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

from mlgo import corpus as corpus_lib
from mlgo import evaluation
from mlgo.env import work
from mlgo.env.policies import LogitShift, PrefixFlip, ThresholdShift
from mlgo.evaluation import headroom
from mlgo.policy import derived, policy_io
from mlgo.training import testing
from mlgo.util import cli

ROOT = pathlib.Path(__file__).resolve().parents[3]
PROGRAMS = sorted((pathlib.Path(__file__).parents[1] / "training" / "programs").glob("*.c*"))
POLICY = ROOT / "models" / "inlining_oz"
EVICTION = ROOT / "models" / "regalloc_eviction"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  return testing.make_tiny_corpus(tmp_path_factory.mktemp("corpus"), PROGRAMS, variants=2)


class _Crashes:
  """A policy that fails on its first decision: its compiles fail (fault injection)."""

  def act(self, observation):
    raise RuntimeError("injected policy failure")


def _rows(out):
  return list(csv.DictReader(open(out / "headroom.csv")))


def test_best_is_the_smallest_and_policy_plus_zero_is_the_policy(corpus, tmp_path, capsys):
  s = headroom.run("inlining", corpus, tmp_path / "h", policy=POLICY, split="all",
                   thresholds=(-1000, 20), shifts=(0.0, 3.0), pool_kind="thread")
  assert capsys.readouterr().out.strip().splitlines()[-1].startswith("headroom: modules=8 ")
  rows = _rows(tmp_path / "h")
  names = ["threshold-1000", "threshold+20", "policy+0", "policy+3"]
  assert len(rows) == s["modules"] == 8 and list(s["variants"]) == names
  for r in rows:
    sizes = {"default": float(r["default"]), **{n: float(r[n]) for n in names}}
    assert float(r["best"]) == min(sizes.values())
    assert sizes[r["best_variant"]] == float(r["best"])
  # Refusing every inlining changes the code: the variants are real, different compiles.
  assert any(float(r["threshold-1000"]) != float(r["default"]) for r in rows)
  d = sum(float(r["default"]) for r in rows)
  b = sum(float(r["best"]) for r in rows)
  assert s["best_per_module"]["all"]["change_pct"] == pytest.approx((b / d - 1) * 100)
  assert s["best_per_module"]["all"]["change_pct"] <= min(
      min(v["change_pct"] for v in s["variants"].values()), 0.0)
  assert set(s["best_per_module"]) >= {"all", "threshold", "policy"}
  # policy+0 is the policy as evaluate runs it, module by module.
  ev = evaluation.evaluate("inlining", corpus, POLICY, tmp_path / "e", split="all",
                             pool_kind="thread")
  plain = {r["module"]: float(r["policy"]) for r in
           csv.DictReader(open(tmp_path / "e" / "per_key.csv"))}
  assert {r["module"]: float(r["policy+0"]) for r in rows} == plain
  assert s["variants"]["policy+0"]["change_pct"] == pytest.approx(ev["change_pct"])
  assert json.loads((tmp_path / "h" / "summary.json").read_text())["modules"] == 8
  assert (tmp_path / "h" / "headroom.png").stat().st_size > 0
  assert not (tmp_path / "h" / "failed.csv").exists()


def test_a_crashing_variant_is_counted_and_the_rest_stand(corpus, tmp_path):
  s = headroom.run("inlining", corpus, tmp_path, split="all", pool_kind="thread",
                   variants=[("crashes", _Crashes()), ("threshold+0", ThresholdShift(0))])
  assert s["modules"] == 8 and s["variant_failures"] == 8 and s["default_failed"] == 0
  assert s["variants"]["crashes"] == dict(s["variants"]["crashes"], modules=0, failed=8)
  failed = list(csv.DictReader(open(tmp_path / "failed.csv")))
  assert {f["variant"] for f in failed} == {"crashes"} and len(failed) == 8
  assert all("injected policy failure" in f["reason"] for f in failed)
  for r in _rows(tmp_path):
    assert r["crashes"] == ""     # no size for a failed compile
    assert float(r["best"]) == min(float(r["default"]), float(r["threshold+0"]))


def test_search_keeps_only_flips_that_shrink(corpus, tmp_path):
  """From the policy's compile the search is never bigger than the policy, per module,
  and on this corpus it finds smaller code for some module; from the default's compile
  it is never bigger than the default."""
  s = headroom.run("inlining", corpus, tmp_path / "p", policy=POLICY, split="all",
                   thresholds=(), shifts=(0.0,), search=6, pool_kind="thread")
  rows = _rows(tmp_path / "p")
  assert all(float(r["search6"]) <= float(r["policy+0"]) for r in rows)
  assert any(float(r["search6"]) < float(r["policy+0"]) for r in rows)
  assert s["search"]["kept"] >= 1 and s["search"]["budget"] == 6
  assert s["modules"] <= s["search"]["compiles"] <= 6 * s["modules"]
  d = headroom.run("inlining", corpus, tmp_path / "d", split="all", thresholds=(),
                   search=3, pool_kind="thread")
  assert list(d["variants"]) == ["search3"] and d["search"]["start"] == "default"
  assert all(float(r["search3"]) <= float(r["default"]) for r in _rows(tmp_path / "d"))
  with pytest.raises(ValueError, match="search budget"):
    headroom.run("inlining", corpus, tmp_path / "x", search=-1)


def test_search_seconds_stops_a_search_after_its_start_compile(corpus, tmp_path):
  """With no time left after the start compile, no flip is tried: one compile a module,
  every search counted as stopped by time, sizes the policy's own; with time enough the
  same search runs to its budget."""
  s = headroom.run("inlining", corpus, tmp_path / "t", policy=POLICY, split="all",
                   thresholds=(), shifts=(0.0,), search=6, search_seconds=0.0,
                   pool_kind="thread")
  assert s["search"]["compiles"] == s["modules"] == s["search"]["stopped_by_time"]
  assert s["search"]["kept"] == 0 and s["search"]["max_seconds"] == 0.0
  assert all(float(r["search6"]) == float(r["policy+0"]) for r in _rows(tmp_path / "t"))
  long = headroom.run("inlining", corpus, tmp_path / "l", policy=POLICY, split="all",
                      thresholds=(), shifts=(0.0,), search=6, search_seconds=3600.0,
                      pool_kind="thread")
  assert long["search"]["stopped_by_time"] == 0 and long["search"]["kept"] >= 1


def test_search_bytes_gives_each_module_compiles_by_its_bitcode_size(corpus, tmp_path):
  """The byte cap is a count, not a clock: a module of S bytes gets at most cap // S
  compiles (at least its start compile, at most the budget), a search ended by it says
  so, and the same search again gives the same compiles and sizes."""
  ref = work.policy_ref(str(POLICY))
  mods = sorted(corpus_lib.load_corpus(corpus).modules, key=lambda m: m.name)
  sizes = {m.name: os.path.getsize(m.bc_path) for m in mods}
  cap = 3 * min(sizes.values()) + 1    # 3 compiles for the smallest module, fewer for others
  seen_bytes = 0
  for m in mods:
    r = headroom.search_module(m, "inlining", ref, 6, 22, 120.0, max_bytes=cap)
    allowed = min(6, max(1, cap // sizes[m.name]))
    assert r["ok"] and r["compiles"] <= allowed, (m.name, r, allowed)
    if r["stopped"] == "bytes":
      seen_bytes += 1
      assert r["compiles"] == allowed < 6
    assert r["stopped"] in ("bytes", "tried")
    again = headroom.search_module(m, "inlining", ref, 6, 22, 120.0, max_bytes=cap)
    assert (again["compiles"], again["size"], again["kept"]) == (
        r["compiles"], r["size"], r["kept"])
  assert seen_bytes >= 1
  s = headroom.run("inlining", corpus, tmp_path / "b", policy=POLICY, split="all",
                   thresholds=(), shifts=(0.0,), search=6, search_bytes=1.0,
                   pool_kind="thread")   # smaller than any module: the start compile only
  assert s["search"]["compiles"] == s["modules"] == s["search"]["stopped_by_bytes"]
  assert s["search"]["max_bytes"] == 1.0 and s["search"]["kept"] == 0
  with pytest.raises(ValueError, match="search_bytes"):
    headroom.run("inlining", corpus, tmp_path / "z", policy=POLICY, search=6, search_bytes=0)


def test_floor_default_never_keeps_a_compile_bigger_than_clangs(corpus, tmp_path):
  """A policy that inlines more than the model grows some tiny modules past clang's size,
  and a search from it keeps the growth there; with floor_default the search starts from
  clang's compile exactly where that is smaller, so it ends no bigger than either."""
  ref = work.policy_ref(str(testing.inline_more_policy(tmp_path / "more")))
  grew = 0
  for m in corpus_lib.load_corpus(corpus).modules:
    plain = headroom.search_module(m, "inlining", ref, 3, 22, 120.0)
    floor = headroom.search_module(m, "inlining", ref, 3, 22, 120.0, floor_default=0.0)
    assert floor["ok"] and floor["start_size"] == plain["start_size"]
    assert floor["size"] <= min(floor["start_size"], floor["default_size"])
    assert floor["start"] == ("default" if floor["default_size"] < floor["start_size"]
                              else "policy")
    assert plain["start"] == "policy" and "default_size" not in plain
    if plain["size"] > floor["default_size"]:   # the plain search kept a regression
      grew += 1
      assert floor["start"] == "default"
      # A floor above this module's growth leaves the search where the policy put it.
      growth = floor["start_size"] / floor["default_size"] - 1.0
      above = headroom.search_module(m, "inlining", ref, 3, 22, 120.0,
                                     floor_default=growth + 0.001)
      assert above["start"] == "policy" and above["default_size"] == floor["default_size"]
  assert grew >= 1


def test_prefix_flip_replays_then_flips_then_hands_over():
  then = ThresholdShift(0)
  f = PrefixFlip([1, 0, 1, 1], 2, then)
  obs = {"cost_estimate": np.array([5]), "threshold": np.array([10])}   # then: inline
  assert [int(f.act(obs)) for _ in range(5)] == [1, 0, 0, 1, 1]


def test_logit_shift_moves_decisions_the_expected_way():
  """A large positive shift inlines wherever the compiler allows it; a large negative one
  nowhere; shift 0 decides as the policy does."""
  p = policy_io.load_policy(POLICY)
  spec, weights = p.spec, p.arch.w
  rng = np.random.default_rng(0)
  obs = [{f["name"]: rng.integers(0, 200, size=f["shape"]).astype(f["dtype"])
          for f in spec["features"]} for _ in range(50)]
  base = [int(p.act(o)) for o in obs]
  assert [int(LogitShift(spec, weights, 0.0).act(o)) for o in obs] == base
  assert all(int(LogitShift(spec, weights, 1e6).act(o)) == 1 for o in obs)
  assert all(int(LogitShift(spec, weights, -1e6).act(o)) == 0 for o in obs)


def test_logit_shift_keeps_the_policys_deferrals(tmp_path):
  """For a policy that defers to the compiler, the knob moves only the network's own
  decisions: shift 0 is the deferring policy, and even a huge shift leaves the deferred
  decisions to the compiler."""
  p = derived.with_deferral(POLICY, tmp_path / "deferring", margin=0.3,
                              nonzero=["last_call_to_static_bonus"], saved_model=False)
  spec, weights = p.spec, p.arch.w
  rng = np.random.default_rng(1)
  obs = [dict({f["name"]: rng.integers(0, 200, size=f["shape"]).astype(f["dtype"])
               for f in spec["features"]},
              last_call_to_static_bonus=np.array([15000 * (i % 3 == 0)], np.int64),
              inlining_default=np.array([i % 2], np.int64)) for i in range(60)]
  want = [int(p.act(o)) for o in obs]
  assert 20 <= p.deferred < 60
  shifted = LogitShift(spec, weights, 0.0)
  assert [int(shifted.act(o)) for o in obs] == want
  static = [o for o in obs if o["last_call_to_static_bonus"][0]]
  for s in (1e6, -1e6):
    k = LogitShift(spec, weights, s)
    assert [int(k.act(o)) for o in static] == [int(o["inlining_default"][0]) for o in static]


def test_what_it_cannot_use_is_refused(corpus, tmp_path):
  with pytest.raises(ValueError, match="per-module"):
    headroom.run("regalloc_eviction", corpus, tmp_path)
  with pytest.raises(ValueError, match="no variants"):
    headroom.run("inlining", corpus, tmp_path, thresholds=(), shifts=(0.0,))
  with pytest.raises(ValueError, match="not 'inlining'"):
    headroom.run("inlining", corpus, tmp_path, policy=EVICTION, thresholds=())
  assert not list(tmp_path.iterdir())   # nothing written for refused runs


def _tool():
  built = cli.built_file("tools/headroom_report")
  if built is None:
    pytest.skip("tools/headroom_report is not built (run under bazel test)")
  return str(built)


def test_the_tool_writes_its_files_and_refuses_bad_lists(corpus, tmp_path):
  out = tmp_path / "out"
  p = subprocess.run([_tool(), f"--corpus={corpus}", "--thresholds=-10,10",
                      f"--output={out}"], capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr
  assert "threshold-10" in p.stdout and "threshold+10" in p.stdout
  assert "headroom: modules=8 " in p.stdout     # a user corpus: all of it, not a split
  assert {f.name for f in out.iterdir()} >= {"headroom.csv", "summary.json", "headroom.png"}
  bad = subprocess.run([_tool(), f"--corpus={corpus}", "--thresholds=ten",
                        f"--output={tmp_path / 'bad'}"], capture_output=True, text=True,
                       timeout=600)
  assert bad.returncode != 0 and "not a list of numbers: 'ten'" in bad.stderr
  assert not (tmp_path / "bad").exists()
