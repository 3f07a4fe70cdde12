"""Edits mlgo makes to LLVM sources before compiling them (relink and source routes).

An edit replaces one exact anchor in one file. The anchors are short on purpose (a line or
two of the pinned LLVM version): if an anchor is missing or occurs twice, the edit stops
with an error naming the file and the edit, because a new LLVM version needs the edit
checked again, not applied blindly.

Edits (each behind a hidden `-mllvm` option whose default is the mlgo behaviour, so the
upstream behaviour stays one flag away):

fpi-loop-stats  FunctionPropertiesAnalysis.cpp: after every inlining, the ML inline advisor
                updates the caller's FunctionPropertiesInfo, and the update asks for the
                caller's LoopInfo (invalidated by the advisor just before, so recomputed
                from scratch) only to refresh TopLevelLoopCount and MaxLoopDepth. Neither is
                a feature of the inlining model, and the recomputation is about 15% of an
                -Oz compile in release mode (callgrind, tinyxml2's xmltest.cpp). The edit
                refreshes `Uses` (read by the advisor) and skips the loop statistics unless
                `-mllvm -mlgo-fpi-update-loop-stats` is given. Decisions are unchanged: the
                byte-identity tests against the plugin route (stock LLVM) check it.

Stdlib only: run by release_prefix.py (also from a Bazel repository rule with the system
python3) and by build_patched_clang.sh.

    python3 source_edits.py apply SRC_ROOT    # edit the files of an LLVM tree in place
"""
import pathlib
import sys

FPI_SOURCE = "llvm/lib/Analysis/FunctionPropertiesAnalysis.cpp"

# {relative path: [(edit name, anchor, replacement)]}
EDITS = {
    FPI_SOURCE: [
        ("fpi-loop-stats option",
         "void FunctionPropertiesUpdater::finish(FunctionAnalysisManager &FAM) const {\n",
         "// mlgo (llvm_patches/source_edits.py): the inlining models read no loop statistics,\n"
         "// and recomputing the caller's LoopInfo after every inlining is a large share of a\n"
         "// release-mode compile. Upstream behaviour: -mlgo-fpi-update-loop-stats.\n"
         "static cl::opt<bool> MlgoFPIUpdateLoopStats(\n"
         "    \"mlgo-fpi-update-loop-stats\", cl::Hidden, cl::init(false),\n"
         "    cl::desc(\"Recompute the caller's LoopInfo and loop statistics after each \"\n"
         "             \"inlining (mlgo skips them: no inlining model reads them)\"));\n"
         "\n"
         "void FunctionPropertiesUpdater::finish(FunctionAnalysisManager &FAM) const {\n"),
        ("fpi-loop-stats skip",
         "  const auto &LI = FAM.getResult<LoopAnalysis>(const_cast<Function &>(Caller));\n"
         "  FPI.updateAggregateStats(Caller, LI);\n",
         "  if (MlgoFPIUpdateLoopStats) {\n"
         "    const auto &LI = FAM.getResult<LoopAnalysis>(const_cast<Function &>(Caller));\n"
         "    FPI.updateAggregateStats(Caller, LI);\n"
         "  } else {\n"
         "    FPI.Uses = getUses(Caller);  // the rest of updateAggregateStats: loop statistics\n"
         "  }\n"),
    ],
}
# Marks an edited file, so applying twice is a no-op rather than an error.
MARKER = "mlgo (llvm_patches/source_edits.py)"


class EditError(RuntimeError):
  pass


def edit_text(rel: str, text: str) -> str:
  """The edited text of file `rel` (its path under the LLVM tree)."""
  if MARKER in text:
    return text
  for name, anchor, replacement in EDITS.get(rel, ()):
    n = text.count(anchor)
    if n != 1:
      raise EditError(f"{rel}: edit '{name}' expects its anchor exactly once, found {n} "
                      f"times (another LLVM version? check llvm_patches/source_edits.py):\n"
                      f"{anchor}")
    text = text.replace(anchor, replacement)
  return text


def _read_edited(src_root, rel: str) -> tuple[pathlib.Path, str, str]:
  """(path, original text, edited text) of SRC_ROOT/rel."""
  src = pathlib.Path(src_root) / rel
  if not src.exists():
    raise EditError(f"{src}: missing (the source to edit)")
  old = src.read_text()
  return src, old, edit_text(rel, old)


def write_edited(src_root, rel: str, dest_root) -> pathlib.Path:
  """Writes the edited copy of SRC_ROOT/rel to DEST_ROOT/rel; returns its path."""
  _, _, new = _read_edited(src_root, rel)
  dest = pathlib.Path(dest_root) / rel
  dest.parent.mkdir(parents=True, exist_ok=True)
  dest.write_text(new)
  return dest


def apply_in_place(src_root) -> list[str]:
  """Edits every file of EDITS inside the tree SRC_ROOT (idempotent: an edited file is not
  rewritten, so its mtime does not trigger a rebuild); returns the paths."""
  for rel in EDITS:
    path, old, new = _read_edited(src_root, rel)
    if new != old:
      path.write_text(new)
  return list(EDITS)


def main(argv):
  if len(argv) != 3 or argv[1] != "apply":
    sys.exit("usage: source_edits.py apply LLVM_SRC_ROOT")
  try:
    for rel in apply_in_place(argv[2]):
      print(f"edited {rel}")
  except EditError as e:
    sys.exit(f"source_edits: error: {e}")


if __name__ == "__main__":
  main(sys.argv)
