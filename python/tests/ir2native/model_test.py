"""mlgo.ir2native.model: fitting, saving/loading, prediction checks, metrics, baselines
and the comparison (on synthetic functions whose native size is ~3 bytes/instruction)."""
import json

import numpy as np
import pytest

from mlgo.ir2native import model as model_lib

import i2ntestlib as lib

K_INSTR = lib.FIELDS.index(model_lib.INSTRUCTIONS_DIM)


def synthetic(n, seed, lo=3, hi=3000):
  """States with a plausible instruction mix; size = 3 bytes/instruction +-5%."""
  rng = np.random.default_rng(seed)
  instr = np.round(np.exp(rng.uniform(np.log(lo), np.log(hi), n)))
  mix = rng.dirichlet(np.ones(14), n) * instr[:, None]
  states = np.zeros((n, lib.STATE_WIDTH))
  states[:, 0] = np.maximum(1, np.round(instr / 6))                  # basic blocks
  states[:, 1] = np.floor(states[:, 0] / 2)                          # conditional ones
  states[:, 2:16] = np.round(mix)                                    # instruction kinds
  states[:, K_INSTR] = instr
  states[:, 17:] = np.round(instr[:, None] * rng.uniform(0.5, 2.0, (n, 3)))  # operands
  sizes = np.round(3 * instr * rng.uniform(0.95, 1.05, n))
  return states, sizes


@pytest.fixture(scope="module")
def fitted():
  states, sizes = synthetic(600, 0)
  m = model_lib.fit(states, sizes, lib.FIELDS, hidden=(32, 32), epochs=40, batch=64,
                    seed=0)
  return m, states, sizes


def test_fit_learns_the_size(fitted):
  m, states, sizes = fitted
  assert m.fields == lib.FIELDS
  assert m.meta["training_rows"] == 600 and m.meta["hidden"] == [32, 32]
  # Inputs: log1p of the 20 fields and the 20 fields per instruction.
  assert [w.shape for w, _ in m.layers] == [(40, 32), (32, 32), (32, 1)]
  test_states, test_sizes = synthetic(300, 1)
  p = m.predict(test_states)
  assert p.shape == (300,) and (p >= 0).all()
  assert model_lib.mape(p, test_sizes) < 0.25
  assert model_lib.spearman(p, test_sizes) > 0.95
  # Far better than predicting the mean size.
  assert model_lib.mape(np.full(300, sizes.mean()), test_sizes) > 2 * model_lib.mape(
      p, test_sizes)


def test_fit_scales_to_bigger_functions_than_in_training():
  # Trained on functions of 3..300 instructions, tested on 3000..30000: bytes per
  # instruction carries over.
  states, sizes = synthetic(400, 5, hi=300)
  m = model_lib.fit(states, sizes, lib.FIELDS, hidden=(32, 32), epochs=40, batch=64,
                    seed=0)
  big_states, big_sizes = synthetic(200, 6, lo=3000, hi=30000)
  assert model_lib.mape(m.predict(big_states), big_sizes) < 0.3


def test_fit_needs_the_instruction_count():
  states, sizes = synthetic(50, 2)
  fields = [f if f != "instructions" else "insns" for f in lib.FIELDS]
  with pytest.raises(ValueError, match="'instructions' field"):
    model_lib.fit(states, sizes, fields, epochs=1)


def test_fit_is_seeded():
  states, sizes = synthetic(50, 2)
  a = model_lib.fit(states, sizes, lib.FIELDS, hidden=(8,), epochs=3, seed=5)
  b = model_lib.fit(states, sizes, lib.FIELDS, hidden=(8,), epochs=3, seed=5)
  np.testing.assert_array_equal(a.predict(states), b.predict(states))


def test_fit_refuses_too_few_rows():
  states, sizes = synthetic(9, 3)
  with pytest.raises(ValueError, match="9 training rows"):
    model_lib.fit(states, sizes, lib.FIELDS, epochs=1)


