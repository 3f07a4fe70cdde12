"""mlgo.util.files.replace_dir_with_copy: the directory copy training writes policies with."""
from mlgo.util import files


def _tree(d):
  return {str(p.relative_to(d)): p.read_text() for p in sorted(d.rglob("*")) if p.is_file()}


def test_a_copy_replaces_the_old_dir_and_a_cut_copy_is_cleared(tmp_path):
  src, dst = tmp_path / "src", tmp_path / "dst"
  (src / "sub").mkdir(parents=True)
  (src / "a.json").write_text("new")
  (src / "sub" / "w.npz").write_text("weights")
  dst.mkdir()
  (dst / "a.json").write_text("old")
  (dst / "stale.txt").write_text("from the old policy")
  cut = tmp_path / "dst.tmp"  # what a run killed mid-copy left
  cut.mkdir()
  (cut / "half").write_text("x")
  files.replace_dir_with_copy(src, dst)
  assert _tree(dst) == {"a.json": "new", "sub/w.npz": "weights"}
  assert _tree(src) == _tree(dst)
  assert not cut.exists()
  files.replace_dir_with_copy(src, tmp_path / "fresh")  # no dst yet
  assert _tree(tmp_path / "fresh") == _tree(src)
