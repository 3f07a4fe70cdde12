"""source_edits.py on the pinned LLVM sources: each edit applies exactly once, applying
twice changes nothing, and a source without an anchor is a clear error naming the file."""
import pathlib
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, str(pathlib.Path("llvm_patches").resolve()))
import source_edits  # noqa: E402  (the tool under test, a plain script beside this test)

SRC = pathlib.Path("external/debian_llvm22").resolve()
FPI = source_edits.FPI_SOURCE


def test_fpi_edit_applies_to_the_pinned_source(tmp_path):
  text = (SRC / FPI).read_text()
  edited = source_edits.edit_text(FPI, text)
  assert edited != text and source_edits.MARKER in edited
  assert '"mlgo-fpi-update-loop-stats", cl::Hidden, cl::init(false)' in edited
  # The LoopInfo query survives only behind the option; Uses is still refreshed.
  assert edited.count("FAM.getResult<LoopAnalysis>(const_cast<Function &>(Caller))") == 1
  assert "if (MlgoFPIUpdateLoopStats) {" in edited
  assert "FPI.Uses = getUses(Caller);" in edited
  # Nothing else of the file changes: only the two anchored LoopInfo lines leave (they
  # come back indented, behind the option), and only a few lines are added.
  added = [l for l in edited.splitlines() if l not in text.splitlines()]
  assert 6 <= len(added) <= 16
  removed = [l for l in text.splitlines() if l not in edited.splitlines()]
  assert [l.strip() for l in removed] == [
      "const auto &LI = FAM.getResult<LoopAnalysis>(const_cast<Function &>(Caller));",
      "FPI.updateAggregateStats(Caller, LI);"]
  assert source_edits.edit_text(FPI, edited) == edited  # applying twice: a no-op


def test_apply_in_place_on_a_tree_and_the_command_line(tmp_path):
  tree = tmp_path / "llvm-project"
  (tree / FPI).parent.mkdir(parents=True)
  shutil.copyfile(SRC / FPI, tree / FPI)
  res = subprocess.run([sys.executable, "llvm_patches/source_edits.py", "apply", tree],
                       capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  assert f"edited {FPI}" in res.stdout
  once = (tree / FPI).read_text()
  assert source_edits.MARKER in once
  res = subprocess.run([sys.executable, "llvm_patches/source_edits.py", "apply", tree],
                       capture_output=True, text=True)
  assert res.returncode == 0 and (tree / FPI).read_text() == once


def test_missing_anchor_or_file_is_a_clear_error(tmp_path):
  text = (SRC / FPI).read_text().replace("FPI.updateAggregateStats(Caller, LI);",
                                         "FPI.updateAggregateStats(Caller, *LI);")
  with pytest.raises(source_edits.EditError, match=r"FunctionPropertiesAnalysis.cpp: edit "
                     r"'fpi-loop-stats skip' expects its anchor exactly once, found 0"):
    source_edits.edit_text(FPI, text)
  tree = tmp_path / "empty"
  tree.mkdir()
  res = subprocess.run([sys.executable, "llvm_patches/source_edits.py", "apply", tree],
                       capture_output=True, text=True)
  assert res.returncode != 0
  assert "FunctionPropertiesAnalysis.cpp: missing" in res.stderr