def test_save_load_round_trip(fitted, tmp_path):
  m, states, _ = fitted
  m.meta["data"] = "somewhere"
  m.save(tmp_path / "m")
  assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["ir2native.json",
                                                                "weights.npz"]
  back = model_lib.SizeModel.load(tmp_path / "m")
  np.testing.assert_array_equal(back.predict(states), m.predict(states))
  assert back.fields == m.fields and back.meta == m.meta
  assert back.meta["data"] == "somewhere" and back.meta["epochs"] == 40


def test_load_errors_name_the_dir(fitted, tmp_path):
  m, _, _ = fitted
  empty = tmp_path / "empty"
  empty.mkdir()
  with pytest.raises(ValueError, match="not an IR2Native model directory") as e:
    model_lib.SizeModel.load(empty)
  assert str(empty) in str(e.value)
  with pytest.raises(ValueError, match="missing"):
    model_lib.SizeModel.load(tmp_path / "missing")
  # Weights without their description, and the other way round.
  d = tmp_path / "no_json"
  m.save(d)
  (d / "ir2native.json").unlink()
  with pytest.raises(ValueError, match="no_json"):
    model_lib.SizeModel.load(d)
  d = tmp_path / "no_weights"
  m.save(d)
  (d / "weights.npz").unlink()
  with pytest.raises(ValueError, match="no_weights"):
    model_lib.SizeModel.load(d)
  # Another format, and a layer count the weights do not have.
  d = tmp_path / "fmt"
  m.save(d)
  meta = json.loads((d / "ir2native.json").read_text())
  (d / "ir2native.json").write_text(json.dumps(dict(meta, format=99)))
  with pytest.raises(ValueError, match="format 99"):
    model_lib.SizeModel.load(d)
  (d / "ir2native.json").write_text(json.dumps(dict(meta, layers=5)))
  with pytest.raises(ValueError, match="lacks"):
    model_lib.SizeModel.load(d)


def test_predict_checks_the_width(fitted):
  m, states, _ = fitted
  with pytest.raises(ValueError, match=r"states \[n, 20\], got \[4, 19\]"):
    m.predict(states[:4, :19])
  with pytest.raises(ValueError, match=r"got \[20\]"):
    m.predict(states[0])
  assert m.predict(states[:0]).shape == (0,)


def test_predict_evaluates_the_network():
  # A network by hand: bytes per instruction = exp(y_mean + y_std * output).
  n_in = 2 * lib.STATE_WIDTH
  w = np.zeros((n_in, 1))
  m = model_lib.SizeModel([(w, np.zeros(1))], np.zeros(n_in), np.ones(n_in), np.log(3.0),
                          1.0, lib.FIELDS)
  s = np.zeros((3, lib.STATE_WIDTH))
  s[:, K_INSTR] = [0, 10, 250]
  np.testing.assert_allclose(m.predict(s), [3, 30, 750])   # no instruction counts as 1
  # Two layers with a ReLU between: the input log1p(instructions) (column K_INSTR)
  # through a unit that passes positives; output weight 0.5 -> bytes/instr = e^(0.5 x).
  w1 = np.zeros((n_in, 2))
  w1[K_INSTR, 0] = 1.0
  w1[K_INSTR, 1] = -1.0                     # negative: cut by the ReLU
  w2 = np.array([[0.5], [7.0]])
  m2 = model_lib.SizeModel([(w1, np.zeros(2)), (w2, np.zeros(1))], np.zeros(n_in),
                           np.ones(n_in), 0.0, 1.0, lib.FIELDS)
  x = np.log1p(s[:, K_INSTR])
  np.testing.assert_allclose(m2.predict(s), np.exp(0.5 * x) * np.maximum(s[:, K_INSTR], 1))
  # The normalization: (input - x_mean) / x_std, output * y_std + y_mean.
  m3 = model_lib.SizeModel([(w1, np.zeros(2)), (w2, np.zeros(1))], np.full(n_in, 1.0),
                           np.full(n_in, 2.0), 1.0, 3.0, lib.FIELDS)
  h1, h2 = np.maximum((x - 1.0) / 2.0, 0.0), np.maximum(-(x - 1.0) / 2.0, 0.0)
  np.testing.assert_allclose(m3.predict(s), np.exp(1.0 + 3.0 * (0.5 * h1 + 7.0 * h2)) *
                             np.maximum(s[:, K_INSTR], 1))


