"""The probe chain (mlgo.training.probe_chain): its selection rule and ledger on hand-made
inputs, and a real chain on a tiny corpus with clang-22 (a clone of the default trace,
two multi-flip probe rounds): each policy's free training-split figure is the one
evaluate gives, a rerun with more rounds adds only the new stages, a cut stage is
counted and run again, a budget stops the rounds."""
import csv
import io
import json
import pathlib
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from mlgo.evaluation.evaluate import evaluate
from mlgo.policy import policy_io
from mlgo.training import probe_chain, probe_tuning, rollouts, testing
from mlgo.util import cli

PROGRAMS = sorted((pathlib.Path(__file__).parent / "programs").glob("*.c*"))


def _fig(change, regressed, modules=100):
  return {"change_pct": change, "regressed": regressed, "regressed_pct": 100.0 * regressed / modules}


def test_select_keeps_lowest_total_within_regression_limit():
  pols = {"start": _fig(-0.5, 1), "round-01": _fig(-2.0, 5), "round-02": _fig(-1.5, 3),
          "round-03": _fig(-1.5, 2)}
  # round-01 is lowest but has 5% regressed; of the rest -1.5% ties, fewer regressed wins.
  assert probe_chain.select(pols, 3.0) == "round-03"
  assert probe_chain.select(pols, 5.0) == "round-01"
  # Nothing qualifies: the fewest regressed.
  assert probe_chain.select({"a": _fig(-3.0, 9), "b": _fig(-1.0, 4)}, 3.0) == "b"
  with pytest.raises(ValueError, match="no measured policy"):
    probe_chain.select({}, 3.0)


def test_split_figure_counts_common_modules_and_regressions():
  f = probe_chain.split_figure({"a": 102.0, "b": 50.0, "x": 7.0},
                               {"a": 100.0, "b": 60.0, "c": 10.0})
  assert f["modules"] == 2 and f["default"] == 160.0 and f["policy"] == 152.0
  assert f["change_pct"] == pytest.approx(-5.0)
  assert f["regressed"] == 1  # a: 2% bigger; 1% exactly would not count
  assert probe_chain.split_figure({"a": 101.0}, {"a": 100.0})["regressed"] == 0
  with pytest.raises(ValueError, match="no module"):
    probe_chain.split_figure({"x": 1.0}, {"y": 1.0})


def test_split_figure_of_the_held_modules():
  sizes, defaults = {"a": 102.0, "b": 50.0, "c": 9.0}, {"a": 100.0, "b": 60.0, "c": 10.0}
  f = probe_chain.split_figure(sizes, defaults, held={"a", "c", "z"})
  # Only a and c: (102 + 9) / (100 + 10) - 1; a is more than 1% bigger.
  assert f["held"] == {"modules": 2, "change_pct": pytest.approx(100 * (111 / 110 - 1)),
                       "regressed": 1, "largest": "a",
                       "largest_share_pct": pytest.approx(100 * 100 / 110),
                       "without_largest_pct": pytest.approx(100 * (9 / 10 - 1))}
  # One held module: nothing is left without it.
  one = probe_chain.split_figure(sizes, defaults, held={"b"})["held"]
  assert one["largest"] == "b" and one["largest_share_pct"] == pytest.approx(100.0)
  assert one["without_largest_pct"] is None
  assert "without the largest" not in probe_chain._held_text({"held": one})  # pylint: disable=protected-access
  assert "-10.00% without the largest (91% of their bytes)" in \
      probe_chain._held_text(f)  # pylint: disable=protected-access
  assert f["change_pct"] == pytest.approx(100 * (161 / 170 - 1))  # the whole is unchanged
  assert probe_chain.split_figure(sizes, defaults, held={"z"})["held"] is None
  assert "held" not in probe_chain.split_figure(sizes, defaults)


def test_held_modules_are_those_fine_tuning_never_trains_on():
  names = [f"pkg/m{i}.c" for i in range(400)]
  held = probe_chain.held_modules(names)
  assert held == {n for n in names if probe_tuning.heldout_module(n)}
  assert 20 <= len(held) <= 60  # about a tenth
  # train_on_probes and the best-anchor loader hold out the same modules by default.
  mask = probe_tuning._held_modules(  # pylint: disable=protected-access
      names, probe_tuning.HELDOUT_FRACTION)
  assert {n for n, h in zip(names, mask) if h} == held


def test_ledger_counts_a_cut_stage_and_refuses_another_chain(tmp_path):
  cfg = probe_chain.ChainConfig(corpus="c", output=str(tmp_path))
  led = probe_chain.Ledger(tmp_path / "chain.json", cfg)
  led.data["running"] = {"stage": "probe-1", "wall_s": 900.0, "cpu_hours": 0.5}
  led.save()
  led = probe_chain.Ledger(tmp_path / "chain.json", cfg)
  assert led.data["cut"] == [{"stage": "probe-1", "wall_s": 900.0, "cpu_hours": 0.5}]
  assert led.data["running"] is None and not led.done("probe-1")
  assert led.cpu_hours() == pytest.approx(0.5)
  # A stage cut by an exception (SIGTERM unwinds as SystemExit in the tool) is in the
  # ledger up to the moment it stopped, before any heartbeat; a rerun counts it and runs
  # the stage again.
  def cut_after(seconds):
    time.sleep(seconds)
    raise SystemExit(143)
  with pytest.raises(SystemExit):
    led.run("probe-2", lambda: cut_after(0.3), 2, io.StringIO())
  assert not led.done("probe-2") and led.data["running"]["stage"] == "probe-2"
  assert 0.3 <= led.data["running"]["wall_s"] < probe_chain.HEARTBEAT_S
  led = probe_chain.Ledger(tmp_path / "chain.json", cfg)
  assert [c["stage"] for c in led.data["cut"]] == ["probe-1", "probe-2"]
  cut = led.data["cut"][1]
  assert cut["cpu_hours"] == pytest.approx(cut["wall_s"] * 2 / 3600, abs=1e-4)
  assert led.cpu_hours() == pytest.approx(0.5 + cut["cpu_hours"])
  with pytest.raises(ValueError, match="chain.json: a chain with max_probes=16"):
    probe_chain.Ledger(tmp_path / "chain.json",
                       probe_chain.ChainConfig(corpus="c", output=str(tmp_path), max_probes=8))
  with pytest.raises(ValueError, match="regression_penalty=0.0 is here, not 1.0"):
    probe_chain.Ledger(tmp_path / "chain.json", probe_chain.ChainConfig(
        corpus="c", output=str(tmp_path), regression_penalty=1.0))
  # A ledger written before a setting existed reads it as its default.
  d = json.loads((tmp_path / "chain.json").read_text())
  del d["config"]["regression_penalty"]
  (tmp_path / "chain.json").write_text(json.dumps(d))
  probe_chain.Ledger(tmp_path / "chain.json", cfg)
  with pytest.raises(ValueError, match="flip_compiles=0 is here, not 4"):
    probe_chain.Ledger(tmp_path / "chain.json", probe_chain.ChainConfig(
        corpus="c", output=str(tmp_path), flip_compiles=4))
  with pytest.raises(ValueError, match="average_weight=0.5 is here, not 0.75"):
    probe_chain.Ledger(tmp_path / "chain.json", probe_chain.ChainConfig(
        corpus="c", output=str(tmp_path), average_weight=0.75))
  with pytest.raises(ValueError, match="next_policy"):
    probe_chain.ChainConfig(corpus="c", output="o", next_policy="best").check()
  for w in (0.0, 1.5, "1,0"):
    with pytest.raises(ValueError, match="average_weight"):
      probe_chain.ChainConfig(corpus="c", output="o", average_weight=w).check()
  with pytest.raises(ValueError, match="comma-separated numbers, not '1;0.5'"):
    probe_chain.ChainConfig(corpus="c", output="o", average_weight="1;0.5")
  # A ledger from before schedules holds one float: the same weight as a one-entry list.
  d = json.loads((tmp_path / "chain.json").read_text())
  d["config"]["average_weight"] = 0.5
  (tmp_path / "chain.json").write_text(json.dumps(d))
  probe_chain.Ledger(tmp_path / "chain.json", cfg)
  with pytest.raises(ValueError, match="average_weight=0.5 is here, not 1,0.5"):
    probe_chain.Ledger(tmp_path / "chain.json", probe_chain.ChainConfig(
        corpus="c", output=str(tmp_path), average_weight="1,0.5"))
  with pytest.raises(ValueError, match="keep_stalled_probes=False is here, not True"):
    probe_chain.Ledger(tmp_path / "chain.json", probe_chain.ChainConfig(
        corpus="c", output=str(tmp_path), keep_stalled_probes=True))
  with pytest.raises(ValueError, match="callee_groups=0 is here, not 1"):
    probe_chain.Ledger(tmp_path / "chain.json", probe_chain.ChainConfig(
        corpus="c", output=str(tmp_path), callee_groups=1))


