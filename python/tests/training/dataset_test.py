"""Sharded dataset: round trip, append after reopen, shard streaming."""
import types

import numpy as np
import pytest

from mlgo.training import dataset

FEATS = [{"name": "a", "dtype": "int64", "shape": [1]}, {"name": "b", "dtype": "int64", "shape": [1]}]


def _traj(n, seed):
  rng = np.random.default_rng(seed)
  f = {"a": rng.integers(0, 100, (n, 1)), "b": rng.integers(0, 100, (n, 1))}
  act = rng.integers(0, 2, n)
  return types.SimpleNamespace(context=f"ctx{seed}", features=f, actions=act,
                               default_actions=1 - act)


def test_round_trip_and_append(tmp_path):
  w = dataset.DatasetWriter(tmp_path, "inlining", FEATS, shard_decisions=50)
  trajs = [_traj(20 + i, i) for i in range(8)]
  for i, t in enumerate(trajs[:5]):
    w.add(f"m{i}", [t], {"ok": True, "scores": {f"m{i}": 100 + i}})
  w.close()
  # Reopen and append (as a resumed trace does).
  w = dataset.DatasetWriter(tmp_path, "inlining", FEATS, shard_decisions=50)
  assert set(w.modules) == {f"m{i}" for i in range(5)}
  for i, t in enumerate(trajs[5:], start=5):
    w.add(f"m{i}", [t], {"ok": True})
  w.add("broken", [], {"ok": False, "reason": "timeout"})
  w.close()
  ds = dataset.Dataset(tmp_path)
  assert ds.num_decisions == sum(len(t.actions) for t in trajs)
  assert len(ds.index["shards"]) >= 3
  assert ds.modules["broken"]["ok"] is False
  got = {}
  for shard in ds.shards():
    for ti, m in enumerate(shard["traj_module"]):
      sel = shard["traj"] == ti
      got[m] = (shard["f/a"][sel], shard["action"][sel], shard["default_action"][sel])
  for i, t in enumerate(trajs):
    a, act, dfl = got[f"m{i}"]
    assert np.array_equal(a, t.features["a"])
    assert np.array_equal(act, t.actions)
    assert np.array_equal(dfl, t.default_actions)


def test_problem_mismatch_and_missing(tmp_path):
  dataset.DatasetWriter(tmp_path, "inlining", FEATS).close()
  with pytest.raises(ValueError, match="inlining"):
    dataset.DatasetWriter(tmp_path, "regalloc_eviction", FEATS)
  with pytest.raises(FileNotFoundError, match="index.json"):
    dataset.Dataset(tmp_path / "nope")


def test_several_datasets_read_as_one(tmp_path):
  for d, seeds in (("t", (0, 1)), ("s", (2,))):
    w = dataset.DatasetWriter(tmp_path / d, "inlining", FEATS, shard_decisions=10)
    for i in seeds:
      w.add(f"m{i % 2}", [_traj(15, i)], {"ok": True, "from": d})
    w.close()
  both = dataset.open_traces([tmp_path / "t", tmp_path / "s"])
  assert both.num_decisions == 45 and both.problem == "inlining"
  assert sum(len(sh["action"]) for sh in both.shards()) == 45
  assert both.modules["m0"]["from"] == "s"     # a repeated module: the last one's entry
  assert isinstance(dataset.open_traces(tmp_path / "t"), dataset.Dataset)
  dataset.DatasetWriter(tmp_path / "r", "regalloc_eviction", FEATS).close()
  with pytest.raises(ValueError, match="a dataset for 'regalloc_eviction'"):
    dataset.open_traces([tmp_path / "t", tmp_path / "r"])
  dataset.DatasetWriter(tmp_path / "f", "inlining", FEATS[:1]).close()
  with pytest.raises(ValueError, match="features differ"):
    dataset.open_traces([tmp_path / "t", tmp_path / "f"])
