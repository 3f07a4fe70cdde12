"""Shared helpers of the log-reader tests: synthetic streams with every dtype."""

import numpy as np

from mlgo.log import FeatureSpec, encode_log
from mlgo.log.spec import DTYPES


def all_dtype_features():
  feats = []
  for i, (tname, dt) in enumerate(DTYPES.items()):
    shape = [(), (1,), (3,), (1, 33), (2, 2, 2)][i % 5]
    feats.append(FeatureSpec(f"f_{tname}", dt, shape, port=i))
  return feats


def random_values(rng, spec):
  dt = np.dtype(spec.dtype)
  if dt.kind == "f":
    v = rng.standard_normal(spec.shape).astype(dt)
  else:
    info = np.iinfo(dt)
    v = rng.integers(info.min, info.max, size=spec.shape, dtype=dt, endpoint=True)
  # Make sure newline bytes occur inside tensor data.
  flat = v.reshape(-1).view(np.uint8)
  if flat.size:
    flat[0] = 0x0A
  return v


def synthetic_stream(seed=0, contexts=3, max_obs=5, with_score=True, no_context=False):
  rng = np.random.default_rng(seed)
  feats = all_dtype_features()
  score = FeatureSpec("reward", np.dtype(np.float32), (1,)) if with_score else None
  ctxs = []
  for c in range(contexts):
    recs = []
    for _ in range(int(rng.integers(0, max_obs + 1))):
      vals = [random_values(rng, f) for f in feats]
      out = np.array([rng.standard_normal()], np.float32) if with_score else None
      recs.append((vals, out))
    ctxs.append((None if no_context else f"fn{c}", recs))
  return feats, score, ctxs, encode_log(feats, ctxs, score)
