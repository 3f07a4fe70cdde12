"""Feature normalization computed from a trace: quantile buckets per feature.

Encoding "quantile" (the default) turns each scalar element x of a feature into three
floats:
  q = fraction of the trace's values <= x    (empirical CDF at the largest
                                              boundary <= x, in [0, 1])
  sqrt(q)                                    (spreads the low ranks)
  (slog(x) - mean) / std,  slog = sign(x) log1p(|x|)   (magnitude, robust to outliers)
The same arithmetic is done in numpy (collection) and in the TF graph (saved policy),
so both give the same decisions. Boundaries are stored as float32-exact values and CDF
levels as multiples of 1/1024, so comparisons and sums agree bit for bit on both sides.

A feature fitted with transform "log" uses log(|x| + LOG_EPS) in place of slog in the
third float. Eviction's frequency and weight features arrive divided by the function's
largest value, so in a function with deep loops two candidates can differ 20,000-fold
at 1e-9 and 3e-5: slog maps both to about 0 (a difference of 1e-4 standard deviations),
the quantile puts both in its lowest bucket, and the network cannot tell the hot
candidate from the cold one (SELECTION_RULES.md, stop 70). The log keeps decades apart.

Encoding "slog" keeps only the third float. A release compiler evaluates the model at
every call site, and the quantile's boundary compares and the square root are about a
third of what one evaluation costs there; "slog" is the cheap form for such models.
"""
import dataclasses
import json

import numpy as np

ENCODED_PER_SCALAR = 3          # of the default encoding, "quantile"
ENCODINGS = {"quantile": 3, "slog": 1}   # encoding -> floats per scalar element
MAX_BOUNDARIES = 256
LEVEL_UNITS = 1024
# Values below this read as 0 under the "log" transform (log(LOG_EPS) = -27.6).
LOG_EPS = 1e-12
TRANSFORMS = ("slog", "log")


@dataclasses.dataclass
class FeatureNorm:
  name: str
  boundaries: np.ndarray  # float64 holding float32-exact values, sorted, unique
  mean: float
  std: float
  levels: np.ndarray | None = None  # CDF at each boundary, multiples of 1/LEVEL_UNITS
  transform: str = "slog"           # of the third float: "slog" or "log" (module doc)

  def __post_init__(self):
    if self.transform not in TRANSFORMS:
      raise ValueError(f"feature {self.name!r}: unknown transform {self.transform!r} "
                       f"(known: {', '.join(TRANSFORMS)})")
    if self.levels is None:
      n = max(len(self.boundaries), 1)
      self.levels = np.round(np.arange(1, len(self.boundaries) + 1) / n * LEVEL_UNITS
                             ) / LEVEL_UNITS
    self.levels = np.asarray(self.levels, np.float64)

  @property
  def increments(self) -> np.ndarray:
    return np.diff(self.levels, prepend=0.0)

  def to_json(self):
    d = {"name": self.name, "boundaries": [float(b) for b in self.boundaries],
         "levels": [float(l) for l in self.levels], "mean": self.mean, "std": self.std}
    if self.transform != "slog":   # policies written before transforms stay byte-equal
      d["transform"] = self.transform
    return d

  @staticmethod
  def from_json(d):
    return FeatureNorm(d["name"], np.asarray(d["boundaries"], np.float64),
                       float(d["mean"]), float(d["std"]), d.get("levels"),
                       d.get("transform", "slog"))


def slog(x: np.ndarray) -> np.ndarray:
  return np.sign(x) * np.log1p(np.abs(x))


def log_abs(x: np.ndarray) -> np.ndarray:
  return np.log(np.abs(x) + LOG_EPS)


def transform(x, kind: str = "slog"):
  """The third float's transform of raw values, before standardization."""
  return log_abs(x) if kind == "log" else slog(x)


class QuantileCollector:
  """Streams values of each feature and keeps a bounded uniform sample (reservoir)."""

  def __init__(self, names, capacity: int = 200_000, seed: int = 0):
    self.names = list(names)
    self.capacity = capacity
    self.rng = np.random.default_rng(seed)
    self.samples = {n: [] for n in self.names}
    self.seen = {n: 0 for n in self.names}

  def add(self, name: str, values: np.ndarray):
    v = np.asarray(values, np.float64).reshape(-1)
    if v.size == 0:
      return
    self.seen[name] += v.size
    cur = self.samples[name]
    cur.append(v)
    total = sum(a.size for a in cur)
    if total > 2 * self.capacity:
      allv = np.concatenate(cur)
      self.samples[name] = [self.rng.choice(allv, self.capacity, replace=False)]

  def finish(self, max_boundaries: int = MAX_BOUNDARIES, transforms=None
             ) -> list[FeatureNorm]:
    """transforms: {feature name: "log"} for features not encoded with slog."""
    out = []
    for n in self.names:
      allv = np.concatenate(self.samples[n]) if self.samples[n] else np.zeros(1)
      out.append(fit_feature(n, allv, max_boundaries, (transforms or {}).get(n, "slog")))
    return out


