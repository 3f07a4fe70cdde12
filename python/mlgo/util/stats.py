"""Small statistics shared by the reports (IR2Native, the block cost model, probes)."""
import numpy as np


def _ranks(v):
  v = np.asarray(v, np.float64)
  order = np.argsort(v, kind="mergesort")
  r = np.empty(len(v))
  r[order] = np.arange(len(v), dtype=np.float64)
  # Ties share their average rank.
  _, inv, counts = np.unique(v, return_inverse=True, return_counts=True)
  sums = np.bincount(inv, weights=r)
  return sums[inv] / counts[inv]


def spearman(a, b) -> float:
  if len(a) < 2:
    return float("nan")
  ra, rb = _ranks(a), _ranks(b)
  ra, rb = ra - ra.mean(), rb - rb.mean()
  den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
  return float((ra * rb).sum() / den) if den else float("nan")
