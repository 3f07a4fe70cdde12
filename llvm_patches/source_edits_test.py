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
  assert '"mlgo-fpi-fast", cl::Hidden, cl::init(true)' in edited
  # The update's LoopInfo query survives only behind the option; Uses is still refreshed.
  assert edited.count("FAM.getResult<LoopAnalysis>(const_cast<Function &>(Caller))") == 1
  assert "if (MlgoFPIUpdateLoopStats) {" in edited
  assert "FPI.Uses = getUses(Caller);" in edited
  # The fast path is the advisor's only, and upstream's path stays after it.
  assert "mlgoFPIForInlineAdvisor() &&" in edited
  assert edited.count("return getFunctionPropertiesInfo(F, FAM.getResult<DominatorTreeAnalysis>(F),") == 1
  # What leaves the file: the two anchored LoopInfo lines (they come back indented,
  # behind the option) and the second walk of each block (sizeWithoutDebug), which
  # stays only behind -mlgo-fpi-fast=0 and the check.
  added, removed = _added_removed(text, edited)
  assert removed == [
      "TotalInstructionCount += Direction * BB.sizeWithoutDebug();",
      "const auto &LI = FAM.getResult<LoopAnalysis>(const_cast<Function &>(Caller));",
      "FPI.updateAggregateStats(Caller, LI);"]
  assert "    Size = BB.sizeWithoutDebug();" in added
  assert source_edits.edit_text(FPI, edited) == edited  # applying twice: a no-op


def _added_removed(old, new):
  old_lines, new_lines = old.splitlines(), new.splitlines()
  return ([l for l in new_lines if l not in old_lines],
          [l.strip() for l in old_lines if l not in new_lines])


def test_merged_walk_edit_of_inline_cost():
  rel = source_edits.INLINE_COST_SOURCE
  text = (SRC / rel).read_text()
  edited = source_edits.edit_text(rel, text)
  assert source_edits.MARKER in edited and source_edits.edit_text(rel, edited) == edited
  # The features analyzer becomes a mixin; upstream's name stays, over CallAnalyzer.
  assert "class InlineCostFeaturesAnalyzerT final : public AnalyzerBase {" in edited
  assert ("using InlineCostFeaturesAnalyzer = InlineCostFeaturesAnalyzerT<CallAnalyzer>;"
          in edited)
  assert "class InlineCostCallAnalyzer : public CallAnalyzer {\nprotected:\n" in edited
  # Every features hook that the cost analyzer also has runs the base's hook first.
  hooks = [h for h, *_ in source_edits._FEATURE_HOOKS]
  assert len(hooks) == 14
  for h in hooks:
    assert edited.count(f"AnalyzerBase::{h}(") == 1, h
  assert "return AnalyzerBase::shouldStop();" in edited
  # The entry point and its two options.
  for s in ("mlgoGetInliningCostEstimateAndFeatures(", '"mlgo-merged-cost-walk"',
            '"mlgo-check-merged-cost-walk"', "InlineCostFeaturesAnalyzerT<InlineCostCallAnalyzer>"):
    assert s in edited, s
  # The compatibility memo: options, and the checks it skips only where they read
  # nothing but the two attribute lists (the x86 subtarget's attributes equal).
  for s in ('"mlgo-compat-memo", cl::Hidden', '"mlgo-check-compat-memo", cl::Hidden',
            "if (!AttributesOnly)\n    return Check();", '"target-features"', '"tune-cpu"',
            '"target-cpu"', '"use-soft-float"', "if (!MlgoCompatMemo || !Memo.Active)"):
    assert edited.count(s) == 1, s
  # Upstream lines that leave: only the anchored ones (class heads, the constructor's
  # name and base, the features' shouldStop, and the compatibility checks, which move
  # into a lambda with one more indent); the features' lowered call no longer calls the
  # virtual penalty hook (two other callers of it stay).
  added, removed = _added_removed(text, edited)
  checks = ["auto CalleeTLI = GetTLI(*Callee);", "return (IgnoreTTIInlineCompatible ||",
            "TTI.areInlineCompatible(Caller, Callee)) &&",
            "GetTLI(*Caller).areInlineCompatible(CalleeTLI,",
            "InlineCallerSupersetNoBuiltin) &&",
            "AttributeFuncs::areInlineCompatible(*Caller, *Callee);"]
  assert sorted(removed) == sorted([
      "class InlineCostCallAnalyzer final : public CallAnalyzer {",
      "class InlineCostFeaturesAnalyzer final : public CallAnalyzer {",
      "InlineCostFeaturesAnalyzer(",
      ": CallAnalyzer(Callee, Call, TTI, GetAssumptionCache, GetBFI, GetTLI,",
      "bool shouldStop() override { return false; }"] + checks)
  for line in checks:  # still there, in the lambda
    assert any(l.strip() == line for l in added), line
  assert text.count(" onCallPenalty();") - edited.count(" onCallPenalty();") == 1
  assert 100 <= len(added) <= 200


