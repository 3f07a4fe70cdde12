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
  trace.generate_default_trace(tiny_corpus, "inlining", tmp_path / "trace", jobs=2)
  bc.train_bc(tmp_path / "trace", tmp_path / "teacher", epochs=10, heldout_fraction=0.0)
  teacher = policy_io.load_policy(tmp_path / "teacher")
  # The teacher's own compiles: every recorded action is its greedy decision there.
  stats = trace.generate_default_trace(tiny_corpus, "inlining", tmp_path / "ttrace", jobs=2,
                                       policy_dir=tmp_path / "teacher")
  assert stats["modules"] == 3 and stats["failed"] == 0
  tds = dataset.Dataset(tmp_path / "ttrace")
  n = 0
  for sh in tds.shards():
    feats = {f: sh["f/" + f] for f in teacher.input_names}
    assert np.array_equal(np.asarray(sh["action"]).reshape(-1), teacher.decide_batch(feats))
    n += len(sh["action"])
  assert n == tds.num_decisions > 10
  # A smaller student reading one float a feature learns the teacher's decisions.
  m = bc.train_bc(tmp_path / "ttrace", tmp_path / "student", hidden=[8], epochs=60,
                  heldout_fraction=0.0, teacher=tmp_path / "teacher", encoding="slog",
                  label_smoothing=0.0)
  student = policy_io.load_policy(tmp_path / "student")
  assert student.spec["encoding"] == "slog" and student.arch.w["hidden_0/kernel"].shape == (
      len(student.input_names), 8)
  assert m["train_accuracy"] >= 0.9
  with pytest.raises(ValueError, match="a policy for inlining, not for regalloc_eviction"):
    trace.generate_default_trace(tiny_corpus, "regalloc_eviction", tmp_path / "x",
                                 policy_dir=tmp_path / "teacher")


def test_default_policy_evaluates_to_zero_change(tiny_corpus, tmp_path, capsys):
  s = evaluation.evaluate("inlining", tiny_corpus, "default", tmp_path / "eval", split="all")
  last = capsys.readouterr().out.strip().splitlines()[-1]
  assert last.endswith("change=+0.00% regressions=0")
  assert s["modules"] == 4
  assert set(s["per_language"]) == {"c", "c++"}