def test_stalled_rounds_keep_their_probes_when_kept_counts_policies(tmp_path):
  """Rounds 3 and 4 kept their probed policy (the guard), so rounds 3-5 probed one set of
  weights: counted by policy, round 5 reads them all and the policy before (round 2's
  probes); counted by round, the latest two only."""
  choices = {1: 16, 2: 17, 3: "probed", 4: "probed", 5: 15}
  for k, chosen in choices.items():
    (tmp_path / f"round-{k:02d}").mkdir()
    (tmp_path / f"round-{k:02d}" / "tune_choice.json").write_text(
        json.dumps({"chosen": chosen}))
  assert probe_chain.tuning_rounds(tmp_path, 5, 2) == [4, 5]
  assert probe_chain.tuning_rounds(tmp_path, 5, 2, by_policy=True) == [2, 3, 4, 5]
  assert probe_chain.tuning_rounds(tmp_path, 5, 1, by_policy=True) == [3, 4, 5]
  # Round 6 probes round 5's tuning: the policy before it is the one rounds 3-5 probed.
  assert probe_chain.tuning_rounds(tmp_path, 6, 2, by_policy=True) == [3, 4, 5, 6]
  assert probe_chain.tuning_rounds(tmp_path, 6, 1, by_policy=True) == [6]
  assert probe_chain.tuning_rounds(tmp_path, 3, 2, by_policy=True) == [2, 3]
  assert probe_chain.tuning_rounds(tmp_path, 1, 2, by_policy=True) == [1]
  # A round whose tuning has not chosen yet (no tune_choice.json) counts as a move.
  (tmp_path / "round-04" / "tune_choice.json").unlink()
  assert probe_chain.tuning_rounds(tmp_path, 5, 2, by_policy=True) == [3, 4, 5]


def test_weight_schedule_one_a_round_the_last_repeating():
  cfg = probe_chain.ChainConfig(corpus="c", output="o", average_weight="1,1,0.5")
  assert [cfg.weight_for(r) for r in range(1, 6)] == [1.0, 1.0, 0.5, 0.5, 0.5]
  assert probe_chain.ChainConfig(corpus="c", output="o", average_weight=0.75
                                 ).average_weight == (0.75,)
  with pytest.raises(ValueError, match="flips_per_compile > 1"):
    probe_chain.ChainConfig(corpus="c", output="o", flip_compiles=4,
                            flips_per_compile=1).check()


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
  root = tmp_path_factory.mktemp("chain")
  corpus = testing.make_tiny_corpus(root / "corpus", PROGRAMS, llvm_version=22, opt="Oz",
                                    heldout=("strings",))
  cfg = probe_chain.ChainConfig(corpus=str(corpus), output=str(root / "out"), rounds=2,
                                max_probes=8, trace_sampling=1.0)
  data = probe_chain.run(cfg)
  return corpus, root, cfg, data


def _per_module(path):
  with open(path) as f:
    return {r["module"]: float(r["policy"]) for r in csv.DictReader(f)}


def test_chain_runs_clone_and_rounds(chain):
  corpus, root, cfg, data = chain
  out = root / "out"
  assert list(data["stages"]) == ["default", "trace", "bc", "probe-1", "tune-1", "probe-2",
                                  "tune-2", "evaluate-round-02"]
  assert all(s["cpu_hours"] == pytest.approx(s["wall_s"] * 2 / 3600, abs=1e-4)
             for s in data["stages"].values())
  assert set(data["policies"]) == {"start", "round-01", "round-02"}
  # Only training modules were compiled: 3 of the 4 programs (strings is held out).
  assert all(p["modules"] == 3 for p in data["policies"].values())
  assert data["selected"] == probe_chain.select(data["policies"], cfg.max_regressed_pct)
  # Each policy is made after the one before it.
  made = data["made_at"]
  assert made["start"] <= made["round-01"] <= made["round-02"] <= data["cpu_hours"]
  sel = data["selected"]
  kept = policy_io.load_policy(out / "policy")
  src = out / "start" if sel == "start" else out / sel / "tuned"
  want = np.load(src / "weights.npz")
  got = np.load(out / "policy" / "weights.npz")
  assert sorted(want.files) == sorted(got.files)
  assert all(np.array_equal(want[k], got[k]) for k in want.files)
  assert kept.problem == "inlining_ir2vec"
  assert (out / "chain.png").stat().st_size > 1000
  # Each figure carries the one of the modules fine-tuning held out, from the same sizes.
  defaults = probe_chain.module_scores(out / "default-train" / "per_key.csv")
  held = probe_chain.held_modules(defaults)
  for k, fig in data["policies"].items():
    policy_dir = out / "start" if k == "start" else out / k / "tuned"
    sizes = probe_chain.measured_sizes(out, k, policy_dir)
    assert sizes is not None and sum(sizes.values()) == fig["policy"]
    assert "held" in fig
    assert fig["held"] == probe_chain.split_figure(sizes, defaults, held)["held"]


