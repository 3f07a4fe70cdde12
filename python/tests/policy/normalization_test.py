"""Quantile normalization: ranks, float32-exact boundaries, single == batch encoding."""
import numpy as np
import pytest

from mlgo.policy import normalization


def test_quantile_ranks_are_monotonic_and_bounded():
  rng = np.random.default_rng(0)
  v = rng.lognormal(3, 2, 20000).astype(np.int64)
  fn = normalization.fit_feature("x", v)
  assert len(fn.boundaries) <= normalization.MAX_BOUNDARIES
  assert np.all(np.diff(fn.boundaries) > 0)
  assert np.all(fn.boundaries.astype(np.float32).astype(np.float64) == fn.boundaries)
  norm = normalization.Normalizer([fn])
  xs = np.sort(rng.choice(v, 500))[:, None].astype(np.float64)
  enc = norm.encode_scalar_rows(xs)
  q = enc[:, 0]
  assert np.all(np.diff(q) >= 0)
  assert q.min() >= 0 and q.max() <= 1
  # The median of the data sits near rank 0.5.
  med = norm.encode_scalar_rows(np.array([[np.median(v)]]))[0, 0]
  assert 0.4 < med < 0.6
  assert np.allclose(enc[:, 1], np.sqrt(enc[:, 0]), atol=1e-6)


def test_constant_feature_is_finite():
  fn = normalization.fit_feature("c", np.zeros(100))
  enc = normalization.Normalizer([fn]).encode_scalar_rows(np.array([[0.0], [5.0]]))
  assert np.all(np.isfinite(enc))


def test_single_equals_batch_and_roundtrip(tmp_path):
  rng = np.random.default_rng(1)
  norms = [normalization.fit_feature(f"f{i}", rng.integers(0, 10 ** i + 1, 1000))
           for i in range(6)]
  n = normalization.Normalizer(norms)
  n.save(tmp_path / "n.json")
  n2 = normalization.Normalizer.load(tmp_path / "n.json")
  x = rng.integers(-5, 10 ** 5, (200, 6)).astype(np.float64)
  batch = n2.encode_scalar_rows(x)
  for i in range(len(x)):
    assert np.array_equal(n.encode_one(x[i]), batch[i])


def test_single_equals_batch_for_expanded_column_features():
  # A [1, 33] feature expands to 33 elements sharing one norm (eviction); the per-run
  # fast path must give exactly the batch encoding used in training.
  rng = np.random.default_rng(2)
  a = normalization.fit_feature("a", rng.normal(0, 5, 2000))
  b = normalization.fit_feature("b", rng.integers(0, 1000, 2000))
  c = normalization.fit_feature("c", rng.random(2000))
  n = normalization.Normalizer([a] * 33 + [b] * 33 + [c])
  assert n._per_run and len(n._runs) == 3
  x = np.concatenate([rng.normal(0, 5, (100, 33)), rng.integers(-3, 1200, (100, 33)),
                      rng.random((100, 1))], axis=1)
  batch = n.encode_scalar_rows(x)
  for i in range(len(x)):
    assert np.array_equal(n.encode_one(x[i]), batch[i])
  assert not normalization.Normalizer([a, b, c])._per_run
  # The padded all-boundaries compare (built per run, on first use) agrees too; runs
  # build no flat one-compare tables (test_flat_path_on_boundaries_edges_and_nan).
  assert n._flat is None
  n._per_run = False
  assert n.bmat.shape[0] == 67 and np.array_equal(n.bmat[40], np.pad(
      b.boundaries, (0, n.bmat.shape[1] - len(b.boundaries)), constant_values=np.inf))
  for i in range(len(x)):
    assert np.array_equal(n.encode_one(x[i]), batch[i])


def test_flat_path_on_boundaries_edges_and_nan():
  """The one-compare path (elements with their own norms) gives the batch encoding bit for
  bit on boundary values, just below them, beyond both ends, at +-inf and NaN; an element
  without boundaries sends it to the padded compare, which agrees as well."""
  rng = np.random.default_rng(11)
  norms = [normalization.fit_feature(f"f{i}", rng.integers(0, 10 ** (i % 5) + 2, 3000))
           for i in range(12)]
  n = normalization.Normalizer(norms)
  assert not n._per_run and n._flat is not None
  rows = []
  for _ in range(300):
    row = np.empty(len(norms))
    for i, fn in enumerate(norms):
      b = fn.boundaries
      row[i] = rng.choice([b[rng.integers(len(b))], np.nextafter(b[0], -np.inf), b[-1] + 1,
                           -1e30, np.inf, -np.inf, np.nan, rng.normal(0, 1e4)])
    rows.append(row)
  x = np.array(rows)
  batch = n.encode_scalar_rows(x)
  for i in range(len(x)):
    assert np.array_equal(n.encode_one(x[i]), batch[i], equal_nan=True)
  empty = normalization.FeatureNorm.from_json(dict(norms[0].to_json(), boundaries=[],
                                                    levels=[]))
  n2 = normalization.Normalizer(norms + [empty])
  assert n2._flat is None
  y = np.concatenate([x, np.zeros((len(x), 1))], axis=1)
  b2 = n2.encode_scalar_rows(y)
  for i in range(len(y)):
    assert np.array_equal(n2.encode_one(y[i]), b2[i], equal_nan=True)


