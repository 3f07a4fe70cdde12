"""End to end on a tiny real corpus: default trace, BC, two PPO iterations, evaluate."""
import csv
import json
import math
import pathlib
import re

import numpy as np
import pytest

from mlgo import corpus as corpus_lib
from mlgo.training import bc, dataset, ppo, testing, trace
from mlgo.policy import policy_io
from mlgo import evaluation

PROGRAMS = sorted((pathlib.Path(__file__).parent / "programs").glob("*.c*"))


@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory):
  return testing.make_tiny_corpus(tmp_path_factory.mktemp("corpus"), PROGRAMS,
                                  heldout=("matrix",))


def test_trace_bc_ppo_evaluate(tiny_corpus, tmp_path, capsys):
  c = corpus_lib.load_corpus(tiny_corpus)
  assert len(c.split("train")) == 3 and len(c.split("heldout")) == 1
  # Default trace of the training split.
  stats = trace.generate_default_trace(tiny_corpus, "inlining", tmp_path / "trace", jobs=2)
  assert stats["modules"] == 3 and stats["failed"] == 0
  ds = dataset.Dataset(tmp_path / "trace")
  assert ds.num_decisions > 10
  for name, info in ds.modules.items():
    assert info["ok"] and info["scores"][name] > 0
  shard = next(ds.shards())
  assert "default_action" in shard and set(np.unique(shard["default_action"])) <= {0, 1}
  # Appending again skips what is there.
  again = trace.generate_default_trace(tiny_corpus, "inlining", tmp_path / "trace", jobs=2)
  assert again["modules"] == 0 and dataset.Dataset(tmp_path / "trace").num_decisions == ds.num_decisions

  # Behavioral cloning: everything held in (tiny corpus), accuracy above a floor.
  m = bc.train_bc(tmp_path / "trace", tmp_path / "bc", epochs=30, heldout_fraction=0.0)
  assert m["train_accuracy"] >= 0.7
  pol = policy_io.load_policy(tmp_path / "bc")
  assert "inlining_default" not in pol.input_names
  assert (tmp_path / "bc" / "saved_policy" / "saved_model.pb").exists()

  # Re-warm-starting from another policy: its greedy decisions become the labels. A
  # teacher that never inlines (output bias forced) must be what the student learns.
  w = dict(pol.arch.w)
  w["out/kernel"] = np.zeros_like(w["out/kernel"])
  w["out/bias"] = np.array([50.0, -50.0], w["out/bias"].dtype)
  policy_io.write_policy_dir(tmp_path / "never", pol.spec, w, saved_model=False)
  m2 = bc.train_bc(tmp_path / "trace", tmp_path / "bc_teacher", epochs=30,
                   heldout_fraction=0.0, teacher=tmp_path / "never")
  assert m2["teacher"] == str(tmp_path / "never")
  assert m2["train_accuracy"] >= 0.99
  student = policy_io.load_policy(tmp_path / "bc_teacher")
  feats = {n: shard["f/" + n] for n in student.input_names}
  assert student.decide_batch(feats).mean() <= 0.01
  assert pol.decide_batch(feats).mean() > 0.5   # the default (and its clone) inline here

  # Two PPO iterations warm-started from BC.
  cfg = ppo.PPOConfig(modules_per_iteration=3, jobs=2, num_epochs=2, samples_per_module=2,
                      baseline="group")
  t = ppo.Trainer(tiny_corpus, tmp_path / "ppo", warmstart=tmp_path / "bc",
                  trace=tmp_path / "trace", config=cfg)
  recs = t.run(2)
  assert [r["iteration"] for r in recs] == [1, 2]
  for r in recs:
    assert r["ok"] >= 4 and r["decisions"] > 0
    assert math.isfinite(r["reward_mean"]) and abs(r["reward_mean"]) < 1
    assert math.isfinite(r["size_change_vs_default"])
    assert 0 <= r["entropy"] <= math.log(2) + 1e-6
  out = tmp_path / "ppo"
  assert (out / "policies" / "iter-00002" / "saved_policy" / "saved_model.pb").exists()
  assert list((out / "tensorboard").glob("events.out.tfevents.*"))
  state = json.loads((out / "checkpoint" / "state.json").read_text())
  assert state["iteration"] == 2
  final = policy_io.load_policy(out / "policy")
  obs = {f["name"]: np.array([3], np.int64) for f in final.features}
  assert int(final.act(obs)) in (0, 1)

  # Evaluate on the held-out split.
  capsys.readouterr()
  s = evaluation.evaluate("inlining", tiny_corpus, out / "policy", tmp_path / "eval",
                          split="heldout")
  printed = capsys.readouterr().out.strip().splitlines()
  assert re.fullmatch(r"modules=1 default_text=\d+ policy_text=\d+ change=[+-]\d+\.\d\d% "
                      r"regressions=[01]", printed[-1]), printed[-1]
  assert s["default"] > 0 and s["policy_score"] > 0
  rows = list(csv.DictReader(open(tmp_path / "eval" / "per_key.csv")))
  assert [r["module"] for r in rows] == ["matrix"]
  assert (tmp_path / "eval" / "changes.png").stat().st_size > 1000
  assert "c" in s["per_language"]


