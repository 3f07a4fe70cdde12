"""bench_clang_release's summary: per-module spread and per-package ratios from the rows
a benchmark run collects, and the plot beside the CSV."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path("llvm_patches").resolve()))
import bench_clang_release as bench  # noqa: E402  (the tool under test, a script beside this test)

ROWS = [
    ("pugixml/tests/a.cpp", "stock", 1000.0), ("pugixml/tests/a.cpp", "release", 1030.0),
    ("pugixml/tests/b.cpp", "stock", 3000.0), ("pugixml/tests/b.cpp", "release", 3060.0),
    ("cmark/src/c.c", "stock", 500.0), ("cmark/src/c.c", "release", 495.0),
    ("cmark/src/d.c", "stock", 100.0), ("cmark/src/d.c", "release", 101.0),
]


def test_summary_per_module_and_per_package():
  st = bench.summarize(ROWS)["release"]
  assert st["modules"] == 4
  assert st["total"] == pytest.approx((1030 + 3060 + 495 + 101) / (1000 + 3000 + 500 + 100))
  # ratios 1.03, 1.02, 0.99, 1.01: median of the middle two, the goal is strictly above
  assert st["median"] == pytest.approx((1.01 + 1.02) / 2)
  assert (st["min"], st["max"]) == (pytest.approx(0.99), pytest.approx(1.03))
  assert st["above_goal"] == 2
  assert st["packages"]["pugixml"] == (4000.0, pytest.approx(4090 / 4000))
  assert st["packages"]["cmark"] == (600.0, pytest.approx(596 / 600))
  assert list(st["packages"]) == ["cmark", "pugixml"]


def test_summary_needs_a_stock_figure_per_module():
  with pytest.raises(ValueError, match="no stock figure for.*x.c"):
    bench.summarize(ROWS + [("zlib/x.c", "release", 10.0)])


def test_plot_is_written(tmp_path):
  png = tmp_path / "r.png"
  bench.plot_ratios(ROWS, png)
  assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