def test_a_copy_of_a_probed_policy_has_that_probe_rounds_sizes(chain, tmp_path):
  """A last round whose guard kept its probed policy is a copy in another dir: the same
  weights find the probe round that compiled them (round 1 probed the start), other
  weights or an incomplete round find nothing."""
  _, root, _, _ = chain
  out = root / "out"
  copy = tmp_path / "copy"
  shutil.copytree(out / "start", copy)
  want = probe_chain.probe_sizes(out / "round-01" / "probes")
  # One walk of the rounds' indexes: round 1 probed the start, round 2 round 1's tuning.
  rounds = probe_chain.probe_rounds(out)
  assert [(d.parent.name, pathlib.Path(p).resolve()) for d, p in rounds] == [
      ("round-01", (out / "start").resolve()),
      ("round-02", (out / "round-01" / "tuned").resolve())]
  assert probe_chain.probed_policies(out, rounds) == probe_chain.probed_policies(out)
  assert probe_chain.probed_policies(out)[(out / "start").resolve()] == out / "round-01" / "probes"
  assert (out / "start").resolve() not in probe_chain.probed_policies(out, rounds[1:])
  assert probe_chain.reprobed_sizes(out, copy) == want
  assert probe_chain.reprobed_sizes(out, copy, rounds=rounds) == want
  assert probe_chain.reprobed_sizes(out, copy, rounds=rounds[1:]) is None
  assert probe_chain.measured_sizes(out, "copy", copy) == want
  assert probe_chain.measured_sizes(out, "copy", copy, rounds) == want
  assert probe_chain.reprobed_sizes(out, copy, complete={2}) is None  # round 2: round 1's
  # Without a ledger a round is complete once its tuning dir exists; with one, by number.
  assert probe_chain.round_complete(out / "round-01")
  assert probe_chain.round_complete(out / "round-01", complete={1})
  assert not probe_chain.round_complete(out / "round-01", complete={2})
  assert not probe_chain.round_complete(tmp_path / "round-03")
  w = dict(np.load(copy / "weights.npz"))
  k = sorted(w)[0]
  w[k] = w[k] + 1.0
  np.savez(copy / "weights.npz", **w)
  assert probe_chain.reprobed_sizes(out, copy) is None


def test_report_reads_a_chain_without_writing_it(chain, tmp_path, monkeypatch):
  corpus, root, cfg, data = chain
  out = root / "out"
  before = (out / "chain.json").read_bytes()
  got = probe_chain.chain_report(out)
  assert (out / "chain.json").read_bytes() == before
  assert got["policies"] == data["policies"] and got["selected"] == data["selected"]
  lines = probe_chain.policy_lines(got)
  assert [ln.split(":")[0] for ln in lines] == ["start", "round-01", "round-02"]
  f = data["policies"]["round-01"]
  assert f"training split {f['change_pct']:+.2f}% ({f['regressed']} >1% bigger)" in lines[1]
  # A ledger from before the held figure: filled in, from the same sizes, on the copy only.
  old = json.loads(before)
  for fig in old["policies"].values():
    del fig["held"]
  (tmp_path / "c").mkdir()
  for name in ("default-train", "start", "round-01", "round-02", "evaluate-round-02"):
    (tmp_path / "c" / name).symlink_to(out / name)
  (tmp_path / "c" / "chain.json").write_text(json.dumps(old))
  monkeypatch.setattr(probe_chain, "held_modules", set)  # the tiny corpus holds none out
  filled = probe_chain.chain_report(tmp_path / "c")
  defaults = probe_chain.module_scores(out / "default-train" / "per_key.csv")
  assert "held" not in json.loads((tmp_path / "c" / "chain.json").read_text())["policies"]["start"]
  for k, fig in filled["policies"].items():
    h = fig["held"]
    assert (h["modules"], h["change_pct"], h["regressed"]) == \
        (3, fig["change_pct"], fig["regressed"]), k
    assert h["largest"] == max(defaults, key=defaults.get), k
    assert h["without_largest_pct"] is not None, k
  # A held figure from before its largest-module part: that part is filled in as well.
  part = json.loads(json.dumps(filled))
  for fig in part["policies"].values():
    for key in ("largest", "largest_share_pct", "without_largest_pct"):
      del fig["held"][key]
  (tmp_path / "c" / "chain.json").write_text(json.dumps(part))
  refilled = probe_chain.chain_report(tmp_path / "c")
  for k, fig in refilled["policies"].items():
    assert fig["held"]["without_largest_pct"] == pytest.approx(
        filled["policies"][k]["held"]["without_largest_pct"]), k
  probe_chain.compare_plot({"a": got, "b": filled}, tmp_path / "cmp.png", -5.0, 1.0)
  assert (tmp_path / "cmp.png").stat().st_size > 1000
  with pytest.raises(FileNotFoundError, match="no chain.json"):
    probe_chain.chain_report(tmp_path)


def test_the_report_tool_prints_each_chain_and_refuses_a_dir_without_one(chain, tmp_path):
  corpus, root, cfg, data = chain
  built = cli.built_file("tools/chain_report")
  if built is None:
    pytest.skip("tools/chain_report is not built (run under bazel test)")
  p = subprocess.run([str(built), str(root / "out"), f"--plot={tmp_path / 'c.png'}",
                      "--target=-5", "--largest=2"], capture_output=True, text=True,
                     timeout=300)
  assert p.returncode == 0, p.stderr
  assert f"ended at {data['cpu_hours']:.2f} CPU-h, kept {data['selected']}" in p.stdout
  assert p.stdout.count("training split") == 3
  # --largest: a header naming every measured policy, then one row a module.
  rows = probe_chain.largest_modules(root / "out", data, 2)
  head = next(ln for ln in p.stdout.splitlines() if "held from fine-tuning" in ln)
  assert head.split()[-3:] == ["start", "r01", "r02"]
  for m, dft, _, changes in rows:
    row = next(ln for ln in p.stdout.splitlines() if ln.rstrip().endswith(
        " ".join(f"{changes[k]:+7.1f}" for k in ("start", "round-01", "round-02")).strip()))
    assert m[-20:] in row and f"{dft:.0f}" in row
  assert (tmp_path / "c.png").stat().st_size > 1000
  bad = subprocess.run([str(built), str(tmp_path)], capture_output=True, text=True,
                       timeout=300)
  assert bad.returncode == 2 and "no chain.json" in bad.stderr


