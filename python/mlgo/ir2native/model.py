"""The IR2Native size model and its comparison with simpler predictors.

Input: a function state (mlgo.ir2native.states: basic blocks, conditionally executed
blocks, the 18-dimension instruction mix); output: the function's native size in bytes
after the rest of the pipeline and code generation. A small MLP on log1p features and the
instruction mix as fractions predicts log(bytes per IR instruction): sizes span five
orders of magnitude and a relative error is what matters for a per-decision reward, and
a per-instruction target scales with the function, so it holds for functions bigger than
any in training (predicting log(size) directly over-sized big unseen test functions up to
9x). Evaluated in numpy, so training workers need no TensorFlow to use it.

Baselines (each one scale factor fitted on the same training rows, in log space):
  ir_instructions        the end-of-inlining state's instruction count
  final_ir_instructions  the final IR's instruction count (the default compile)
  tti_code_size          the final IR's summed TargetTransformInfo code-size cost
Metrics: MAPE (mean |predicted - real| / real), median APE, Spearman rank correlation.
"""
import json
import pathlib

import numpy as np

from mlgo.util.files import write_json_atomic
from mlgo.util.stats import spearman

FORMAT = 2
INSTRUCTIONS_DIM = "instructions"


class SizeModel:
  """Predicts native bytes from states [n, F] (numpy only)."""

  def __init__(self, layers, x_mean, x_std, y_mean, y_std, fields, meta=None):
    self.layers = [(np.asarray(w, np.float64), np.asarray(b, np.float64)) for w, b in layers]
    self.x_mean, self.x_std = np.asarray(x_mean, np.float64), np.asarray(x_std, np.float64)
    self.y_mean, self.y_std = float(y_mean), float(y_std)
    self.fields = list(fields)
    self.meta = dict(meta or {})

  def predict(self, states) -> np.ndarray:
    states = np.asarray(states, np.float64)
    if states.ndim != 2 or states.shape[1] != len(self.fields):
      raise ValueError(f"IR2Native model expects states [n, {len(self.fields)}], got "
                       f"{list(states.shape)}")
    x = (inputs(states, self.fields) - self.x_mean) / self.x_std
    for i, (w, b) in enumerate(self.layers):
      x = x @ w + b
      if i < len(self.layers) - 1:
        x = np.maximum(x, 0.0)
    per_instruction = np.exp(x[:, 0] * self.y_std + self.y_mean)
    return per_instruction * _instructions(states, self.fields)

  def save(self, out_dir):
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    arrays = {"x_mean": self.x_mean, "x_std": self.x_std}
    for i, (w, b) in enumerate(self.layers):
      arrays[f"w{i}"], arrays[f"b{i}"] = w, b
    np.savez(out / "weights.npz", **arrays)
    write_json_atomic(out / "ir2native.json", {
        "format": FORMAT, "fields": self.fields, "layers": len(self.layers),
        "y_mean": self.y_mean, "y_std": self.y_std, **self.meta})

  @classmethod
  def load(cls, model_dir):
    d = pathlib.Path(model_dir)
    try:
      meta = json.loads((d / "ir2native.json").read_text())
      arrays = np.load(d / "weights.npz")
    except (OSError, ValueError) as e:
      raise ValueError(f"{d}: not an IR2Native model directory ({e})") from e
    if meta.get("format") != FORMAT:
      raise ValueError(f"{d}/ir2native.json: format {meta.get('format')}, expected {FORMAT}")
    try:
      layers = [(arrays[f"w{i}"], arrays[f"b{i}"]) for i in range(int(meta["layers"]))]
      return cls(layers, arrays["x_mean"], arrays["x_std"], meta["y_mean"], meta["y_std"],
                 meta["fields"], {k: v for k, v in meta.items()
                                  if k not in ("format", "fields", "layers", "y_mean",
                                               "y_std")})
    except KeyError as e:
      raise ValueError(f"{d}: IR2Native model lacks {e}") from e


def _instructions(states, fields) -> np.ndarray:
  return np.maximum(np.asarray(states, np.float64)[:, fields.index(INSTRUCTIONS_DIM)], 1.0)


def inputs(states, fields) -> np.ndarray:
  """Network inputs: log1p of every field, plus every field per IR instruction."""
  s = np.maximum(np.asarray(states, np.float64), 0.0)
  return np.concatenate([np.log1p(s), s / _instructions(s, fields)[:, None]], axis=1)


