"""Probe weights in fine-tuning (mlgo.training.probe_tuning.load_probe_data): the
regression penalty weighs the probes of modules that are, or would become, more than 1%
bigger than the default's, and changes no label."""
import numpy as np
import pytest

from mlgo.training import probe_tuning
from mlgo.training.probe_store import ProbeStore

FEATURES = ["a", "b"]


def _record(module, base, sizes):
  n = len(sizes)
  return {"module": module, "base_size": float(base), "decisions": 10, "failures": [],
          "positions": np.arange(n, dtype=np.int64), "margins": np.zeros(n),
          "probe_actions": np.ones(n, np.int64), "probe_alternatives": np.zeros(n, np.int64),
          "probe_sizes": np.array(sizes, np.float64), "mismatch": np.zeros(n, bool),
          "probe_features": np.arange(2 * n, dtype=np.float64).reshape(n, 2),
          "anchor_features": np.zeros((1, 2)), "anchor_actions": np.zeros(1, np.int64)}


@pytest.fixture
def store(tmp_path):
  s = ProbeStore(tmp_path / "p", FEATURES, "pol")
  s.add(_record("regressed", 103, [101]))        # 3% bigger than 100; the flip mends 2 bytes
  s.add(_record("fine", 100, [105, 95, 100]))    # a flip into regression, one away, a tie
  s.add(_record("unknown", 200, [198]))          # no default known
  s.flush()
  return tmp_path / "p"


def _load(store, **kw):
  return probe_tuning.load_probe_data([store], FEATURES, weight_unit=0.01, weight_cap=100.0,
                                      heldout_fraction=0.0, **kw)


def test_penalty_scales_weights_of_regressions_only(store):
  plain = _load(store)
  pen = _load(store, regression_penalty=1.0,
              default_sizes={"regressed": 100.0, "fine": 100.0})
  # Ties are dropped: 4 probes, in store order; labels: the better action.
  assert plain["probe_y"].tolist() == pen["probe_y"].tolist() == [0, 1, 0, 0]
  want_plain = [2 / 103 / 0.01, 5 / 100 / 0.01, 5 / 100 / 0.01, 2 / 200 / 0.01]
  np.testing.assert_allclose(plain["probe_w"], want_plain, rtol=1e-6)
  # regressed: cost 103 + 1 x (103 - 101) = 105 -> 101: 4 bytes where plain sees 2.
  # fine 100 -> 105: 105 + 1 x 4 = 109, 9 bytes where plain sees 5; 100 -> 95: unchanged.
  np.testing.assert_allclose(pen["probe_w"], [w * f for w, f in
                                              zip(want_plain, [2.0, 9 / 5, 1.0, 1.0])],
                             rtol=1e-6)


def test_penalty_needs_defaults_and_module_weighting(store):
  with pytest.raises(ValueError, match="needs default_sizes"):
    _load(store, regression_penalty=1.0)
  with pytest.raises(ValueError, match="needs default_sizes"):
    _load(store, regression_penalty=1.0, default_sizes={}, weighting="key")
  with pytest.raises(ValueError, match=">= 0"):
    _load(store, regression_penalty=-1.0, default_sizes={})


def test_module_or_bytes_takes_the_larger_weight(store):
  plain = _load(store)
  both = _load(store, weighting="module_or_bytes", byte_unit=0.5)
  # |change| of the 4 probes: 2, 5, 5, 2 bytes; relative weights as in plain.
  assert both["probe_y"].tolist() == plain["probe_y"].tolist()
  want = [max(w, min(max(d / 0.5, 0.25), 100.0))
          for w, d in zip(plain["probe_w"], [2, 5, 5, 2])]
  np.testing.assert_allclose(both["probe_w"], want, rtol=1e-6)
  assert (both["probe_w"] > plain["probe_w"]).any()
  # Bytes that weigh less than the relative change leave the weight as it was.
  np.testing.assert_allclose(_load(store, weighting="module_or_bytes",
                                   byte_unit=1e6)["probe_w"], plain["probe_w"], rtol=1e-6)
  # The regression penalty scales the larger weight as it scales the module's.
  pen = _load(store, weighting="module_or_bytes", byte_unit=0.5, regression_penalty=1.0,
              default_sizes={"regressed": 100.0, "fine": 100.0})
  np.testing.assert_allclose(pen["probe_w"], [w * f for w, f in
                                              zip(want, [2.0, 9 / 5, 1.0, 1.0])], rtol=1e-6)


def test_an_unknown_weighting_or_byte_unit_is_refused(store):
  with pytest.raises(ValueError, match="weighting must be one of module, key, "
                     "module_or_bytes, not 'bytes'"):
    _load(store, weighting="bytes")
  with pytest.raises(ValueError, match="byte_unit must be > 0"):
    _load(store, weighting="module_or_bytes", byte_unit=0.0)