def test_largest_modules_follow_each_policy_on_the_biggest_modules(chain):
  corpus, root, cfg, data = chain
  out = root / "out"
  defaults = probe_chain.module_scores(out / "default-train" / "per_key.csv")
  rows = probe_chain.largest_modules(out, data, 2)
  # The two largest by the default's size, largest first, each with every policy's change
  # computed from the sizes that policy's figure came from.
  assert [r[0] for r in rows] == sorted(defaults, key=lambda m: -defaults[m])[:2]
  assert rows[0][1] >= rows[1][1] > 0
  dirs = probe_chain.policy_dirs(out, data)
  for m, dft, held, changes in rows:
    assert dft == defaults[m] and held == probe_tuning.heldout_module(m)
    assert list(changes) == ["start", "round-01", "round-02"]
    for k, pct in changes.items():
      size = probe_chain.measured_sizes(out, k, dirs[k])[m]
      assert pct == pytest.approx(100.0 * (size / dft - 1.0))
  assert len(probe_chain.largest_modules(out, data, 99)) == len(defaults)
  with pytest.raises(ValueError, match="must be >= 1"):
    probe_chain.largest_modules(out, data, 0)


def test_free_figure_is_what_evaluate_gives(chain, tmp_path):
  corpus, root, cfg, data = chain
  out = root / "out"
  # The start's figure came from probe round 1's greedy compiles; evaluate compiles again.
  s = evaluate("inlining_ir2vec", corpus, out / "start", tmp_path / "ev", split="train",
               jobs=2)
  assert s["policy_score"] == data["policies"]["start"]["policy"]
  assert s["default"] == data["policies"]["start"]["default"]
  assert _per_module(tmp_path / "ev" / "per_key.csv") == \
      probe_chain.probe_sizes(out / "round-01" / "probes")


def test_rerun_adds_rounds_reruns_cut_stage_and_stops_at_budget(chain, monkeypatch):
  corpus, root, cfg, data = chain
  out = root / "out"
  led_path = out / "chain.json"
  probe1 = (out / "round-01" / "probes" / "index.json").stat().st_mtime_ns
  # Cut in tune-2: the ledger says it was running; round 2's policy was never made.
  d = json.loads(led_path.read_text())
  for k in ("tune-2", "evaluate-round-02"):
    del d["stages"][k]
  del d["policies"]["round-02"], d["made_at"]["round-02"]
  d["running"] = {"stage": "tune-2", "wall_s": 60.0, "cpu_hours": 60.0 * 2 / 3600}
  del d["policies"]["start"]["held"]  # as a chain measured before it was recorded
  # The tiny corpus has no module probe_tuning holds out; count every module as held, so
  # the figure filled in must be the whole split's.
  monkeypatch.setattr(probe_chain, "held_modules", set)
  led_path.write_text(json.dumps(d))
  cfg3 = probe_chain.ChainConfig(**{**cfg.__dict__, "rounds": 3})
  d3 = probe_chain.run(cfg3)
  assert (out / "round-01" / "probes" / "index.json").stat().st_mtime_ns == probe1
  assert [c["stage"] for c in d3["cut"]] == ["tune-2"]
  assert {"tune-2", "probe-3", "tune-3", "evaluate-round-03"} <= set(d3["stages"])
  assert "evaluate-round-02" not in d3["stages"]
  # round-02's figure now comes from probe round 3's greedy compiles.
  sizes = probe_chain.probe_sizes(out / "round-03" / "probes")
  assert d3["policies"]["round-02"]["policy"] == sum(sizes.values())
  assert set(d3["policies"]) == {"start", "round-01", "round-02", "round-03"}
  st = d3["policies"]["start"]  # filled in from round 1's probes
  assert (st["held"]["modules"], st["held"]["change_pct"], st["held"]["regressed"]) == \
      (3, st["change_pct"], st["regressed"])
  assert d3["policies"]["round-01"]["held"] is None  # recorded before: left as it was
  # A budget already spent: round 4 does not start; the chain still selects.
  cfg4 = probe_chain.ChainConfig(**{**cfg.__dict__, "rounds": 4, "cpu_hours": 1e-6})
  d4 = probe_chain.run(cfg4)
  assert "probe-4" not in d4["stages"]
  assert d4["selected"] in d4["policies"]


def test_scheduled_average_uses_each_rounds_weight(chain):
  corpus, root, _, _ = chain
  out = root / "sched"
  cfg = probe_chain.ChainConfig(corpus=str(corpus), output=str(out), start=str(root / "out" / "start"),
                                rounds=2, max_probes=8, next_policy="average",
                                average_weight="1,0.25")
  data = probe_chain.run(cfg)
  assert {"average-1", "average-2"} <= set(data["stages"])
  w = {n: np.load(p / "weights.npz") for n, p in [
      ("start", out / "start"), ("tuned1", out / "round-01" / "tuned"),
      ("avg1", out / "round-01" / "average"), ("tuned2", out / "round-02" / "tuned"),
      ("avg2", out / "round-02" / "average")]}
  for k in w["start"].files:
    # Round 1 at weight 1 is the tuned policy; round 2 moves a quarter of the way.
    np.testing.assert_allclose(w["avg1"][k], w["tuned1"][k], rtol=1e-6)
    np.testing.assert_allclose(w["avg2"][k], 0.75 * w["avg1"][k] + 0.25 * w["tuned2"][k],
                               rtol=1e-5, atol=1e-6)
  assert not all(np.array_equal(w["tuned2"][k], w["avg2"][k]) for k in w["start"].files)


def test_a_round_fits_the_budget_only_with_its_policys_evaluation():
  # Stop 42's packed rounds: 0.44 CPU-h a round, then 0.11 to evaluate the last policy.
  assert probe_chain.round_fits(1.0, 0.44, 2.70)
  assert not probe_chain.round_fits(2.20, 0.44, 2.70)  # 2.64 fits, 2.64 + 0.11 does not
  assert probe_chain.round_fits(2.20, 0.44, 2.75)
  # With a tail average its evaluation, too, must fit: 2.20 + 0.44 + 2 x 0.11 = 2.86.
  assert not probe_chain.round_fits(2.20, 0.44, 2.75, evaluations=2)
  assert probe_chain.round_fits(2.20, 0.44, 2.87, evaluations=2)


def test_tail_members_are_the_last_rounds():
  dirs = {"start": 0, "round-01": 1, "round-02": 2, "round-03": 3}
  assert probe_chain.tail_members(dirs, 2) == ["round-02", "round-03"]
  assert probe_chain.tail_members(dirs, 6) == ["round-01", "round-02", "round-03"]
  assert probe_chain.tail_members(dirs, 0) == []
  assert probe_chain.tail_members({"start": 0, "round-01": 1}, 2) == []  # one round: none
  for bad, msg in (({"tail_average": 1}, "tail_average: 0"),
                   ({"weighting": "bytes"}, "weighting must be one of"),
                   ({"weighting": "module*2,bytes"}, "not 'bytes'"),
                   ({"weighting": "module*0"}, "NAME or NAME[*]ROUNDS"),
                   ({"weighting": "module*x"}, "NAME or NAME[*]ROUNDS")):
    with pytest.raises(ValueError, match=msg):
      probe_chain.ChainConfig(corpus="c", output="o", **bad).check()


