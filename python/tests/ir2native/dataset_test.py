"""mlgo.ir2native.dataset.collect / load on a tiny real corpus compiled by clang-22:
rows, resumption after a finished or a killed run, failures, final-IR costs, policies."""
import dataclasses
import json
import shutil
import subprocess

import numpy as np
import pytest

from mlgo.ir2native import dataset
from mlgo.util import toolchain

import i2ntestlib as lib

PASSES = ("default", "flip0.3")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  # calls (train), catch_rethrow (heldout: always gets final-IR costs), nocalls (no
  # decision: no rows).
  return lib.make_corpus(tmp_path_factory.mktemp("corpus"),
                         ("calls.c", "catch_rethrow.cpp", "nocalls.c"),
                         heldout=("catch_rethrow",))


@pytest.fixture(scope="module")
def collected(corpus, tmp_path_factory):
  out = tmp_path_factory.mktemp("rows")
  # A tiny positive fraction: held-out modules get final-IR costs, "calls" (train) not.
  assert not dataset.wants_final_ir(next(m for m in corpus.modules if m.name == "calls"),
                                    1e-6)
  stats = dataset.collect(corpus.modules, out, passes=PASSES, final_ir=1e-6, jobs=2)
  return out, stats


def _records(out):
  return [json.loads(l) for l in (out / "rows.jsonl").read_text().splitlines()]


def test_rows(corpus, collected):
  out, stats = collected
  assert stats["failed"] == 0 and stats["skipped_done"] == 0
  assert stats["compiles"] == 6 == len(corpus.modules) * len(PASSES)
  recs = _records(out)
  assert sorted((r["module"], r["pass"]) for r in recs) == sorted(
      (m.name, p) for m in corpus.modules for p in PASSES)
  assert stats["rows"] == sum(len(r["rows"]) for r in recs) > 0
  assert (out / "failed.jsonl").read_text() == ""
  by = {(r["module"], r["pass"]): r for r in recs}
  assert by[("calls", "default")]["decisions"] == 14
  assert by[("nocalls", "default")]["decisions"] == 0 and by[("nocalls", "default")]["rows"] == []
  assert by[("catch_rethrow", "default")]["split"] == "heldout"
  assert by[("catch_rethrow", "default")]["package"] == "catch_rethrow"
  for r in recs:
    fns = [row["function"] for row in r["rows"]]
    assert len(fns) == len(set(fns))
    # Rows cover only functions of the object, each at most its share of .text.
    assert sum(row["native_size"] for row in r["rows"]) <= r["text_size"]
  # calls' default compile: the 6 functions left in the object that a decision saw.
  calls = {row["function"]: row for row in by[("calls", "default")]["rows"]}
  assert set(calls) == {"vec_push", "energy", "window_max", "run", "checksum",
                        "sum_range"}
  assert calls["run"]["source"] == "caller" and calls["sum_range"]["source"] == "callee"
  # Flipping default decisions changes the inlining: different decisions or sizes.
  flip = by[("calls", "flip0.3")]
  assert (flip["decisions"], flip["text_size"]) != (14, by[("calls", "default")]["text_size"])


def test_native_sizes_are_the_objects(corpus, collected, tmp_path):
  # The default pass's sizes are the sizes in the object of a plain compile of the module.
  out, _ = collected
  m = next(m for m in corpus.modules if m.name == "calls")
  obj = tmp_path / "calls.o"
  subprocess.run(m.compile_argv(toolchain.toolchain(lib.LLVM).clang, str(obj)), check=True,
                 capture_output=True, timeout=120)
  real = toolchain.function_sizes(str(obj))
  rec = next(r for r in _records(out) if (r["module"], r["pass"]) == ("calls", "default"))
  assert rec["text_size"] == sum(real.values())
  for row in rec["rows"]:
    assert row["native_size"] == real[row["function"]]


def test_load(collected):
  out, stats = collected
  d = dataset.load(out)
  n = stats["rows"]
  assert d["state"].shape == (n, lib.STATE_WIDTH)
  assert d["native_size"].shape == (n,) and (d["native_size"] > 0).all()
  assert np.isfinite(d["state"]).all() and (d["state"] >= 0).all()
  assert set(d["pass"]) == set(PASSES)
  assert set(d["module"]) == {"calls", "catch_rethrow"}
  # Filters.
  tr = dataset.load(out, splits=("train",))
  assert set(tr["module"]) == {"calls"} and len(tr["native_size"]) < n
  dflt = dataset.load([out], passes=("default",))
  assert set(dflt["pass"]) == {"default"}
  both = dataset.load([out, out])
  assert len(both["native_size"]) == 2 * n
  empty = dataset.load(out, splits=("nope",))
  assert empty["state"].shape[0] == 0 and empty["native_size"].shape == (0,)


def test_final_ir_costs_only_where_wanted(collected):
  out, _ = collected
  d = dataset.load(out)
  have = np.isfinite(d["final_instructions"])
  np.testing.assert_array_equal(have, np.isfinite(d["final_tti_code_size"]))
  # Held-out module, default pass: costed (the functions the final IR still has).
  ho = (d["module"] == "catch_rethrow") & (d["pass"] == "default")
  assert ho.any() and have[ho].mean() > 0.5
  assert (d["final_instructions"][ho & have] > 0).all()
  assert (d["final_tti_code_size"][ho & have] > 0).all()
  # Bigger functions cost more: the final IR's size ranks like the native size.
  x, y = d["final_tti_code_size"][ho & have], d["native_size"][ho & have]
  assert np.corrcoef(np.log(x), np.log(y))[0, 1] > 0.5
  # Never for the flip pass nor the (almost never sampled) training module.
  assert not have[d["pass"] == "flip0.3"].any()
  assert not have[d["module"] == "calls"].any()


