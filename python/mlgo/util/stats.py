"""Small statistics shared by the reports (IR2Native, the block cost model, probes,
runtime_check's layouts)."""
import itertools
import math

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


def rank_sum_p(x, y, exact_up_to: int = 20) -> tuple:
  """Mann-Whitney rank-sum test of samples x against y, with no assumption about their
  distribution (runtime_check's layout samples are few and not normal).
  Returns (p that x tends to be larger, p that x tends to be smaller): the share of all
  ways to split the pooled values into groups of len(x) and len(y) whose U statistic is
  at least (at most) the observed one. Exact by enumeration up to `exact_up_to` values in
  all, else the normal approximation (continuity-corrected, no tie correction)."""
  x, y = [float(v) for v in x], [float(v) for v in y]
  n, m = len(x), len(y)
  if not n or not m:
    raise ValueError("rank_sum_p needs two non-empty samples")

  def u_stat(a, b):  # pairs where a is larger, ties counted as half
    return sum(1.0 if p > q else 0.5 if p == q else 0.0 for p in a for q in b)

  u = u_stat(x, y)
  if n + m <= exact_up_to:
    pooled = x + y
    ge = le = total = 0
    for idx in itertools.combinations(range(n + m), n):
      chosen = set(idx)
      a = [pooled[i] for i in idx]
      b = [pooled[i] for i in range(n + m) if i not in chosen]
      v = u_stat(a, b)
      total += 1
      ge += v >= u - 1e-9
      le += v <= u + 1e-9
    return ge / total, le / total
  mean, sd = n * m / 2.0, math.sqrt(n * m * (n + m + 1) / 12.0)
  z_hi, z_lo = (u - 0.5 - mean) / sd, (u + 0.5 - mean) / sd
  upper = lambda z: 0.5 * math.erfc(z / math.sqrt(2.0))
  return upper(z_hi), 1.0 - upper(z_lo)