def test_collector_bounded_sample():
  c = normalization.QuantileCollector(["a"], capacity=1000)
  for _ in range(50):
    c.add("a", np.arange(1000))
  assert sum(s.size for s in c.samples["a"]) <= 2000
  assert c.seen["a"] == 50000
  fn = c.finish()[0]
  assert fn.boundaries[0] <= 10 and fn.boundaries[-1] >= 990


def test_nan_encodes_like_the_tf_graph():
  # LLVM sends NaN for some eviction features; the SavedModel's `x >= boundary` is false
  # for NaN, so its CDF level is 0. Every numpy path must agree (the per-run fast path
  # for [1, 33] features included).
  norm = normalization.fit_feature("f", np.arange(100.0))
  for n in (1, 33):
    enc = normalization.Normalizer([norm] * n)
    x = np.full(n, np.nan)
    x[0] = 50.0
    one = enc.encode_one(x).reshape(n, 3)
    rows = enc.encode_scalar_rows(x[None, :]).reshape(n, 3)
    assert one[0, 0] > 0.4 and rows[0, 0] > 0.4
    if n > 1:
      assert (one[1:, :2] == 0).all() and (rows[1:, :2] == 0).all()
      assert np.isnan(one[1:, 2]).all()


def test_boundary_groups_give_the_same_cdf_as_the_normalizer():
  """The saved model compares each feature against its boundaries padded only to a power
  of two (features grouped by that size); the CDF must equal the numpy normalizer's, bit
  for bit, on boundary values, between them, beyond both ends, at +-inf and NaN."""
  rng = np.random.default_rng(7)
  # Boundary counts 1, 2, 3, 5, 9, ~17, ~60, ~256: several groups, some with one member.
  norms = [normalization.fit_feature(f"f{i}", rng.integers(0, hi, size=4000))
           for i, hi in enumerate([1, 2, 3, 5, 9, 17, 60, 100000])]
  norms.append(norms[-1])  # an [1, 2] feature expands to two elements sharing one norm
  norm = normalization.Normalizer(norms)
  groups, inverse = norm.boundary_groups()
  sizes = sorted(b.shape[1] for _, b, _ in groups)
  assert sizes == sorted(set(sizes)) and all(k & (k - 1) == 0 for k in sizes)
  assert sum(b.size for _, b, _ in groups) < norm.bmat.size / 2
  vals = np.concatenate([np.concatenate([n.boundaries for n in norms]),
                         np.concatenate([n.boundaries for n in norms]) + 0.5,
                         [-1e30, -1.0, 1e30, np.inf, -np.inf, np.nan]])
  x = rng.choice(vals, size=(500, len(norms)))
  q = np.concatenate([((x[:, idx, None] >= b) * d).sum(axis=-1) for idx, b, d in groups],
                     axis=1)[:, inverse]
  want = norm.encode_scalar_rows(x)[:, 0::3].astype(np.float64)
  np.testing.assert_array_equal(q.astype(np.float32), want)
  assert len(np.unique(q)) > 20  # the comparison sees many distinct CDF levels


def test_fit_ignores_values_that_are_not_finite():
  # A trace of use_def_density holds NaN where a live range has infinite spill weight;
  # the fit must describe the finite values, as if the others were not there.
  rng = np.random.default_rng(4)
  finite = rng.gamma(1.5, 0.2, size=5000)
  mixed = np.concatenate([finite, np.full(300, np.nan), [np.inf, -np.inf]])
  rng.shuffle(mixed)
  got, want = normalization.fit_feature("d", mixed), normalization.fit_feature("d", finite)
  assert np.isfinite(got.mean) and np.isfinite(got.boundaries).all()
  assert got.mean == pytest.approx(want.mean, rel=1e-12)
  assert got.std == pytest.approx(want.std, rel=1e-12)
  assert (got.boundaries == want.boundaries).all() and (got.levels == want.levels).all()
  # Distinct values keep distinct, ordered encodings: the network can tell them apart.
  enc = normalization.Normalizer([got]).encode_scalar_rows(np.array([[0.01], [0.3], [2.0]]))
  assert enc[0, 2] < enc[1, 2] < enc[2, 2] and enc[0, 0] < enc[1, 0] < enc[2, 0]
  # Nothing finite at all: a neutral fit, not NaN.
  empty = normalization.fit_feature("e", np.full(10, np.nan))
  assert np.isfinite(empty.mean) and empty.std == 1.0