def test_collect_again_compiles_nothing(corpus, collected):
  out, _ = collected
  before = (out / "rows.jsonl").read_bytes()
  stats = dataset.collect(corpus.modules, out, passes=PASSES, final_ir=1e-6, jobs=2)
  assert stats == {"compiles": 6, "failed": 0, "rows": 0, "skipped_done": 6}
  assert (out / "rows.jsonl").read_bytes() == before


def test_cut_last_line_is_collected_again(corpus, collected, tmp_path):
  src, _ = collected
  out = tmp_path / "rows"
  shutil.copytree(src, out)
  lines = (out / "rows.jsonl").read_bytes().splitlines(keepends=True)
  last = json.loads(lines[-1])
  (out / "rows.jsonl").write_bytes(b"".join(lines[:-1]) + lines[-1][:len(lines[-1]) // 2])
  # The cut record is not there.
  assert [(r["module"], r["pass"]) for r in dataset.iter_records(out)] == [
      (json.loads(l)["module"], json.loads(l)["pass"]) for l in lines[:-1]]
  stats = dataset.collect(corpus.modules, out, passes=PASSES, final_ir=1e-6, jobs=1)
  assert stats["skipped_done"] == 5 and stats["compiles"] == 6 and stats["failed"] == 0
  assert stats["rows"] == len(last["rows"])
  recs = list(dataset.iter_records(out))
  assert len(recs) == 6
  again = recs[-1]
  assert (again["module"], again["pass"]) == (last["module"], last["pass"])
  assert again["rows"] == last["rows"]   # the same seeded compile
  assert len(dataset.load(out)["native_size"]) == len(dataset.load(src)["native_size"])


def test_corrupt_line_in_the_middle_is_an_error(collected, tmp_path):
  src, _ = collected
  out = tmp_path / "rows"
  shutil.copytree(src, out)
  lines = (out / "rows.jsonl").read_text().splitlines(keepends=True)
  lines[1] = "{not json\n"
  (out / "rows.jsonl").write_text("".join(lines))
  with pytest.raises(ValueError, match=r"rows.jsonl:2"):
    dataset.load(out)


def test_garbage_bitcode_fails_alone(tmp_path):
  c = lib.make_corpus(tmp_path / "corpus", ("calls.c", "nocalls.c"))
  bad = next(m for m in c.modules if m.name == "nocalls")
  with open(bad.bc_path, "wb") as f:
    f.write(b"BC\xc0\xde" + b"\x00garbage" * 20)
  out = tmp_path / "rows"
  stats = dataset.collect(c.modules, out, passes=("default",), final_ir=0.0, jobs=2)
  assert stats["failed"] == 1 and stats["compiles"] == 1 and stats["rows"] == 6
  failed = [json.loads(l) for l in (out / "failed.jsonl").read_text().splitlines()]
  assert len(failed) == 1
  assert failed[0]["module"] == "nocalls" and failed[0]["pass"] == "default"
  assert "nocalls" in failed[0]["error"] and "compile failed" in failed[0]["error"]
  recs = _records(out)
  assert [(r["module"], r["pass"]) for r in recs] == [("calls", "default")]
  assert len(recs[0]["rows"]) == 6
  # Failures are not "done": the next run tries the module again (and counts it again).
  again = dataset.collect(c.modules, out, passes=("default",), final_ir=0.0, jobs=1)
  assert again["failed"] == 1 and again["skipped_done"] == 1
  assert len((out / "failed.jsonl").read_text().splitlines()) == 2


def test_policies():
  obs = {"inlining_default": np.array([1], np.int64)}
  assert dataset.policy_for("default", 0).act(obs) == 1
  never = dataset.FlipPolicy(0.0, seed=1)
  always = dataset.FlipPolicy(1.0, seed=1)
  for d in (0, 1):
    o = {"inlining_default": np.array([d], np.int64)}
    assert never.act(o) == d and always.act(o) == 1 - d
  # Seeded: the same seed flips the same decisions; about p of them.
  p1, p2 = dataset.policy_for("flip0.3", 7), dataset.policy_for("flip0.3", 7)
  s1 = [int(p1.act(obs)) for _ in range(2000)]
  s2 = [int(p2.act(obs)) for _ in range(2000)]
  assert s1 == s2
  assert 0.25 < 1 - np.mean(s1) < 0.35
  assert dataset.policy_for("flip.5", 0).p == 0.5
  for bad in ("flip", "flip1", "flip0.3x", "random"):
    with pytest.raises(ValueError, match="unknown pass"):
      dataset.policy_for(bad, 0)


def test_wants_final_ir(corpus):
  train = next(m for m in corpus.modules if m.split == "train")
  held = next(m for m in corpus.modules if m.split == "heldout")
  assert not dataset.wants_final_ir(held, 0.0) and not dataset.wants_final_ir(train, 0.0)
  assert dataset.wants_final_ir(held, 1e-9) and dataset.wants_final_ir(train, 1.0)
  # A fraction of training modules, the same ones every time.
  names = [dataclasses.replace(train, name=f"pkg/m{i}.bc") for i in range(2000)]
  picked = [dataset.wants_final_ir(m, 0.25) for m in names]
  assert 0.2 < np.mean(picked) < 0.3
  assert picked == [dataset.wants_final_ir(m, 0.25) for m in names]