def fit_feature(name: str, values: np.ndarray, max_boundaries: int = MAX_BOUNDARIES,
                kind: str = "slog") -> FeatureNorm:
  v = np.asarray(values, np.float64).reshape(-1)
  # LLVM sends NaN (and may send inf) for some eviction features, e.g. use_def_density
  # next to a live range of infinite spill weight. Fitted with them, the mean and every
  # boundary were NaN, and the feature reached the network as zeros whatever its value.
  v = v[np.isfinite(v)]
  if v.size == 0:
    v = np.zeros(1)
  qs = np.quantile(v, np.linspace(0, 1, max_boundaries + 1)[1:], method="lower")
  b = np.unique(qs.astype(np.float32).astype(np.float64))
  sv = np.sort(v)
  levels = np.round(np.searchsorted(sv, b, side="right") / len(sv) * LEVEL_UNITS) / LEVEL_UNITS
  s = transform(v, kind)   # an unknown kind is refused by FeatureNorm below
  std = float(s.std())
  return FeatureNorm(name, b, float(s.mean()), std if std > 1e-6 else 1.0, levels, kind)


class Normalizer:
  """Encodes raw features (dict name -> array [..., *shape]) into float32 vectors.

  copies > 1 (an ensemble whose members fitted their own normalizations, e.g. two seeds):
  `norms` holds `copies` blocks of one norm per raw element, and every raw vector is read
  `copies` times, each block encoding it with its own member's norms, side by side.
  """

  def __init__(self, norms: list[FeatureNorm], encoding: str = "quantile", copies: int = 1):
    if encoding not in ENCODINGS:
      raise ValueError(f"unknown feature encoding {encoding!r} (known: {sorted(ENCODINGS)})")
    if copies < 1 or len(norms) % copies:
      raise ValueError(f"{len(norms)} element norms cannot be {copies} equal member blocks")
    self.encoding = encoding
    self.copies = int(copies)
    self.norms = list(norms)
    self.by_name = {n.name: n for n in self.norms}
    # Runs of consecutive elements sharing one norm (a [1, 33] eviction feature expands to
    # 33 copies): there, one binary search per run beats the padded all-boundaries compare
    # (661 x 253 for eviction: ~0.6 ms a decision; per run: ~40 us).
    self._runs = []
    i = 0
    while i < len(self.norms):
      j = i + 1
      while j < len(self.norms) and self.norms[j] is self.norms[i]:
        j += 1
      self._runs.append((i, j))
      i = j
    self._per_run = len(self._runs) * 4 <= len(self.norms)
    # The CDF per element, computed once a run: a worker builds a policy for every
    # compile, and per element (661 for eviction) this took ~22 ms a compile (stop 69).
    self._cum = []
    for a, b in self._runs:
      cum = np.concatenate([[0.0], np.cumsum(self.norms[a].increments)])
      self._cum += [cum] * (b - a)
    self._run_tables = [(a, b, self.norms[a].boundaries, self._cum[a]) for a, b in self._runs]
    # The other per-decision path: every element's boundaries in one flat array, so one
    # compare finds how many each value passes (3,700 compares for inlining with IR2Vec,
    # where the padded matrix needs 20,000: ~15 us a decision instead of ~60). Needs every
    # element to have a boundary (reduceat takes no empty segment). Not built where runs
    # decide (eviction's 661 elements: ~170,000 boundaries copied for nothing).
    lens = np.array([len(n.boundaries) for n in self.norms], np.intp)
    self._flat = None
    if not self._per_run and len(lens) and lens.min() > 0:
      self._flat = (np.repeat(np.arange(len(lens)), lens),
                    np.concatenate([n.boundaries for n in self.norms]),
                    np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.intp),
                    np.concatenate(self._cum),
                    np.concatenate([[0], np.cumsum(lens + 1)[:-1]]).astype(np.intp))
    self._bmat = None
    self.mean = np.array([n.mean for n in self.norms])
    self.std = np.array([n.std for n in self.norms])
    # Elements whose third float is log(|x| + LOG_EPS) instead of slog (None: none).
    log = np.array([n.transform == "log" for n in self.norms], bool)
    self.log_mask = log if log.any() else None

  @property
  def bmat(self) -> np.ndarray:
    """[elements, K] boundaries padded with +inf (K the most any element has)."""
    if self._bmat is None:
      self._padded_matrices()
    return self._bmat

  @property
  def dmat(self) -> np.ndarray:
    """[elements, K] CDF increments per boundary, padded with 0 (beside bmat)."""
    if self._bmat is None:
      self._padded_matrices()
    return self._dmat

  def _padded_matrices(self):
    # One padded boundary matrix so a single decision needs one vectorized compare: the
    # per-decision path only where an element has no boundary (else the flat tables or
    # the runs decide); tests read it to check the other paths.
    kmax = max([len(n.boundaries) for n in self.norms] + [1])
    bmat = np.full((len(self.norms), kmax), np.inf)
    dmat = np.zeros((len(self.norms), kmax))
    for a, b in self._runs:
      n = self.norms[a]
      bmat[a:b, :len(n.boundaries)] = n.boundaries
      dmat[a:b, :len(n.boundaries)] = n.increments
    self._bmat, self._dmat = bmat, dmat

  @property
  def names(self):
    return [n.name for n in self.norms]

  @property
  def per_scalar(self) -> int:
    return ENCODINGS[self.encoding]

  @property
  def input_dim(self) -> int:
    """Width of an encoded decision (the network's input)."""
    return len(self.norms) * self.per_scalar

  def boundary_groups(self):
    """The boundaries for the TF graph: elements grouped by boundary count rounded up to a
    power of two, each group (indices, [G, K] boundaries padded with +inf, [G, K] CDF
    increments padded with 0), and the permutation from group order back to element order.

    bmat pads every element to the longest one (254 boundaries for inlining): compiled,
    that was 9,652 compares a decision where the groups need 1,213, and most of the
    model's time in the compiler. The sums are of multiples of 1/1024 below 1, exact in
    float64 in any order, so the decisions are the same.
    """
    by_k = {}
    for i, n in enumerate(self.norms):
      by_k.setdefault(1 << max(0, len(n.boundaries) - 1).bit_length(), []).append(i)
    groups, order = [], []
    for k, idx in sorted(by_k.items()):
      b, d = np.full((len(idx), k), np.inf), np.zeros((len(idx), k))
      for row, i in enumerate(idx):
        n = self.norms[i]
        b[row, :len(n.boundaries)] = n.boundaries
        d[row, :len(n.boundaries)] = n.increments
      groups.append((np.asarray(idx, np.int32), b, d))
      order += idx
    return groups, np.argsort(np.asarray(order)).astype(np.int32)

  def encode_scalar_rows(self, x: np.ndarray) -> np.ndarray:
    """x: [N, F] float64 raw values (feature order of self.norms) -> [N, 3F] float32
    ([N, F] for "slog"; times `copies`)."""
    x = np.asarray(x, np.float64)
    if self.copies > 1:
      x = np.tile(x, (1, self.copies))
    n, f = x.shape
    if self.encoding == "slog":
      return self._z(x).astype(np.float32)
    q = np.empty((n, f))
    for i in range(f):
      q[:, i] = self._cum[i][np.searchsorted(self.norms[i].boundaries, x[:, i], side="right")]
    q[np.isnan(x)] = 0.0  # as in the TF graph: NaN >= boundary is false
    return np.stack([q, np.sqrt(q), self._z(x)], axis=-1).reshape(n, f * ENCODED_PER_SCALAR
                                                                   ).astype(np.float32)

  def _z(self, x: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf inputs stay NaN/inf
      s = slog(x)
      if self.log_mask is not None:
        s = np.where(self.log_mask, log_abs(x), s)
      return (s - self.mean) / self.std

  def encode_one(self, x: np.ndarray) -> np.ndarray:
    """x: [F] float64 -> [3F] float32 ([F] for "slog"; times `copies`), the per-decision
    fast path."""
    if self.copies > 1:
      x = np.tile(x, self.copies)
    if self.encoding == "slog":
      return self._z(x).astype(np.float32)
    if self._per_run:
      q = np.empty(len(x))
      for a, b, bounds, cum in self._run_tables:
        q[a:b] = cum[bounds.searchsorted(x[a:b], side="right")]
      q[np.isnan(x)] = 0.0  # as in the TF graph: NaN >= boundary is false
    elif self._flat is not None:
      # Count the boundaries each value reaches, then read the CDF there. The increments
      # are multiples of 1/1024 (exact sums in any order), so this is the padded
      # compare's sum and the batch path's table value, bit for bit; NaN reaches none.
      elem, bounds, starts, cum, cum_at = self._flat
      q = cum[cum_at + np.add.reduceat(x[elem] >= bounds, starts, dtype=np.intp)]
    else:
      q = ((x[:, None] >= self.bmat) * self.dmat).sum(axis=1)
    # Written into one buffer (not np.stack of three): the same numbers, half the time of
    # the per-decision path (~50 us of ~100 us a decision, stop 69).
    out = np.empty((len(x), ENCODED_PER_SCALAR))
    out[:, 0] = q
    np.sqrt(q, out=out[:, 1])
    out[:, 2] = self._z(x)
    return out.reshape(-1).astype(np.float32)

  def to_json(self):
    return [n.to_json() for n in self.norms]

  @staticmethod
  def from_json(d):
    return Normalizer([FeatureNorm.from_json(x) for x in d])

  def save(self, path):
    with open(path, "w") as f:
      json.dump(self.to_json(), f)

  @staticmethod
  def load(path):
    with open(path) as f:
      return Normalizer.from_json(json.load(f))