def fit(states, sizes, fields, *, hidden=(64, 64), epochs: int = 60, batch: int = 256,
        learning_rate: float = 2e-3, seed: int = 0, stream=None) -> SizeModel:
  """Fits the MLP (module docstring) with TensorFlow (training only)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  fields = list(fields)
  if INSTRUCTIONS_DIM not in fields:
    raise ValueError(f"IR2Native needs the {INSTRUCTIONS_DIM!r} field, got {fields}")
  x = inputs(states, fields)
  y = np.log(np.maximum(np.asarray(sizes, np.float64), 1.0) / _instructions(states, fields))
  if len(x) < 10:
    raise ValueError(f"IR2Native: {len(x)} training rows are too few")
  x_mean, x_std = x.mean(0), x.std(0) + 1e-6
  y_mean, y_std = float(y.mean()), float(y.std() + 1e-6)
  xs = ((x - x_mean) / x_std).astype(np.float32)
  ys = ((y - y_mean) / y_std).astype(np.float32)
  tf.keras.utils.set_random_seed(seed)
  net = tf.keras.Sequential([tf.keras.layers.Dense(h, activation="relu") for h in hidden] +
                            [tf.keras.layers.Dense(1)])
  net.compile(optimizer=tf.keras.optimizers.Adam(learning_rate), loss="mse")
  net.fit(xs, ys[:, None], epochs=epochs, batch_size=batch, shuffle=True,
          verbose=0)
  layers = [(layer.kernel.numpy(), layer.bias.numpy()) for layer in net.layers]
  model = SizeModel(layers, x_mean, x_std, y_mean, y_std, fields,
                    {"hidden": list(hidden), "epochs": epochs, "training_rows": int(len(x))})
  if stream is not None:
    p = model.predict(states)
    print(f"ir2native fit: {len(x)} rows, training MAPE {mape(p, sizes):.3f}", file=stream)
  return model


# --- metrics and baselines ------------------------------------------------------------
def mape(pred, real) -> float:
  real = np.asarray(real, np.float64)
  return float(np.mean(np.abs(np.asarray(pred, np.float64) - real) / np.maximum(real, 1.0)))


def median_ape(pred, real) -> float:
  real = np.asarray(real, np.float64)
  return float(np.median(np.abs(np.asarray(pred, np.float64) - real) / np.maximum(real, 1.0)))


class ScaleBaseline:
  """size ~ c * x with c fitted in log space (geometric mean of size / x)."""

  def __init__(self, x, sizes):
    x, s = np.asarray(x, np.float64), np.asarray(sizes, np.float64)
    ok = (x > 0) & (s > 0) & np.isfinite(x)
    if not ok.any():
      raise ValueError("baseline: no usable training rows")
    self.c = float(np.exp(np.mean(np.log(s[ok]) - np.log(x[ok]))))

  def predict(self, x):
    return self.c * np.nan_to_num(np.asarray(x, np.float64))


def compare(model: SizeModel, train: dict, test: dict) -> dict:
  """Metrics of the model and the baselines on the test rows that every predictor can
  score (rows with final-IR costs), plus the model alone on all test rows."""
  fields = model.fields
  k = fields.index(INSTRUCTIONS_DIM) if INSTRUCTIONS_DIM in fields else None
  both = np.isfinite(test["final_instructions"]) & np.isfinite(test["final_tti_code_size"])
  tr_both = np.isfinite(train["final_instructions"]) & np.isfinite(train["final_tti_code_size"])
  y = test["native_size"]
  preds = {"ir2native": model.predict(test["state"])}
  if k is not None:
    preds["ir_instructions"] = ScaleBaseline(train["state"][:, k],
                                             train["native_size"]).predict(test["state"][:, k])
  for name, col in (("final_ir_instructions", "final_instructions"),
                    ("tti_code_size", "final_tti_code_size")):
    if tr_both.any():
      preds[name] = ScaleBaseline(train[col][tr_both], train["native_size"][tr_both]
                                  ).predict(test[col])
  out = {"rows": int(len(y)), "rows_with_final_ir": int(both.sum()),
         "same_functions": {}, "all_rows": {}}
  for name, p in preds.items():
    if both.any():
      out["same_functions"][name] = {"mape": mape(p[both], y[both]),
                                     "median_ape": median_ape(p[both], y[both]),
                                     "spearman": spearman(p[both], y[both])}
  for name in ("ir2native", "ir_instructions"):
    if name in preds and len(y):
      out["all_rows"][name] = {"mape": mape(preds[name], y),
                               "median_ape": median_ape(preds[name], y),
                               "spearman": spearman(preds[name], y)}
  out["predictions"] = preds
  return out