def test_the_tuning_that_agrees_best_goes_on_and_the_guard_keeps_the_probed_policy():
  tries = {1: (0.887, 0.851), 2: (0.887, 0.891), 3: (0.887, 0.899)}  # C21's round 4
  assert probe_chain.choose_tuning(tries, guard=False) == {
      "chosen": 3, "before": 0.887, "after": {"1": 0.851, "2": 0.891, "3": 0.899}}
  assert probe_chain.choose_tuning(tries, guard=True)["chosen"] == 3
  fell = {1: (0.888, 0.872), 2: (0.888, 0.879), 3: (0.888, 0.878)}  # C21's round 8
  assert probe_chain.choose_tuning(fell, guard=False)["chosen"] == 2
  assert probe_chain.choose_tuning(fell, guard=True)["chosen"] == "probed"
  # Equal agreement is not a rise; a tie between seeds goes to the lower seed.
  assert probe_chain.choose_tuning({4: (0.9, 0.9)}, guard=True)["chosen"] == "probed"
  assert probe_chain.choose_tuning({5: (0.8, 0.9), 4: (0.8, 0.9)}, guard=True)["chosen"] == 4
  with pytest.raises(ValueError, match="tune_seeds: the fine-tunings a round"):
    probe_chain.ChainConfig(corpus="c", output="o", tune_seeds=0).check()


def test_the_tuning_smallest_on_the_held_modules_goes_on():
  """by="held_bytes": the lowest held change wins (C22's rounds 5 and 6, compiled offline
  in stop 89); the guard keeps the probed policy unless a tuning is strictly smaller; a
  tuning with a failed compile (None) is never chosen over one without."""
  r5 = {2: (-5.81, -5.31), 3: (-5.81, -5.21), 4: (-5.81, -5.25)}
  assert probe_chain.choose_tuning(r5, guard=True, by="held_bytes") == {
      "chosen": "probed", "before": -5.81, "after": {"2": -5.31, "3": -5.21, "4": -5.25},
      "by": "held_bytes"}
  assert probe_chain.choose_tuning(r5, guard=False, by="held_bytes")["chosen"] == 2
  r6 = {2: (-5.25, -5.56), 3: (-5.25, -2.98), 4: (-5.25, -5.01)}
  assert probe_chain.choose_tuning(r6, guard=True, by="held_bytes")["chosen"] == 2
  assert probe_chain.choose_tuning({1: (-1.0, -1.0)}, True, "held_bytes")["chosen"] == "probed"
  failed = {1: (-0.5, None), 2: (-0.5, -1.0)}
  assert probe_chain.choose_tuning(failed, guard=True, by="held_bytes")["chosen"] == 2
  assert probe_chain.choose_tuning({1: (-0.5, None)}, True, "held_bytes")["chosen"] == "probed"
  assert probe_chain.choose_tuning({1: (-0.5, None)}, False, "held_bytes")["chosen"] == 1
  text = probe_chain.choice_text({**probe_chain.choose_tuning(r6, True, "held_bytes"),
                                  "held_modules": 137})
  assert text == ("the tuning of seed 2, the smallest of 3 on the 137 held modules compiled "
                  "(-5.25% -> -5.56%)")
  with pytest.raises(ValueError, match="by must be one of agreement, held_bytes"):
    probe_chain.choose_tuning(r6, True, "bytes")
  with pytest.raises(ValueError, match="tune_select must be one of agreement, held_bytes"):
    probe_chain.ChainConfig(corpus="c", output="o", tune_select="bytes").check()
  with pytest.raises(ValueError, match="it needs tune_seeds > 1 or tune_guard"):
    probe_chain.ChainConfig(corpus="c", output="o", tune_select="held_bytes").check()


def test_a_guard_margin_lets_a_tuning_near_the_chains_best_go_on():
  """tune_guard_margin: C29's round 10 (probed -5.54%, seeds -5.51/-5.37/-5.50) stalled;
  with a 0.1-point margin its best tuning goes on, a margin of 0.02 still refuses it, and a
  chain whose best was -5.70% (an earlier policy) refuses it too: the bar is the chain's
  best plus the margin, so accepted steps cannot drift round after round. A tuning better
  than the probed policy goes on whatever the margin; a failed compile never does."""
  r10 = {18: (-5.54, -5.51), 19: (-5.54, -5.37), 20: (-5.54, -5.50)}
  assert probe_chain.choose_tuning(r10, True, "held_capped")["chosen"] == "probed"
  got = probe_chain.choose_tuning(r10, True, "held_capped", margin=0.1, best=-5.54)
  assert got == {"chosen": 18, "before": -5.54,
                 "after": {"18": -5.51, "19": -5.37, "20": -5.50},
                 "by": "held_capped", "margin": 0.1, "best": -5.54}
  assert probe_chain.choose_tuning(r10, True, "held_capped", 0.02, -5.54)["chosen"] == "probed"
  far = probe_chain.choose_tuning(r10, True, "held_capped", margin=0.1, best=-5.70)
  assert far["chosen"] == "probed" and far["best"] == -5.70
  # No best given (the first round): the probed policy's figure is the chain's best.
  assert probe_chain.choose_tuning(r10, True, "held_capped", margin=0.1)["best"] == -5.54
  assert probe_chain.choose_tuning({1: (-5.0, -5.2)}, True, "held_bytes", 0.1,
                                   -6.0)["chosen"] == 1
  assert probe_chain.choose_tuning({1: (-5.0, None)}, True, "held_bytes", 9.0,
                                   -6.0)["chosen"] == "probed"
  assert probe_chain.choice_text({**got, "held_modules": 137}) == (
      "the tuning of seed 18, the smallest of 3 on the 137 held modules compiled, none "
      "weighing more than 5% (-5.54% -> -5.51%, within 0.10 points of the chain's best "
      "-5.54%)")
  assert probe_chain.choice_text({**far, "held_modules": 137}) == (
      "the probed policy again (no tuning compiled the 137 held modules smaller than its "
      "-5.54% nor within 0.10 points of the chain's best -5.70%, none weighing more than 5%)")
  with pytest.raises(ValueError, match="a guard margin is in points"):
    probe_chain.choose_tuning({1: (0.8, 0.7)}, True, "agreement", margin=0.1)
  for bad in ({"tune_guard_margin": -0.1, "tune_guard": True, "tune_select": "held_capped"},
              {"tune_guard_margin": 0.1, "tune_select": "held_capped", "tune_seeds": 3},
              {"tune_guard_margin": 0.1, "tune_guard": True}):
    with pytest.raises(ValueError, match="tune_guard_margin is points"):
      probe_chain.ChainConfig(corpus="c", output="o", **bad).check()