def test_metrics():
  real = np.array([10.0, 100.0, 1000.0, 5.0])
  assert model_lib.mape(real, real) == 0.0
  assert model_lib.mape(real * 1.1, real) == pytest.approx(0.1)
  assert model_lib.median_ape(real * [1.1, 1.2, 1.3, 1.4], real) == pytest.approx(0.25)
  # Sizes under 1 byte count as 1 (no division by zero).
  assert model_lib.mape([2.0], [0.0]) == 2.0
  assert model_lib.spearman(real, np.log(real) * 7 + 3) == pytest.approx(1.0)
  assert model_lib.spearman(real, real ** 3) == pytest.approx(1.0)
  assert model_lib.spearman(real, -real) == pytest.approx(-1.0)
  assert model_lib.spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
  assert model_lib.spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)   # ties
  assert np.isnan(model_lib.spearman([1.0], [2.0]))
  assert np.isnan(model_lib.spearman([1, 1, 1], [1, 2, 3]))


def test_scale_baseline():
  x = np.array([1.0, 10.0, 100.0, 0.0, np.nan])
  b = model_lib.ScaleBaseline(x, 3 * np.nan_to_num(x) + [0, 0, 0, 5, 5])
  assert b.c == pytest.approx(3.0)         # rows with x <= 0 or NaN left out
  np.testing.assert_allclose(b.predict([2.0, np.nan]), [6.0, 0.0])
  # Geometric mean of the ratios.
  assert model_lib.ScaleBaseline([1.0, 1.0], [2.0, 8.0]).c == pytest.approx(4.0)
  with pytest.raises(ValueError, match="no usable training rows"):
    model_lib.ScaleBaseline([0.0, np.nan], [1.0, 2.0])


def _rows(states, sizes, with_final):
  n = len(sizes)
  fin = states[:, K_INSTR] * 0.8 if with_final else np.full(n, np.nan)
  tti = states[:, K_INSTR] * 1.5 if with_final else np.full(n, np.nan)
  return {"state": states, "native_size": sizes, "final_instructions": fin,
          "final_tti_code_size": tti}


def test_compare(fitted):
  m, states, sizes = fitted
  test_states, test_sizes = synthetic(200, 4)
  test = _rows(test_states, test_sizes, True)
  test["final_instructions"][:50] = np.nan     # not costed: left out of same_functions
  test["final_tti_code_size"][:50] = np.nan
  res = model_lib.compare(m, _rows(states, sizes, True), test)
  assert res["rows"] == 200 and res["rows_with_final_ir"] == 150
  assert set(res["same_functions"]) == {"ir2native", "ir_instructions",
                                        "final_ir_instructions", "tti_code_size"}
  assert set(res["all_rows"]) == {"ir2native", "ir_instructions"}
  # The baselines are exact up to the +-5% noise: each learned its scale factor.
  for name in ("ir_instructions", "final_ir_instructions", "tti_code_size"):
    assert res["same_functions"][name]["mape"] < 0.04
    assert res["same_functions"][name]["spearman"] > 0.99
  np.testing.assert_allclose(res["predictions"]["tti_code_size"][50:],
                             test_states[50:, K_INSTR] * 1.5 * (3 / 1.5), rtol=0.03)
  ir = res["same_functions"]["ir2native"]
  assert ir["mape"] < 0.25 and ir["spearman"] > 0.95
  np.testing.assert_allclose(res["all_rows"]["ir2native"]["mape"],
                             model_lib.mape(m.predict(test_states), test_sizes))
  # No final IR anywhere: the model and the IR instruction count only.
  res = model_lib.compare(m, _rows(states, sizes, False), _rows(test_states, test_sizes,
                                                                False))
  assert res["rows_with_final_ir"] == 0 and res["same_functions"] == {}
  assert set(res["predictions"]) == {"ir2native", "ir_instructions"}
