"""The small statistics the reports share: rank correlation and the rank-sum test."""
import random

import pytest

from mlgo.util import stats


def test_rank_sum_exact_extremes():
  # 3 against 3 all larger: one split in C(6,3) = 20 is at least as extreme.
  assert stats.rank_sum_p([5, 6, 7], [1, 2, 3]) == (pytest.approx(0.05), 1.0)
  assert stats.rank_sum_p([1, 2, 3], [5, 6, 7]) == (1.0, pytest.approx(0.05))
  # 5 against 5: 1 / C(10,5) = 1/252, the smallest p that runtime_check's default gives.
  slower, faster = stats.rank_sum_p([10, 11, 12, 13, 14], [1, 2, 3, 4, 5])
  assert slower == pytest.approx(1 / 252) and faster == 1.0


def test_rank_sum_ties_and_overlap_are_not_significant():
  assert stats.rank_sum_p([1, 2, 3], [1, 2, 3]) == (pytest.approx(0.7), pytest.approx(0.7))
  slower, faster = stats.rank_sum_p([1, 4, 5, 8, 9], [2, 3, 6, 7, 10])
  assert slower > 0.2 and faster > 0.2
  # Interleaved ranks count as half a win each way, never a decision.
  assert min(stats.rank_sum_p([2.0] * 4, [2.0] * 4)) == 1.0


def test_rank_sum_normal_approximation_agrees_with_exact():
  rng = random.Random(3)
  for shift in (0.0, 0.8, 2.0):
    x = [rng.gauss(shift, 1) for _ in range(9)]
    y = [rng.gauss(0, 1) for _ in range(9)]
    exact = stats.rank_sum_p(x, y)
    approx = stats.rank_sum_p(x, y, exact_up_to=0)
    assert approx[0] == pytest.approx(exact[0], abs=0.02)
    assert approx[1] == pytest.approx(exact[1], abs=0.02)


def test_rank_sum_rejects_empty_samples():
  with pytest.raises(ValueError, match="non-empty"):
    stats.rank_sum_p([], [1.0])


def test_spearman_on_monotone_and_reversed():
  a = [1.0, 5.0, 2.0, 8.0, 3.0]
  assert stats.spearman(a, [x ** 3 for x in a]) == pytest.approx(1.0)
  assert stats.spearman(a, [-x for x in a]) == pytest.approx(-1.0)