def test_the_capped_held_figure_lets_no_module_decide():
  """held_change with a cap: one module of 47% of the held bytes (C25's fmtlib module)
  weighs 5% of them, so a tuning that makes it 10% bigger and the 53 others 10% smaller
  is smaller on the capped figure and bigger on the plain one; with no module above the
  cap both figures are the same; modules outside `held` are not counted."""
  defaults = {"big": 470.0, **{f"m{i}": 10.0 for i in range(53)}, "train": 99.0}
  held = set(defaults) - {"train"}
  probed = {**defaults, "big": 446.5, "train": 1.0}  # the big one 5% smaller
  tuned = {"big": 517.0, **{f"m{i}": 9.0 for i in range(53)}, "train": 500.0}
  assert probe_chain.held_change(probed, defaults, held) == pytest.approx(-2.35)
  assert probe_chain.held_change(tuned, defaults, held) == pytest.approx(-0.6)
  cap = probe_chain.HELD_CAP
  assert cap == 0.05
  # Weights: big 50 (5% of 1000), each other module 10: (50 x -5%) / 580, (50 x 10% +
  # 530 x -10%) / 580.
  assert probe_chain.held_change(probed, defaults, held, cap) == pytest.approx(-250 / 580)
  assert probe_chain.held_change(tuned, defaults, held, cap) == pytest.approx(-4800 / 580)
  tries = {7: (probe_chain.held_change(probed, defaults, held),
               probe_chain.held_change(tuned, defaults, held))}
  assert probe_chain.choose_tuning(tries, True, "held_bytes")["chosen"] == "probed"
  capped = {7: (probe_chain.held_change(probed, defaults, held, cap),
                probe_chain.held_change(tuned, defaults, held, cap))}
  choice = probe_chain.choose_tuning(capped, True, "held_capped")
  assert choice["chosen"] == 7 and choice["by"] == "held_capped"
  assert probe_chain.choice_text({**choice, "held_modules": 54}) == (
      "the tuning of seed 7, the smallest of 1 on the 54 held modules compiled, none "
      "weighing more than 5% (-0.43% -> -8.28%)")
  even = {f"e{i}": 100.0 + i for i in range(25)}  # the largest is 124 of 2800 (4.4%)
  half = {m: v * (0.5 if i % 2 else 1.1) for i, (m, v) in enumerate(even.items())}
  assert probe_chain.held_change(half, even, set(even), cap) == pytest.approx(
      probe_chain.held_change(half, even, set(even)))
  # A module with no default bytes weighs nothing (and divides nothing).
  assert probe_chain.held_change({**half, "empty": 5.0}, {**even, "empty": 0.0},
                                 {*even, "empty"}, cap) == pytest.approx(
      probe_chain.held_change(half, even, set(even), cap))
  with pytest.raises(ValueError, match="no module has both"):
    probe_chain.held_change({"x": 1.0}, even, {"x"}, cap)


def test_weighting_schedule_is_one_a_round_the_last_repeating():
  cfg = probe_chain.ChainConfig(corpus="c", output="o", weighting="module_or_bytes*2,module")
  cfg.check()
  assert [cfg.weighting_for(r) for r in range(1, 5)] == [
      "module_or_bytes", "module_or_bytes", "module", "module"]
  # The ledger holds the spelled-out form: the two spellings are one chain.
  assert cfg.weighting == "module_or_bytes,module_or_bytes,module"
  assert probe_chain.ChainConfig(corpus="c", output="o", weighting="module").weighting_for(
      7) == "module"


def test_tail_average_is_made_measured_and_a_candidate(chain, tmp_path):
  """A chain with --tail_average=2 and a weighting schedule (module_or_bytes, then
  module): the average of its two rounds is made, evaluated on the training split (its
  CPU-h in the ledger) and selected like any round; each round tuned with its own
  weighting; the report finds its dir."""
  corpus, root, _, _ = chain
  out = tmp_path / "tail"
  cfg = probe_chain.ChainConfig(corpus=str(corpus), output=str(out),
                                start=str(root / "out" / "start"), rounds=2, max_probes=8,
                                weighting="module_or_bytes,module", tail_average=2)
  data = probe_chain.run(cfg)
  assert {"make-tail-01-02", "evaluate-tail-01-02"} <= set(data["stages"])
  assert set(data["policies"]) == {"start", "round-01", "round-02", "tail-01-02"}
  w = {n: np.load(out / n / "weights.npz") for n in ("round-01/tuned", "round-02/tuned",
                                                     "tail-01-02")}
  for k in w["tail-01-02"].files:
    np.testing.assert_allclose(w["tail-01-02"][k],
                               (w["round-01/tuned"][k] + w["round-02/tuned"][k]) / 2,
                               rtol=1e-5, atol=1e-6)
  for r, want in (("round-01", "module_or_bytes"), ("round-02", "module")):
    tuned = json.loads((out / r / "tuned" / "probe_metrics.json").read_text())
    assert tuned["weighting"] == want
  fig = data["policies"]["tail-01-02"]
  assert fig["policy"] == sum(probe_chain.module_scores(
      out / "evaluate-tail-01-02" / "per_key.csv", "policy").values())
  assert data["made_at"]["round-02"] <= fig["cpu_hours"] <= data["cpu_hours"]
  assert data["selected"] == probe_chain.select(data["policies"], cfg.max_regressed_pct)
  assert probe_chain.policy_dirs(out, data)["tail-01-02"] == out / "tail-01-02"
  assert probe_chain.chain_report(out)["policies"] == data["policies"]
  # The weighting is part of a chain: another one is refused in the same dir.
  with pytest.raises(ValueError, match="weighting='module_or_bytes,module' is here"):
    probe_chain.run(probe_chain.ChainConfig(**{**cfg.__dict__, "weighting": "module"}))


def test_bad_start_names_the_dir(tmp_path):
  (tmp_path / "nopolicy").mkdir()
  cfg = probe_chain.ChainConfig(corpus=str(tmp_path), output=str(tmp_path / "out"),
                                start=str(tmp_path / "nopolicy"))
  with pytest.raises(Exception, match="nopolicy"):
    probe_chain.run(cfg)
  assert not (tmp_path / "out").exists()
  cfg.start, cfg.problem = str(testing.shipped_policy("inlining_oz_ir2vec")), "inlining"
  with pytest.raises(ValueError, match="inlining_oz_ir2vec: a policy for 'inlining_ir2vec'; "
                     "this chain trains 'inlining', whose features do not extend"):
    probe_chain.run(cfg)
  assert not (tmp_path / "out").exists()