def test_policy_trace_and_distillation_into_the_slog_encoding(tiny_corpus, tmp_path):
  from mlgo.training import distill
  trace.generate_default_trace(tiny_corpus, "inlining", tmp_path / "trace", jobs=2)
  bc.train_bc(tmp_path / "trace", tmp_path / "teacher", epochs=10, heldout_fraction=0.0)
  teacher = policy_io.load_policy(tmp_path / "teacher")
  s = distill.distill(tmp_path / "teacher", tiny_corpus, tmp_path / "student",
                      work_dir=tmp_path / "work", hidden=(8,), rounds=2, epochs=60)
  # Round 0 traced the teacher's own compiles: every recorded action is its decision.
  t0 = dataset.Dataset(tmp_path / "work" / "trace-0")
  assert t0.num_decisions == s["rounds"][0]["trace_decisions"] > 10
  for sh in t0.shards():
    feats = {f: sh["f/" + f] for f in teacher.input_names}
    assert np.array_equal(np.asarray(sh["action"]).reshape(-1), teacher.decide_batch(feats))
  # Round 1 traced the first student's compiles, and the last student learned both.
  first = policy_io.load_policy(tmp_path / "work" / "student-0")
  for sh in dataset.Dataset(tmp_path / "work" / "trace-1").shards():
    feats = {f: sh["f/" + f] for f in first.input_names}
    assert np.array_equal(np.asarray(sh["action"]).reshape(-1), first.decide_batch(feats))
  student = policy_io.load_policy(tmp_path / "student")
  assert student.spec["encoding"] == "slog" and student.arch.w["hidden_0/kernel"].shape == (
      len(student.input_names), 8)
  assert [r["round"] for r in s["rounds"]] == [0, 1]
  assert s["rounds"][-1]["train_agreement"] >= 0.9
  assert json.loads((tmp_path / "student" / "distill.json").read_text())["rounds"] == s["rounds"]
  # Rerun: the traces are complete and the first student is kept, so only the last trains.
  mtime = (tmp_path / "work" / "student-0" / "policy.json").stat().st_mtime_ns
  again = distill.distill(tmp_path / "teacher", tiny_corpus, tmp_path / "student",
                          work_dir=tmp_path / "work", hidden=(8,), rounds=2, epochs=60)
  assert (tmp_path / "work" / "student-0" / "policy.json").stat().st_mtime_ns == mtime
  assert [r["trace_decisions"] for r in again["rounds"]] == [
      r["trace_decisions"] for r in s["rounds"]]
  with pytest.raises(ValueError, match="holds compiles with default in the loop"):
    trace.generate_default_trace(tiny_corpus, "inlining", tmp_path / "trace",
                                 policy_dir=tmp_path / "teacher")
  with pytest.raises(ValueError, match="a policy for inlining, not for regalloc_eviction"):
    trace.generate_default_trace(tiny_corpus, "regalloc_eviction", tmp_path / "x",
                                 policy_dir=tmp_path / "teacher")


def test_the_distill_tool_runs_and_names_a_missing_teacher(tiny_corpus, tmp_path):
  import subprocess
  from mlgo.util import cli
  tool = cli.built_file("tools/distill_policy")
  if tool is None:
    pytest.skip("tools/distill_policy is not built (run under bazel test)")
  trace.generate_default_trace(tiny_corpus, "inlining", tmp_path / "trace", jobs=2)
  bc.train_bc(tmp_path / "trace", tmp_path / "teacher", epochs=5, heldout_fraction=0.0)
  p = subprocess.run([str(tool), f"--teacher={tmp_path / 'teacher'}",
                      f"--output={tmp_path / 'small'}", f"--corpus={tiny_corpus}",
                      "--rounds=1", "--hidden=4", "--epochs=5"],
                     capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr
  assert re.search(r"^student=\S+small rounds=1 train_agreement=[01]\.\d+", p.stdout, re.M)
  assert policy_io.load_policy(tmp_path / "small").spec["encoding"] == "slog"
  assert (tmp_path / "small.distill" / "trace-0" / "index.json").exists()
  bad = subprocess.run([str(tool), f"--teacher={tmp_path / 'nope'}",
                        f"--output={tmp_path / 'x'}", f"--corpus={tiny_corpus}"],
                       capture_output=True, text=True, timeout=600)
  assert bad.returncode != 0 and "nope: not a policy dir (no policy.json)" in bad.stderr
  assert not (tmp_path / "x").exists()


def test_default_policy_evaluates_to_zero_change(tiny_corpus, tmp_path, capsys):
  s = evaluation.evaluate("inlining", tiny_corpus, "default", tmp_path / "eval", split="all")
  last = capsys.readouterr().out.strip().splitlines()[-1]
  assert last.endswith("change=+0.00% regressions=0")
  assert s["modules"] == 4
  assert set(s["per_language"]) == {"c", "c++"}


def test_evaluate_only_the_named_modules_of_a_split(tiny_corpus, tmp_path):
  """modules=: only those modules of the split are compiled and reported; a name not in
  the split is refused, naming it, before anything is compiled."""
  s = evaluation.evaluate("inlining", tiny_corpus, "default", tmp_path / "two",
                          split="train", modules=["tree", "strings"])
  assert s["modules"] == 2
  with open(tmp_path / "two" / "per_key.csv") as f:
    assert sorted(r["module"] for r in csv.DictReader(f)) == ["strings", "tree"]
  with pytest.raises(ValueError, match=r"1 module\(s\) asked for are not in split "
                     r"'train', e.g. 'matrix'"):
    evaluation.evaluate("inlining", tiny_corpus, "default", tmp_path / "bad", split="train",
                        modules=["tree", "matrix"])
  assert not (tmp_path / "bad").exists()
