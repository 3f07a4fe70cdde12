"""runtime_check's report over memory layouts: the verdict, the table, the geomean and
the plot, on hand-made rows (the measured path is in runtime_programs_test)."""
import pytest

from mlgo.evaluation import runtime_report as rr


def _m(cycles):
  return {"instructions": cycles, "d1_misses": 0, "ll_misses": 0, "mispredicts": 0,
          "cycles": cycles}


def _row(name, default, policy):
  """A row as run() writes it: the plain link first, then the extra layouts."""
  return {"program": name, "role": "heldout", "output_bytes": 10,
          "default": _m(default[0]), "policy": _m(policy[0]),
          "layouts": {"default": [_m(c) for c in default],
                      "policy": [_m(c) for c in policy]}}


def test_verdicts_follow_the_layouts_not_the_plain_link():
  # Slower in the plain link only: the other layouts put it among the default's.
  noisy = _row("noisy", [1000, 990, 1010, 995, 1005], [1004, 992, 1001, 998, 996])
  s = rr.layout_summary(noisy)
  assert s["verdict"] == "within layout noise" and s["layouts"] == 5
  assert s["noise"] == pytest.approx(2.0)  # (1010 - 990) / 1000
  slower = _row("slower", [1000, 1001, 999, 1000, 1002], [1010, 1011, 1009, 1012, 1013])
  s = rr.layout_summary(slower)
  assert s["verdict"] == "slower" and s["p_slower"] == pytest.approx(1 / 252)
  assert s["change"] == pytest.approx((1011 / 1000.4 - 1) * 100)
  faster = _row("faster", [1000, 1001, 999, 1000, 1002], [990, 991, 989, 992, 993])
  assert rr.layout_summary(faster)["verdict"] == "faster"
  plain = dict(noisy)
  del plain["layouts"]
  assert rr.layout_summary(plain) is None


def test_table_and_geomean_over_layouts():
  rows = [_row("a", [100, 100, 100], [110, 110, 110]),
          _row("b", [200, 220, 180], [200, 200, 200])]
  assert rr.geomean_change(rows) == pytest.approx((1.1 ** 0.5 - 1) * 100)
  # b's means are equal over layouts (200 vs 200).
  assert rr.geomean_change(rows, over_layouts=True) == pytest.approx((1.1 ** 0.5 - 1) * 100)
  rows[1]["layouts"]["policy"] = [_m(190)] * 3
  assert rr.geomean_change(rows, over_layouts=True) == pytest.approx(
      ((1.1 * 0.95) ** 0.5 - 1) * 100)
  table = rr.format_table(rows)
  assert "over 3 memory layouts per side" in table
  assert "(one layout)" in table
  # Three layouts per side cannot reach p < 0.05 (the least p is 1/20): no verdict.
  assert "within layout noise on 2 (a, b)" in table


def test_plot_writes_a_png(tmp_path):
  rows = [_row("a", [100, 101, 99], [98, 97, 99])]
  plain = {k: v for k, v in _row("b", [50], [51]).items() if k != "layouts"}
  rr.plot(rows + [plain], tmp_path / "rc.png")
  assert (tmp_path / "rc.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