def test_a_narrower_start_is_widened_and_decides_as_before(tmp_path):
  """inlining_oz (38 features) starts an inlining_ctx chain (43): the chain clones the
  default for the new features' normalization, widens the start with zero weights on
  them, and the widened start compiles every training module to the same size."""
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, llvm_version=22,
                                    opt="Oz", heldout=("strings",))
  shipped = testing.shipped_policy("inlining_oz")
  cfg = probe_chain.ChainConfig(corpus=str(corpus), output=str(tmp_path / "out"), rounds=1,
                                max_probes=8, trace_sampling=1.0, start=str(shipped),
                                problem="inlining_ctx")
  data = probe_chain.run(cfg)
  assert list(data["stages"])[:3] == ["default", "trace", "bc"]
  start = policy_io.load_policy(tmp_path / "out" / "start")
  assert start.problem == "inlining_ctx"
  assert start.spec["widened_from"] == str(shipped)
  k0 = np.load(shipped / "weights.npz")["hidden_0/kernel"]
  k1 = np.load(tmp_path / "out" / "start" / "weights.npz")["hidden_0/kernel"]
  np.testing.assert_array_equal(k1[:k0.shape[0]], k0)
  assert k1.shape[0] > k0.shape[0] and not k1[k0.shape[0]:].any()
  # Its free training figure (round 1's greedy compiles) is the narrow policy's own.
  ev = evaluate("inlining", corpus, shipped, tmp_path / "narrow", split="train", jobs=2)
  assert ev["policy_score"] == data["policies"]["start"]["policy"]


def test_ppo_stage_between_start_and_rounds(tmp_path):
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, llvm_version=22,
                                    opt="Oz", heldout=("strings",))
  cfg = probe_chain.ChainConfig(corpus=str(corpus), output=str(tmp_path / "out"), rounds=1,
                                max_probes=8, trace_sampling=1.0, ppo_iterations=1,
                                ppo_gin="configs/inlining_function_size.gin")
  data = probe_chain.run(cfg)
  assert list(data["stages"]) == ["default", "trace", "bc", "ppo", "probe-1", "tune-1",
                                  "evaluate-round-01"]
  # Round 1 probed the PPO stage's policy, so that is the policy measured first.
  assert set(data["policies"]) == {"ppo", "round-01"}
  assert json.loads((tmp_path / "out" / "ppo" / "log.jsonl").read_text().splitlines()[-1])
  index = json.loads((tmp_path / "out" / "round-01" / "probes" / "index.json").read_text())
  assert pathlib.Path(index["policy"]).parent == tmp_path / "out" / "ppo"
  with pytest.raises(ValueError, match="ppo_iterations=1 is here, not 2"):
    probe_chain.run(probe_chain.ChainConfig(**{**cfg.__dict__, "ppo_iterations": 2}))


@pytest.mark.parametrize("seeds,rounds", [(2, 2), (1, 1)])
def test_several_tunings_a_round_and_the_best_agreeing_goes_on(chain, tmp_path, seeds,
                                                                rounds, capsys):
  """--tune_seeds=2 --tune_guard: each round fine-tunes with seeds 0 and 1; the round's
  policy is the tuning whose held-out probe agreement is highest (its weights exactly),
  or the probed policy's if neither raised it; the choice is in the round dir and the
  ledger; another tune_seeds is refused in the same dir. With one seed, the guard alone
  (the tuning kept beside the round's policy). A round after one that kept its probed
  policy reuses that policy's greedy compiles (and only then); the cache is gone after.
  With two seeds the probes kept count policies (--keep_stalled_probes, one policy kept):
  a tuning after a stall also reads the stalled round's probes."""
  corpus, root, _, _ = chain
  out = tmp_path / "seeds"
  cfg = probe_chain.ChainConfig(corpus=str(corpus), output=str(out),
                                start=str(root / "out" / "start"), rounds=rounds,
                                max_probes=8, tune_seeds=seeds, tune_guard=True,
                                probe_rounds_kept=1, keep_stalled_probes=seeds > 1)
  data = probe_chain.run(cfg, stream=sys.stderr)  # the captured stderr
  err = capsys.readouterr().err.splitlines()
  reused = [re.search(r" modules=(\d+) .* greedy_reused=(\d+)", x).groups()
            for x in err if x.startswith("rollout probes: modules=")]  # one line a round
  # Each tuning read its round's probes, and with keep_stalled_probes those of the rounds
  # before that probed the same weights.
  read = [int(re.search(r"fine-tuned on (\d+) round", x).group(1)) for x in err
          if x.startswith("chain: fine-tuned on")]
  assert read == [len(probe_chain.tuning_rounds(out, n, 1, seeds > 1))
                  for n in range(1, rounds + 1) for _ in range(seeds)]
  assert len(reused) == rounds and not (out / probe_chain.GREEDY_CACHE).exists()
  probed = out / "start"
  for n in range(1, rounds + 1):
    r = f"round-{n:02d}"
    # Round n probes round n-1's policy: the same weights when n-1 kept its probed one.
    again = n > 1 and data["tune_choice"][f"round-{n - 1:02d}"]["chosen"] == "probed"
    assert int(reused[n - 1][1]) == (int(reused[n - 1][0]) if again else 0), (r, reused)
    tries = {}
    for seed in range(seeds):
      m = json.loads((out / r / f"tuned-seed{seed}" / "probe_metrics.json").read_text())
      tries[seed] = (m["before"]["heldout_probe"][0], m["after"]["heldout_probe"][0])
    want = probe_chain.choose_tuning(tries, guard=True)
    assert json.loads((out / r / "tune_choice.json").read_text()) == want
    assert data["tune_choice"][r] == want
    src = probed if want["chosen"] == "probed" else out / r / f"tuned-seed{want['chosen']}"
    a, b = np.load(src / "weights.npz"), np.load(out / r / "tuned" / "weights.npz")
    assert sorted(a.files) == sorted(b.files)
    assert all(np.array_equal(a[k], b[k]) for k in a.files)
    probed = out / r / "tuned"  # the next round probes this round's policy
    if n == rounds:  # a last round that kept its probed policy has that probe's figure
      prev = "start" if n == 1 else f"round-{n - 1:02d}"
      assert (f"evaluate-{r}" in data["stages"]) == (want["chosen"] != "probed")
      if want["chosen"] == "probed":
        assert data["policies"][r]["policy"] == data["policies"][prev]["policy"]
    line = [x for x in probe_chain.policy_lines(data) if x.startswith(f"{r}:")][0]
    assert (("the probed policy again" in line) if want["chosen"] == "probed" else
            f"the tuning of seed {want['chosen']}, the best of {seeds} (held-out probe "
            f"agreement {want['before']:.3f} -> {want['after'][str(want['chosen'])]:.3f})"
            in line)
  if seeds == 2:  # the two seeds are two tunings (else the choice means nothing)
    a, b = (np.load(out / "round-01" / f"tuned-seed{s}" / "weights.npz") for s in (0, 1))
    assert any(not np.array_equal(a[k], b[k]) for k in a.files)
  with pytest.raises(ValueError, match=f"tune_seeds={seeds} is here"):
    probe_chain.run(probe_chain.ChainConfig(**{**cfg.__dict__, "tune_seeds": 3}))