def test_merged_walk_edit_of_the_ml_inline_advisor():
  rel = source_edits.ML_INLINE_ADVISOR_SOURCE
  text = (SRC / rel).read_text()
  edited = source_edits.edit_text(rel, text)
  assert text.count("llvm::getInliningCostEstimate(") == 1
  assert "llvm::getInliningCostEstimate(" not in edited
  # The features alone only for mandatory call sites (upstream computes no estimate there).
  assert edited.count("llvm::getInliningCostFeatures(") == 1
  # Declared, then called by the walk cache: on a miss, and again in its check mode.
  assert edited.count("mlgoGetInliningCostEstimateAndFeatures(") == 3
  assert edited.count("mlgoCostWalkCached(") == 2  # defined, called by getAdviceImpl
  assert source_edits.edit_text(rel, edited) == edited


def test_walk_cache_and_model_memo_edits_of_the_ml_inline_advisor():
  rel = source_edits.ML_INLINE_ADVISOR_SOURCE
  text = (SRC / rel).read_text()
  edited = source_edits.edit_text(rel, text)
  for opt in ("mlgo-walk-cache", "mlgo-check-walk-cache", "mlgo-model-memo",
              "mlgo-check-model-memo"):
    assert edited.count(f'"{opt}", cl::Hidden') == 1, opt
  # The walk cache: a function analysis of the callee, registered by the advisor, scoped
  # to one inliner run by its entry and exit.
  assert "FAM.registerPass([] { return MlgoWalkCacheAnalysis(); });" in edited
  assert edited.count("mlgoWalkCacheReset(") == 3  # defined, at pass entry, at pass exit
  # Every caller-side fact the walk reads is in the key.
  for fact in ("Caller.hasMinSize()", "Caller.hasOptSize()",
               "InlineConstants::MaxInlineStackSizeAttributeName", "CallerRecursive",
               "CB.getAttributes()", "Callee.getAttributes()", "isa<UnreachableInst>(",
               "Callee.hasOneLiveUse()", "isa<AllocaInst>(V)", "getTargetTriple().isX86()"):
    assert fact in edited, fact
  # The model memo only in release mode; upstream's one-line evaluation is gone.
  assert "ModelRunner->getKind() != MLModelRunner::Kind::Release" in edited
  # not release mode, a new input, a hash collision, the check
  assert edited.count("ModelRunner->evaluate<int64_t>()") == 4
  assert text.count("ModelRunner->evaluate<int64_t>()") == 1


def test_apply_in_place_on_a_tree_and_the_command_line(tmp_path):
  tree = tmp_path / "llvm-project"
  for rel in source_edits.EDITS:
    (tree / rel).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SRC / rel, tree / rel)
  res = subprocess.run([sys.executable, "llvm_patches/source_edits.py", "apply", tree],
                       capture_output=True, text=True)
  assert res.returncode == 0, res.stderr
  assert res.stdout.split() == [w for rel in source_edits.EDITS for w in ("edited", rel)]
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
