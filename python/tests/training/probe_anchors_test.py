"""'Best' anchors in fine-tuning (probe_tuning.best_rounds / load_best_anchors /
train_on_probes(best_anchor_dirs=...)): each module's anchor states come from the round
whose policy compiled it smallest, labelled with that round's recorded actions, and the
tuned policy follows those labels, not its own decisions."""
import numpy as np
import pytest

from mlgo.policy import policy_io
from mlgo.training import probe_chain, probe_tuning, testing
from mlgo.training.probe_store import ProbeStore


def _record(module, base, anchor_x, anchor_y, probe_x=None):
  px = np.zeros((1, anchor_x.shape[1])) if probe_x is None else probe_x
  return {"module": module, "base_size": float(base), "decisions": 10, "failures": [],
          "positions": np.zeros(1, np.int64), "margins": np.zeros(1),
          "probe_actions": np.ones(1, np.int64), "probe_alternatives": np.zeros(1, np.int64),
          "probe_sizes": np.array([base - 1.0]), "mismatch": np.zeros(1, bool),
          "probe_features": px, "anchor_features": anchor_x,
          "anchor_actions": np.asarray(anchor_y, np.int64)}


def _store(path, features, records):
  s = ProbeStore(path, features, "pol")
  for r in records:
    s.add(r)
  s.flush()
  return path


def test_best_round_is_the_smallest_compile_and_a_tie_goes_later(tmp_path):
  f = ["a", "b"]
  x = lambda v: np.full((2, 2), float(v))  # noqa: E731  (anchor states tagged by round)
  r1 = _store(tmp_path / "r1", f, [_record("m", 100, x(1), [1, 1]),
                                   _record("n", 50, x(1), [1, 1]),
                                   _record("only1", 7, x(1), [1, 0])])
  r2 = _store(tmp_path / "r2", f, [_record("m", 90, x(2), [0, 0]),
                                   _record("n", 60, x(2), [0, 0])])
  r3 = _store(tmp_path / "r3", f, [_record("m", 90, x(3), [1, 0]),
                                   _record("n", 55, x(3), [0, 1])])
  dirs = [r1, r2, r3]
  assert probe_tuning.best_rounds(dirs) == {"m": r3, "n": r1, "only1": r1}
  xs, ys, held, counts = probe_tuning.load_best_anchors(dirs, f, heldout_fraction=0.0)
  # m's anchors from round 3 (tie with round 2, the later wins), n's and only1's from 1.
  rows = sorted(zip(xs[:, 0].tolist(), ys.tolist()))
  assert rows == [(1.0, 0), (1.0, 1), (1.0, 1), (1.0, 1), (3.0, 0), (3.0, 1)]
  assert not held.any()
  assert counts == {str(r1): 2, str(r2): 0, str(r3): 1}
  with pytest.raises(ValueError, match="features differ"):
    probe_tuning.load_best_anchors(dirs, ["a", "c"])


def test_tuned_policy_follows_the_best_rounds_recorded_actions(tmp_path):
  pdir = testing.shipped_policy("inlining_oz")
  pol = policy_io.load_policy(pdir)
  names = pol.input_names
  rng = np.random.default_rng(0)
  ax = rng.uniform(0, 20, size=(120, len(names))).round()
  own = pol.decide_batch({n: ax[:, i:i + 1] for i, n in enumerate(names)}).astype(np.int64)
  # Round 1 made module m smallest and there decided the opposite of this policy; round
  # 2 (the current one) repeats the policy's own decisions on the same states.
  r1 = _store(tmp_path / "r1", names, [_record("m", 100, ax, 1 - own)])
  r2 = _store(tmp_path / "r2", names, [_record("m", 120, ax, own)])
  kw = dict(epochs=40, learning_rate=3e-3, probe_weight=0.0, heldout_fraction=0.0)
  m = probe_tuning.train_on_probes(pdir, [r2], tmp_path / "best",
                                   best_anchor_dirs=[r1, r2], **kw)
  assert m["anchor_source"] == "best" and m["best_anchor_modules"] == {str(r1): 1,
                                                                        str(r2): 0}
  tuned = policy_io.load_policy(tmp_path / "best")
  got = tuned.decide_batch({n: ax[:, i:i + 1] for i, n in enumerate(names)})
  assert (got == 1 - own).mean() >= 0.9     # back to round 1's decisions
  # With the usual anchors the same data keeps the policy where it was.
  m = probe_tuning.train_on_probes(pdir, [r2], tmp_path / "current", **kw)
  assert m["anchor_source"] == "current"
  kept = policy_io.load_policy(tmp_path / "current")
  assert (kept.decide_batch({n: ax[:, i:i + 1] for i, n in enumerate(names)})
          == own).mean() >= 0.9
  with pytest.raises(ValueError, match="anchor_targets='greedy'"):
    probe_tuning.train_on_probes(pdir, [r2], tmp_path / "x", best_anchor_dirs=[r1, r2],
                                 anchor_targets="distribution")


def test_chain_anchor_setting_is_checked_and_kept_in_the_ledger(tmp_path):
  with pytest.raises(ValueError, match="anchors must be"):
    probe_chain.ChainConfig(corpus="c", output="o", anchors="worst").check()
  cfg = probe_chain.ChainConfig(corpus="c", output=str(tmp_path), anchors="best")
  probe_chain.Ledger(tmp_path / "chain.json", cfg)
  with pytest.raises(ValueError, match="anchors='best' is here"):
    probe_chain.Ledger(tmp_path / "chain.json",
                       probe_chain.ChainConfig(corpus="c", output=str(tmp_path)))