@pytest.mark.parametrize("select,margin", [("held_bytes", 0.0), ("held_capped", 0.0),
                                           ("held_capped", 1000.0)])
def test_held_bytes_choice_compiles_the_held_modules(chain, tmp_path, select, margin):
  """--tune_select=held_bytes (or held_capped: with one held module, the same figure) on a
  real chain: each tuning is compiled on the modules fine-tuning holds out (here matrix/v2
  of a three-variant corpus), its figure is the one a plain evaluate of that tuning gives,
  the probed policy's comes from its probe round, and the round's policy is the smallest
  (exactly its weights). A corpus with no held module is refused before anything is
  probed. With a guard margin (one so wide every best tuning is near enough), two rounds:
  the second round's bar is the smaller of the two probed policies' held figures, read
  from the ledger."""
  _, root, _, _ = chain
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, llvm_version=22,
                                    opt="Oz", heldout=("strings",), variants=3)
  out = tmp_path / "held"
  cfg = probe_chain.ChainConfig(corpus=str(corpus), output=str(out),
                                start=str(root / "out" / "start"), rounds=2 if margin else 1,
                                max_probes=8, tune_seeds=2, tune_guard=True,
                                tune_select=select, tune_guard_margin=margin)
  data = probe_chain.run(cfg)
  defaults = probe_chain.module_scores(out / "default-train" / "per_key.csv")
  held = probe_chain.held_modules(defaults)
  assert held == {"matrix/v2"}
  choice = json.loads((out / "round-01" / "tune_choice.json").read_text())
  assert choice == data["tune_choice"]["round-01"]
  assert choice["by"] == select and choice["held_modules"] == 1
  probed = probe_chain.probe_sizes(out / "round-01" / "probes")
  assert choice["before"] == pytest.approx(
      100.0 * (probed["matrix/v2"] / defaults["matrix/v2"] - 1.0))
  tries = {}
  for seed in (0, 1):
    tuned = out / "round-01" / f"tuned-seed{seed}"
    evaluate("inlining_ir2vec", corpus, tuned, tmp_path / f"eval{seed}", split="train")
    size = _per_module(tmp_path / f"eval{seed}" / "per_key.csv")["matrix/v2"]
    tries[seed] = (choice["before"], 100.0 * (size / defaults["matrix/v2"] - 1.0))
    assert choice["after"][str(seed)] == pytest.approx(tries[seed][1])
  assert choice == {**probe_chain.choose_tuning(tries, True, select, margin=margin),
                    "held_modules": 1}
  if margin:
    second = data["tune_choice"]["round-02"]
    assert choice["chosen"] != "probed" and second["chosen"] != "probed"
    assert second["best"] == min(choice["before"], second["before"])
    assert second["before"] == pytest.approx(choice["after"][str(choice["chosen"])])
    with pytest.raises(ValueError, match="tune_guard_margin=1000.0 is here, not 0.0"):
      probe_chain.run(probe_chain.ChainConfig(**{**cfg.__dict__, "tune_guard_margin": 0.0}))
  src = (out / "start" if choice["chosen"] == "probed"
         else out / "round-01" / f"tuned-seed{choice['chosen']}")
  a, b = np.load(src / "weights.npz"), np.load(out / "round-01" / "tuned" / "weights.npz")
  assert all(np.array_equal(a[k], b[k]) for k in a.files)
  # The report says which tuning went on, and that the held modules chose it.
  line = [x for x in probe_chain.policy_lines(data) if x.startswith("round-01:")][0]
  assert line.endswith("; " + probe_chain.choice_text(choice))
  assert "the 1 modules fine-tuning never saw (they chose its tunings): " in line
  with pytest.raises(ValueError, match=f"tune_select='{select}' is here"):
    probe_chain.run(probe_chain.ChainConfig(**{**cfg.__dict__, "tune_select": "agreement",
                                               "tune_guard_margin": 0.0}))
  with pytest.raises(ValueError, match=f"tune_select={select} .* none of its 3 is held out"):
    probe_chain.run(probe_chain.ChainConfig(**{**cfg.__dict__, "corpus": str(chain[0]),
                                               "output": str(tmp_path / "none")}))


def test_a_deferral_from_the_start_is_kept_and_never_probed(tmp_path, capsys):
  """--defer: the clone is copied with the deferral, round 1 probes only the decisions
  clang does not make (a sole call of a static function is clang's here), the tuned policy
  keeps the deferral, and the chain refuses to resume with another one."""
  corpus = testing.make_tiny_corpus(tmp_path / "corpus", PROGRAMS, llvm_version=22,
                                    opt="Oz", heldout=("strings",))
  defer = "nonzero=last_call_to_static_bonus"
  cfg = probe_chain.ChainConfig(corpus=str(corpus), output=str(tmp_path / "out"), rounds=1,
                                max_probes=8, trace_sampling=1.0, defer=defer)
  data = probe_chain.run(cfg)
  out = tmp_path / "out"
  assert list(data["stages"])[:5] == ["default", "trace", "bc", "defer", "probe-1"]
  want = {"margin": 0.0, "feature": "inlining_default", "nonzero": ["last_call_to_static_bonus"]}
  assert "defer" not in policy_io.load_policy(out / "start-base").spec
  assert policy_io.load_policy(out / "start").spec["defer"] == want
  assert policy_io.load_policy(out / "round-01" / "tuned").spec["defer"] == want
  store = rollouts.ProbeStore(out / "round-01" / "probes")
  col = store.index["features"].index("last_call_to_static_bonus")
  shards = list(store.shards())
  anchors = np.concatenate([s["anchor_features"][:, col] for s in shards])
  probes = np.concatenate([s["probe_features"][:, col] for s in shards])
  assert (anchors != 0).sum() > 0 and len(probes) > 0   # there was something to leave out
  assert not probes.any()
  with pytest.raises(ValueError, match="defer='nonzero=last_call_to_static_bonus' is here"):
    probe_chain.run(probe_chain.ChainConfig(**{**cfg.__dict__, "defer": ""}))
  assert testing.tool_module("chain_report").main([str(out)]) == 0
  assert f"deferral from the start: {defer}" in capsys.readouterr().out
  # A deferral that cannot be read is refused before anything is made, naming the item.
  tool = testing.tool_module("probe_chain")
  assert tool.main([f"--corpus={corpus}", f"--output={tmp_path / 'bad'}",
                    "--defer=margin=0.4,sometimes=1"]) == 1
  assert "'sometimes=1' is not margin=X" in capsys.readouterr().err
  assert tool.main([f"--corpus={corpus}", f"--output={tmp_path / 'bad'}",
                    "--trace_sampling=0"]) == 1
  assert "trace_sampling: the share of training modules" in capsys.readouterr().err
  assert not (tmp_path / "bad").exists()
