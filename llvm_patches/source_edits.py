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

fpi-fast        FunctionPropertiesAnalysis.cpp + MLInlineAdvisor.cpp: the advisor asks for
                the properties of every function of the module when it starts, and again
                for each function it inlines into. Upstream computes each from a dominator
                tree (only to skip unreachable blocks) and LoopInfo (only for the loop
                statistics, which no inlining model reads), and counts a block's
                instructions in a second walk through a std::function filter. For the
                advisor's requests (a per-thread flag set around its one analysis query)
                the edit skips LoopInfo, uses a cached dominator tree or else a walk from
                the entry (the same reachable blocks, included in the same order), and
                counts in the block's one loop: a third of release mode's extra cost on
                pugixml's test_header_only_2.cpp (116 M to 74 M instructions). Other
                users of the analysis (opt's print<func-properties>) keep upstream's
                path; only in a pipeline that also runs the ML inliner can they be
                handed a result the advisor left cached, with zero loop statistics
                (stale ones without this edit, see fpi-loop-stats). `-mllvm
                -mlgo-fpi-fast=0` restores upstream's computation; `-mllvm -mlgo-check-fpi-fast` also
                computes it and stops at the first difference (loop statistics aside).

merged-cost-walk  InlineCost.cpp + MLInlineAdvisor.cpp: for every call site the ML inline
                advisor asks for the heuristic cost estimate and for the cost features, and
                each request walks the whole callee (no early exit: the full cost is
                wanted), so the callee is simplified and walked twice. The edit turns upstream's features analyzer into a mixin
                over its base analyzer: over CallAnalyzer it is upstream's class unchanged,
                over InlineCostCallAnalyzer one walk gives both results (every hook runs
                the cost hook, then the features hook). A call whose body the cost walk
                skips (the "call-inline-cost" attribute) makes the walks differ: then the
                features are walked again on their own. (At -Oz both hooks still count the
                callee's loops, under 3% of the walk.) `-mllvm -mlgo-merged-cost-walk=0`
                restores the two walks; `-mllvm -mlgo-check-merged-cost-walk` computes
                both ways and stops the compile at the first difference.

walk-cache      InlineCost.cpp + MLInlineAdvisor.cpp: the merged walk still walks the whole
                callee at every call site, where the default advisor's walk stops early
                at its threshold. Calls of one callee often look the same to the walk
                (same caller-side facts, same constant arguments, same pattern of
                pointer arguments), so the advisor keeps each callee's walks as a function
                analysis of the callee (dropped by any pass that changes it) and reuses a
                walk at a call site with the same key. The key is everything the walk reads
                of the call site and the caller (listed in the text below); callees in the
                inliner's current SCC, which inlining edits before the analysis manager
                hears of it, are walked every time, as are calls the key cannot describe
                exactly (non-x86 targets, aggregates, functions or constant expressions as
                arguments, a walk that saw through an indirect call). `-mllvm
                -mlgo-walk-cache=0` walks every time; `-mllvm -mlgo-check-walk-cache`
                walks every time and stops at the first cached result that differs.

compat-memo     InlineCost.cpp + MLInlineAdvisor.cpp: every call site's advice starts with
                the attribute-based checks (is the callee compatible with the caller: the
                target's subtarget features, the library info, the attribute rules), a
                few thousand instructions each, over pairs of attribute lists that repeat
                all through a module. When the two functions share target-cpu, tune-cpu,
                target-features and the other attributes the x86 subtarget is built from,
                the checks read nothing but the two attribute lists (otherwise x86 may
                look into the callee's calls), so during the ML advisor's inliner runs
                their answer is remembered per pair of lists (uniqued, alive while the
                module is). `-mllvm -mlgo-compat-memo=0` checks every time; `-mllvm
                -mlgo-check-compat-memo` checks every time and stops at a difference.

model-memo      MLInlineAdvisor.cpp: the compiled-in model is a pure function of its input
                tensors, and it is a large share of the advisor's time (about 25,000
                instructions a call for models/inlining_oz, 4% of an -Oz compile of
                yaml-cpp's emitter_test.cpp). Calls of one callee from one caller between two
                inlinings often give the same inputs, so the advisor remembers the model's
                answer for each input it has seen (release mode only: an interactive or
                development runner logs every call and is never skipped). The memo is per
                advisor and thread. `-mllvm -mlgo-model-memo=0` evaluates every time;
                `-mllvm -mlgo-check-model-memo` evaluates every time and stops at the first
                answer that differs from the memo's.

Stdlib only: run by release_prefix.py (also from a Bazel repository rule with the system
python3) and by build_patched_clang.sh.

    python3 source_edits.py apply SRC_ROOT    # edit the files of an LLVM tree in place
"""
import pathlib
import sys

FPI_SOURCE = "llvm/lib/Analysis/FunctionPropertiesAnalysis.cpp"
INLINE_COST_SOURCE = "llvm/lib/Analysis/InlineCost.cpp"
ML_INLINE_ADVISOR_SOURCE = "llvm/lib/Analysis/MLInlineAdvisor.cpp"


def _prefix(name, anchor, text):
  """An edit that puts TEXT right before ANCHOR (which stays)."""
  return (name, anchor, text + anchor)


def _after(name, anchor, text):
  """An edit that puts TEXT right after ANCHOR (which stays)."""
  return (name, anchor, anchor + text)


# The features analyzer's hooks that the cost analyzer also has: in the mixin each runs
# the base's hook first. (hook name, its first lines in upstream, the base call)
_FEATURE_HOOKS = [
    ("onDisableSROA",
     "  void onDisableSROA(AllocaInst *Arg) override {\n"
     "    auto CostIt = SROACosts.find(Arg);\n",
     "AnalyzerBase::onDisableSROA(Arg);"),
    ("onDisableLoadElimination",
     "  void onDisableLoadElimination() override {\n"
     "    set(InlineCostFeatureIndex::load_elimination, 1);\n",
     "AnalyzerBase::onDisableLoadElimination();"),
    ("onCallPenalty",
     "  void onCallPenalty() override {\n"
     "    increment(InlineCostFeatureIndex::call_penalty, CallPenalty);\n",
     "AnalyzerBase::onCallPenalty();"),
    ("onCallArgumentSetup",
     "  void onCallArgumentSetup(const CallBase &Call) override {\n"
     "    increment(InlineCostFeatureIndex::call_argument_setup,\n",
     "AnalyzerBase::onCallArgumentSetup(Call);"),
    ("onLoadRelativeIntrinsic",
     "  void onLoadRelativeIntrinsic() override {\n"
     "    increment(InlineCostFeatureIndex::load_relative_intrinsic, 3 * InstrCost);\n",
     "AnalyzerBase::onLoadRelativeIntrinsic();"),
    ("onLoweredCall",
     "                     bool IsIndirectCall) override {\n"
     "    increment(InlineCostFeatureIndex::lowered_call_arg_setup,\n",
     "AnalyzerBase::onLoweredCall(F, Call, IsIndirectCall);"),
    ("onFinalizeSwitch",
     "                        bool DefaultDestUnreachable) override {\n"
     "    if (JumpTableSize) {\n"
     "      if (!DefaultDestUnreachable)\n"
     "        increment(InlineCostFeatureIndex::switch_default_dest_penalty,\n",
     "AnalyzerBase::onFinalizeSwitch(JumpTableSize, NumCaseCluster,\n"
     "                                   DefaultDestUnreachable);"),
    ("onMissedSimplification",
     "  void onMissedSimplification() override {\n"
     "    increment(InlineCostFeatureIndex::unsimplified_common_instructions,\n",
     "AnalyzerBase::onMissedSimplification();"),
    ("onInitializeSROAArg",
     "  void onInitializeSROAArg(AllocaInst *Arg) override {\n"
     "    auto SROAArgCost = TTI.getCallerAllocaCost(&CandidateCall, Arg);\n"
     "    SROACosts[Arg] = SROAArgCost;\n",
     "AnalyzerBase::onInitializeSROAArg(Arg);"),
    ("onAggregateSROAUse",
     "  void onAggregateSROAUse(AllocaInst *Arg) override {\n"
     "    SROACosts.find(Arg)->second += InstrCost;\n",
     "AnalyzerBase::onAggregateSROAUse(Arg);"),
    ("onBlockAnalyzed",
     "  void onBlockAnalyzed(const BasicBlock *BB) override {\n"
     "    if (BB->getTerminator()->getNumSuccessors() > 1)\n"
     "      set(InlineCostFeatureIndex::is_multiple_blocks, 1);\n",
     "AnalyzerBase::onBlockAnalyzed(BB);"),
    ("onLoadEliminationOpportunity",
     "  void onLoadEliminationOpportunity() override {\n"
     "    increment(InlineCostFeatureIndex::load_elimination, 1);\n",
     "AnalyzerBase::onLoadEliminationOpportunity();"),
    ("finalizeAnalysis",
     "  InlineResult finalizeAnalysis() override {\n"
     "    auto *Caller = CandidateCall.getFunction();\n"
     "    if (Caller->hasMinSize()) {\n"
     "      DominatorTree DT(F);\n",
     "InlineResult BaseResult = AnalyzerBase::finalizeAnalysis();\n"
     "    if (!BaseResult.isSuccess())\n"
     "      return BaseResult;"),
    ("onAnalysisStart",
     "  InlineResult onAnalysisStart() override {\n"
     "    increment(InlineCostFeatureIndex::callsite_cost,\n",
     "InlineResult BaseResult = AnalyzerBase::onAnalysisStart();\n"
     "    if (!BaseResult.isSuccess())\n"
     "      return BaseResult;"),
]


def _hook_edit(name, anchor, base_call):
  """Inserts BASE_CALL as the first statement of the hook whose first lines are ANCHOR."""
  head, _, body = anchor.partition("{\n")
  return (f"merged walk: {name} runs the base hook", anchor,
          f"{head}{{\n    {base_call}\n{body}")


# The base-class members the features code reads: a dependent base needs them named.
_BASE_MEMBERS = ("CandidateCall", "DL", "DeadBlocks", "F", "GetAssumptionCache", "GetBFI",
                 "GetTLI", "NumConstantArgs", "NumConstantOffsetPtrArgs", "NumInstructions",
                 "NumInstructionsSimplified", "NumVectorInstructions", "ORE", "PSI", "TTI")

# InlineCost.cpp: the merged walk's entry point, with the options that restore upstream's
# two walks and check the merged one against them.
MERGED_ENTRY_POINT = """\
// mlgo (llvm_patches/source_edits.py): the ML inline advisor's cost estimate and cost
// features of one call site from one walk of the callee.
static cl::opt<bool> MlgoMergedCostWalk(
    "mlgo-merged-cost-walk", cl::Hidden, cl::init(true),
    cl::desc("One walk of the callee for the ML inline advisor's cost estimate and "
             "cost features (0: upstream's two walks)"));
static cl::opt<bool> MlgoCheckMergedCostWalk(
    "mlgo-check-merged-cost-walk", cl::Hidden, cl::init(false),
    cl::desc("Also compute the estimate and features with upstream's two walks and "
             "stop at the first difference"));

namespace llvm {
// *Reusable: whether the result depends on nothing but the callee's body and what
// mlgo's walk cache keys on (MLInlineAdvisor.cpp): false when the walk read another
// function's body or the features needed a walk of their own.
std::optional<std::pair<int, InlineCostFeatures>>
mlgoGetInliningCostEstimateAndFeatures(
    CallBase &Call, TargetTransformInfo &CalleeTTI,
    function_ref<AssumptionCache &(Function &)> GetAssumptionCache,
    bool *Reusable) {
  using Result = std::optional<std::pair<int, InlineCostFeatures>>;
  *Reusable = false;
  auto TwoWalks = [&]() -> Result {
    auto Estimate = getInliningCostEstimate(Call, CalleeTTI, GetAssumptionCache);
    if (!Estimate)
      return std::nullopt;
    auto Features = getInliningCostFeatures(Call, CalleeTTI, GetAssumptionCache);
    if (!Features)
      return std::nullopt;
    return std::make_pair(*Estimate, *Features);
  };
  if (!MlgoMergedCostWalk)
    return TwoWalks();
  // getInliningCostEstimate's parameters and analyzer, with the features on top.
  const InlineParams Params = {/* DefaultThreshold*/ 0,
                               /*HintThreshold*/ {},
                               /*ColdThreshold*/ {},
                               /*OptSizeThreshold*/ {},
                               /*OptMinSizeThreshold*/ {},
                               /*HotCallSiteThreshold*/ {},
                               /*LocallyHotCallSiteThreshold*/ {},
                               /*ColdCallSiteThreshold*/ {},
                               /*ComputeFullInlineCost*/ true,
                               /*EnableDeferral*/ true};
  InlineCostFeaturesAnalyzerT<InlineCostCallAnalyzer> Analyzer(
      std::in_place, *Call.getCalledFunction(), Call, Params, CalleeTTI,
      GetAssumptionCache, /*GetBFI=*/nullptr, /*GetTLI=*/nullptr, /*PSI=*/nullptr,
      /*ORE=*/nullptr, /*BoostIndirect=*/true, /*IgnoreThreshold=*/true);
  Result Merged;
  bool Success = Analyzer.analyze().isSuccess();
  *Reusable = !Analyzer.walkDiverged() && !Analyzer.resolvedIndirectCall();
  if (Success) {
    if (!Analyzer.walkDiverged())
      Merged.emplace(Analyzer.getCost(), Analyzer.features());
    else if (auto Features =
                 getInliningCostFeatures(Call, CalleeTTI, GetAssumptionCache))
      Merged.emplace(Analyzer.getCost(), *Features);
  }
  if (MlgoCheckMergedCostWalk && Merged != TwoWalks())
    report_fatal_error(Twine("mlgo: the merged inline cost walk differs from "
                             "upstream's two walks at a call of ") +
                       Call.getCalledFunction()->getName() + " in " +
                       Call.getFunction()->getName());
  return Merged;
}
} // namespace llvm

"""

MODEL_MEMO_STATE = """\
// mlgo (llvm_patches/source_edits.py): the release-mode model is a pure function of its
// input tensors, and calls of one callee from one caller between two inlinings often
// give the same inputs: remember each answer (release mode only; an interactive or
// development runner must see every call).
static cl::opt<bool> MlgoModelMemo(
    "mlgo-model-memo", cl::Hidden, cl::init(true),
    cl::desc("Reuse the release-mode inlining model's answer for inputs already seen "
             "(0: evaluate the model at every call site)"));
static cl::opt<bool> MlgoCheckModelMemo(
    "mlgo-check-model-memo", cl::Hidden, cl::init(false),
    cl::desc("Evaluate the model at every call site and stop at the first answer that "
             "differs from the memo's"));

namespace {
struct MlgoModelMemoState {
  const void *Owner = nullptr;  // the advisor the answers belong to
  // xxh3 of the input bytes -> (the input bytes, the model's answer)
  DenseMap<uint64_t, std::pair<std::string, int64_t>> Answers;
};
// One per thread: several advisors (e.g. LTO backends) may run at once.
thread_local MlgoModelMemoState MlgoModelMemoOfThread;
constexpr size_t MlgoModelMemoMaxEntries = 1 << 14;
} // namespace
"""

MODEL_MEMO_LOOKUP = """\
std::unique_ptr<MLInlineAdvice>
MLInlineAdvisor::getAdviceFromModel(CallBase &CB,
                                    OptimizationRemarkEmitter &ORE) {
  // mlgo: the model's answer, from the memo when these inputs were seen before.
  if (!MlgoModelMemo || ModelRunner->getKind() != MLModelRunner::Kind::Release)
    return std::make_unique<MLInlineAdvice>(
        this, CB, ORE, static_cast<bool>(ModelRunner->evaluate<int64_t>()));
  auto &Memo = MlgoModelMemoOfThread;
  if (Memo.Owner != this || Memo.Answers.size() >= MlgoModelMemoMaxEntries) {
    Memo.Answers.clear();
    Memo.Owner = this;
  }
  // The key: the bytes of every input tensor, in feature order.
  SmallString<512> Key;
  for (size_t I = 0, E = getFeatureMap().size(); I < E; ++I) {
    const char *Bytes = static_cast<const char *>(ModelRunner->getTensorUntyped(I));
    Key.append(Bytes, Bytes + getFeatureMap()[I].getTotalTensorBufferSize());
  }
  // (DenseMap reserves the two largest keys.)
  uint64_t Hash = std::min<uint64_t>(xxh3_64bits(Key.str()), ~uint64_t(0) - 2);
  auto [It, New] = Memo.Answers.try_emplace(Hash);
  if (New) {
    It->second = {Key.str().str(), ModelRunner->evaluate<int64_t>()};
  } else if (It->second.first != Key.str()) {
    // Another input with the same hash: evaluate, keep the first one's entry.
    return std::make_unique<MLInlineAdvice>(
        this, CB, ORE, static_cast<bool>(ModelRunner->evaluate<int64_t>()));
  } else if (MlgoCheckModelMemo &&
             ModelRunner->evaluate<int64_t>() != It->second.second) {
    report_fatal_error(Twine("mlgo: the inlining model's memo differs from the "
                             "model at a call of ") +
                       CB.getCalledFunction()->getName() + " in " +
                       CB.getFunction()->getName());
  }
  return std::make_unique<MLInlineAdvice>(this, CB, ORE,
                                          static_cast<bool>(It->second.second));
}
"""

WALK_CACHE = """\
// mlgo (llvm_patches/source_edits.py): a cache of cost walks, kept per callee as a
// function analysis, so that any pass that changes the callee drops it. The one change
// that does not go through the analysis manager at once is inlining itself: during an
// inliner run on an SCC, the SCC's functions (the callers) are edited and invalidated
// only when the run is done with each, so callees inside the current SCC are walked
// every time. Two walks of the same callee give the same estimate and features when the
// call sites look the same to the walk. The key is what the walk reads of a call site
// and its caller (InlineCost.cpp, CallAnalyzer::analyze and the hooks, as the advisor
// calls them: no BFI, no PSI): the caller's minsize, optsize and inline-max-stacksize
// attributes and whether it calls itself; the call's and the callee's attributes,
// whether the call's block ends in unreachable (allowSizeGrowth) and whether it is the
// only call of a local callee; per argument its constant or its identity among the
// arguments, and for a pointer its base, constant offset and whether the base is an
// alloca. The TargetTransformInfo hooks that see the caller are constant on x86 only, so
// other targets are walked every time, as are calls that cannot be keyed exactly.
static cl::opt<bool> MlgoWalkCache(
    "mlgo-walk-cache", cl::Hidden, cl::init(true),
    cl::desc("Reuse the cost walk of a callee outside the inliner's current SCC at a "
             "call site that looks the same to the walk (0: walk at every call site)"));
static cl::opt<bool> MlgoCheckWalkCache(
    "mlgo-check-walk-cache", cl::Hidden, cl::init(false),
    cl::desc("Walk at every call site and stop at the first result that differs from "
             "the walk cache's"));

namespace {
using MlgoWalkResult = std::optional<std::pair<int, InlineCostFeatures>>;
using MlgoWalkKey = SmallVector<uint64_t, 32>;
// The walks of one callee: invalidated (the default) unless a pass preserves all.
class MlgoWalkCacheAnalysis : public AnalysisInfoMixin<MlgoWalkCacheAnalysis> {
  friend AnalysisInfoMixin<MlgoWalkCacheAnalysis>;
  static AnalysisKey Key;

public:
  struct Result {
    SmallVector<std::pair<MlgoWalkKey, MlgoWalkResult>, 2> Walks;
  };
  Result run(Function &, FunctionAnalysisManager &) { return Result(); }
};
AnalysisKey MlgoWalkCacheAnalysis::Key;
constexpr unsigned MlgoWalksPerCallee = 8;

struct MlgoWalkCacheState {
  const void *Owner = nullptr;  // the advisor, during an inliner run on an SCC
  SmallPtrSet<const Function *, 8> Scope;  // that SCC's functions at the run's start
};
thread_local MlgoWalkCacheState MlgoWalkCacheOfThread;

void mlgoWalkCacheReset(const void *Owner, LazyCallGraph::SCC *SCC) {
  auto &S = MlgoWalkCacheOfThread;
  S.Scope.clear();
  S.Owner = SCC ? Owner : nullptr;
  if (SCC)
    for (LazyCallGraph::Node &N : *SCC)
      S.Scope.insert(&N.getFunction());
}

uint64_t mlgoIdentity(const Value *V, SmallVectorImpl<const Value *> &Seen) {
  for (unsigned I = 0; I < Seen.size(); ++I)
    if (Seen[I] == V)
      return I;
  Seen.push_back(V);
  return Seen.size() - 1;
}

// A pointer argument as analyze() sees it (stripAndComputeInBoundsConstantOffsets):
// no entry when an inbounds-GEP chain stops at a non-constant index or a GEP that is
// not inbounds, else its base and constant offset. False: cannot mirror it exactly.
bool mlgoPointerKey(const DataLayout &DL, const Value *V, MlgoWalkKey &Key,
                    SmallVectorImpl<const Value *> &Seen, const Value **BaseOut) {
  unsigned Width = DL.getIndexTypeSizeInBits(V->getType());
  APInt Offset(Width, 0);
  SmallPtrSet<const Value *, 4> Visited;
  Visited.insert(V);
  do {
    if (auto *GEP = dyn_cast<GEPOperator>(V)) {
      if (!GEP->isInBounds() ||
          !all_of(GEP->indices(), [](const Use &U) { return isa<ConstantInt>(U); })) {
        Key.push_back(0);  // no entry
        *BaseOut = nullptr;
        return true;
      }
      APInt GEPOffset(Width, 0);
      if (!GEP->accumulateConstantOffset(DL, GEPOffset))
        return false;
      Offset += GEPOffset;
      V = GEP->getPointerOperand();
    } else if (isa<GlobalAlias>(V)) {
      return false;
    } else {
      break;
    }
  } while (Visited.insert(V).second);
  if (Offset.getSignificantBits() > 63)
    return false;
  Key.push_back(1);
  Key.push_back(static_cast<uint64_t>(Offset.getSExtValue()));
  if (auto *C = dyn_cast<Constant>(V)) {
    // As for constant arguments: only constants that live as long as the module.
    if (!isa<ConstantData>(C) && !isa<GlobalVariable>(C))
      return false;
    Key.push_back(2);
    Key.push_back(reinterpret_cast<uintptr_t>(C));
  } else {
    Key.push_back(3);
    Key.push_back(mlgoIdentity(V, Seen));
  }
  Key.push_back(isa<AllocaInst>(V));
  *BaseOut = V;
  return true;
}

bool mlgoWalkKey(CallBase &CB, MlgoWalkKey &Key) {
  Function &Callee = *CB.getCalledFunction();
  Function &Caller = *CB.getCaller();
  if (!Callee.getParent()->getTargetTriple().isX86())
    return false;
  const DataLayout &DL = Callee.getDataLayout();
  bool CallerRecursive = false;
  for (const User *U : Caller.users())
    if (auto *Call = dyn_cast<CallBase>(U); Call && Call->getFunction() == &Caller) {
      CallerRecursive = true;
      break;
    }
  const BasicBlock *ReturnsTo = CB.getParent();
  if (auto *Invoke = dyn_cast<InvokeInst>(&CB))
    ReturnsTo = Invoke->getNormalDest();
  Key.push_back(Caller.hasMinSize());
  Key.push_back(Caller.hasOptSize());
  Key.push_back(reinterpret_cast<uintptr_t>(
      Caller.getFnAttribute(InlineConstants::MaxInlineStackSizeAttributeName)
          .getRawPointer()));
  Key.push_back(CallerRecursive);
  Key.push_back(reinterpret_cast<uintptr_t>(CB.getAttributes().getRawPointer()));
  Key.push_back(reinterpret_cast<uintptr_t>(Callee.getAttributes().getRawPointer()));
  Key.push_back(isa<UnreachableInst>(ReturnsTo->getTerminator()));
  Key.push_back(Callee.hasLocalLinkage() && Callee.hasOneLiveUse());
  Key.push_back(CB.arg_size());
  SmallVector<const Value *, 16> Seen;
  for (const Use &U : CB.args()) {
    const Value *A = U.get();
    const Value *Base = nullptr;
    bool IsPointer = A->getType()->isPointerTy();
    if (IsPointer && !mlgoPointerKey(DL, A, Key, Seen, &Base))
      return false;
    if (auto *C = dyn_cast<Constant>(A)) {
      // Plain data or a global variable: they live as long as the module. (A
      // function, or a constant holding one, could make an indirect call direct;
      // a constant expression can be destroyed and its address reused.)
      if (!isa<ConstantData>(C) && !isa<GlobalVariable>(C))
        return false;
      Key.push_back(4);
      Key.push_back(reinterpret_cast<uintptr_t>(C));
    } else {
      // extractvalue looks into the caller's aggregates.
      if (A->getType()->isAggregateType())
        return false;
      Key.push_back(5);
      Key.push_back(mlgoIdentity(A, Seen));
    }
  }
  return true;
}

// The cost estimate and features of CB, from the walk cache when it has them.
MlgoWalkResult
mlgoCostWalkCached(const void *Advisor, FunctionAnalysisManager &FAM, CallBase &CB,
                   TargetTransformInfo &TIR,
                   function_ref<AssumptionCache &(Function &)> GetAssumptionCache) {
  auto &S = MlgoWalkCacheOfThread;
  Function &Callee = *CB.getCalledFunction();
  MlgoWalkKey Key;
  bool Keyed = MlgoWalkCache && S.Owner == Advisor && !S.Scope.contains(&Callee) &&
               mlgoWalkKey(CB, Key);
  bool Reusable = false;
  // (Analysis results stay where they are until invalidated; the walk invalidates none.)
  auto *Walks = Keyed ? &FAM.getResult<MlgoWalkCacheAnalysis>(Callee).Walks : nullptr;
  if (Walks)
    for (auto &[K, R] : *Walks)
      if (K == Key) {
        if (MlgoCheckWalkCache &&
            llvm::mlgoGetInliningCostEstimateAndFeatures(
                CB, TIR, GetAssumptionCache, &Reusable) != R)
          report_fatal_error(Twine("mlgo: the walk cache differs from a new walk at "
                                   "a call of ") +
                             Callee.getName() + " in " + CB.getCaller()->getName());
        return R;
      }
  MlgoWalkResult R = llvm::mlgoGetInliningCostEstimateAndFeatures(
      CB, TIR, GetAssumptionCache, &Reusable);
  if (Walks && Reusable && Walks->size() < MlgoWalksPerCallee)
    Walks->emplace_back(std::move(Key), R);
  return R;
}
} // namespace
"""

COMPAT_MEMO = """\
// mlgo (llvm_patches/source_edits.py): a memo of functionsHaveCompatibleAttributes per
// pair of attribute lists, active only during the ML inline advisor's inliner runs
// (the advisor switches it on and off: attribute lists live as long as its module).
static cl::opt<bool> MlgoCompatMemo(
    "mlgo-compat-memo", cl::Hidden, cl::init(true),
    cl::desc("Remember the inline-compatibility checks of a caller and callee per pair "
             "of attribute lists during ML inliner runs (0: check every time)"));
static cl::opt<bool> MlgoCheckCompatMemo(
    "mlgo-check-compat-memo", cl::Hidden, cl::init(false),
    cl::desc("Check every time and stop where the memo's answer differs"));

namespace {
struct MlgoCompatMemoState {
  const void *Owner = nullptr;  // the advisor whose module the lists belong to
  bool Active = false;
  // (caller's list, callee's list) -> (the checks read only these lists, their answer)
  DenseMap<std::pair<const void *, const void *>, std::pair<bool, bool>> Answers;
};
MlgoCompatMemoState &mlgoCompatMemo() {
  static thread_local MlgoCompatMemoState State;
  return State;
}
} // namespace

namespace llvm {
// Called by the ML inline advisor: on at its inliner runs' entry, off at their exit.
// Another advisor's answers are dropped (its module, and so its lists, may be gone).
void mlgoCompatMemoSwitch(const void *Advisor, bool Active) {
  auto &Memo = mlgoCompatMemo();
  if (Memo.Owner != Advisor) {
    Memo = MlgoCompatMemoState();
    Memo.Owner = Advisor;
  }
  Memo.Active = Active;
}
// Called by a new advisor: one at the same address as the owner is another advisor.
void mlgoCompatMemoForget(const void *Advisor) {
  if (mlgoCompatMemo().Owner == Advisor)
    mlgoCompatMemo() = MlgoCompatMemoState();
}
} // namespace llvm

// The attributes X86TargetMachine::getSubtargetImpl reads: equal in caller and callee,
// the subtarget features are equal and X86TTIImpl::areInlineCompatible reads no more.
static bool mlgoCompatDependsOnAttributesOnly(const Function &Caller,
                                              const Function &Callee) {
  if (!Caller.getParent()->getTargetTriple().isX86())
    return false;
  for (StringRef Name : {"target-cpu", "tune-cpu", "target-features", "use-soft-float",
                         "prefer-vector-width", "min-legal-vector-width"})
    if (Caller.getFnAttribute(Name) != Callee.getFnAttribute(Name))
      return false;
  return true;
}

"""

FPI_OPTIONS = """\
// mlgo (llvm_patches/source_edits.py): the options of mlgo's edits in this file.
static cl::opt<bool> MlgoFPIUpdateLoopStats(
    "mlgo-fpi-update-loop-stats", cl::Hidden, cl::init(false),
    cl::desc("Recompute the caller's LoopInfo and loop statistics after each "
             "inlining, and compute them for the ML inline advisor (mlgo skips them: "
             "no inlining model reads them)"));
static cl::opt<bool> MlgoFPIFast(
    "mlgo-fpi-fast", cl::Hidden, cl::init(true),
    cl::desc("Compute the ML inline advisor's function properties without LoopInfo "
             "and without a new dominator tree (0: upstream's computation)"));
static cl::opt<bool> MlgoCheckFPIFast(
    "mlgo-check-fpi-fast", cl::Hidden, cl::init(false),
    cl::desc("Also compute the function properties upstream's way and stop at the "
             "first difference"));

namespace llvm {
// Non-zero while the ML inline advisor asks for a function's properties
// (MLInlineAdvisor.cpp, edited): only its requests take the fast path, so that other
// users (e.g. opt's print<func-properties>) still get the loop statistics.
unsigned &mlgoFPIForInlineAdvisor() {
  static thread_local unsigned Depth = 0;
  return Depth;
}
} // namespace llvm
"""

FPI_FAST = """\
  // mlgo (llvm_patches/source_edits.py): for the ML inline advisor, which reads no
  // loop statistics, skip LoopInfo; and unless a dominator tree is at hand, find the
  // blocks reachable from the entry with a walk (the blocks a dominator tree holds)
  // instead of building one. Blocks are included in function order, as upstream's,
  // so an IR2Vec embedding sums in the same order.
  if (MlgoFPIFast && !MlgoFPIUpdateLoopStats && mlgoFPIForInlineAdvisor() &&
      !F.empty()) {
    FunctionPropertiesInfo FPI;
    if (Vocabulary && Vocabulary->isValid()) {
      FPI.IR2VecVocab = Vocabulary;
      FPI.FunctionEmbedding = ir2vec::Embedding(Vocabulary->getDimension(), 0.0);
    }
    const auto *DT = FAM.getCachedResult<DominatorTreeAnalysis>(F);
    SmallPtrSet<const BasicBlock *, 32> Reached;
    if (!DT) {
      SmallVector<const BasicBlock *, 32> Work{&F.getEntryBlock()};
      Reached.insert(&F.getEntryBlock());
      while (!Work.empty())
        for (const BasicBlock *Succ : successors(Work.pop_back_val()))
          if (Reached.insert(Succ).second)
            Work.push_back(Succ);
    }
    for (const auto &BB : F)
      if (DT ? DT->isReachableFromEntry(&BB) : Reached.contains(&BB))
        FPI.reIncludeBB(BB);
    FPI.Uses = getUses(F);  // updateAggregateStats, less the loop statistics
    if (MlgoCheckFPIFast) {
      auto Upstream = getFunctionPropertiesInfo(
          F, FAM.getResult<DominatorTreeAnalysis>(F), FAM.getResult<LoopAnalysis>(F),
          Vocabulary);
      Upstream.TopLevelLoopCount = 0;
      Upstream.MaxLoopDepth = 0;
      if (!(Upstream == FPI))
        report_fatal_error(Twine("mlgo: the fast function properties differ from "
                                 "upstream's for ") + F.getName());
    }
    return FPI;
  }
  return getFunctionPropertiesInfo(F, FAM.getResult<DominatorTreeAnalysis>(F),
                                   FAM.getResult<LoopAnalysis>(F), Vocabulary);
}
"""

# {relative path: [(edit name, anchor, replacement)]}
EDITS = {
    FPI_SOURCE: [
        _after("fpi-fast: includes", "#include \"llvm/ADT/SetVector.h\"\n",
               "#include \"llvm/ADT/SmallPtrSet.h\"          // mlgo: fpi-fast\n"
               "#include \"llvm/Support/ErrorHandling.h\"    // mlgo: fpi-fast\n"),
        _after("fpi options",
               "    cl::desc(\"The minimum number of arguments a function call must have before \"\n"
               "             \"it is considered having many arguments.\"));\n",
               "\n" + FPI_OPTIONS),
        _prefix("fpi-fast: a count for the block's one loop",
                "  for (const auto &I : BB) {\n"
                "    if (auto *CS = dyn_cast<CallBase>(&I)) {\n",
                "  // mlgo: BasicBlock::sizeWithoutDebug's count (its filter: no debug intrinsic, no\n"
                "  // pseudo probe), taken in this loop instead of a second walk through a\n"
                "  // std::function filter.\n"
                "  int64_t Size = 0;\n"),
        ("fpi-fast: the instruction count in the block's one loop",
         "      StoreInstCount += Direction;\n"
         "    }\n"
         "  }\n"
         "  TotalInstructionCount += Direction * BB.sizeWithoutDebug();\n",
         "      StoreInstCount += Direction;\n"
         "    }\n"
         "    Size += !isa<DbgInfoIntrinsic>(I) && !isa<PseudoProbeInst>(I);\n"
         "  }\n"
         "  if (!MlgoFPIFast)\n"
         "    Size = BB.sizeWithoutDebug();\n"
         "  else if (MlgoCheckFPIFast && Size != int64_t(BB.sizeWithoutDebug()))\n"
         "    report_fatal_error(Twine(\"mlgo: the function properties' instruction count \"\n"
         "                             \"differs from sizeWithoutDebug in \") +\n"
         "                       BB.getParent()->getName());\n"
         "  TotalInstructionCount += Direction * Size;\n"),
        ("fpi-fast: the advisor's requests",
         "  return getFunctionPropertiesInfo(F, FAM.getResult<DominatorTreeAnalysis>(F),\n"
         "                                   FAM.getResult<LoopAnalysis>(F), Vocabulary);\n"
         "}\n",
         FPI_FAST),
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
    INLINE_COST_SOURCE: [
        ("merged walk: a derivable cost analyzer",
         "class InlineCostCallAnalyzer final : public CallAnalyzer {\n"
         "  const bool ComputeFullInlineCost;\n",
         "// mlgo (llvm_patches/source_edits.py): not final, and its hooks protected, so that\n"
         "// the features analyzer can run over it (one walk for the estimate and features).\n"
         "class InlineCostCallAnalyzer : public CallAnalyzer {\n"
         "protected:\n"
         "  const bool ComputeFullInlineCost;\n"),
        ("merged walk: the features analyzer as a mixin",
         "class InlineCostFeaturesAnalyzer final : public CallAnalyzer {\n"
         "private:\n",
         "// mlgo: the features analyzer over a base analyzer. Over CallAnalyzer it is\n"
         "// upstream's InlineCostFeaturesAnalyzer (the base hooks do nothing); over\n"
         "// InlineCostCallAnalyzer one walk of the callee gives the cost estimate and the\n"
         "// features, each hook running the base's hook first.\n"
         "template <typename AnalyzerBase>\n"
         "class InlineCostFeaturesAnalyzerT final : public AnalyzerBase {\n"
         + "".join(f"  using AnalyzerBase::{m};\n" for m in _BASE_MEMBERS) +
         "\n"
         "  // Set when the base skipped a call's body (\"call-inline-cost\"): the features\n"
         "  // of this walk then differ from a features-only walk.\n"
         "  bool WalkDiverged = false;\n"
         "\n"
         "  // Set when an indirect call's target is known in this walk (e.g. a function\n"
         "  // passed in): the walk then read another function's body, which a cache of\n"
         "  // walks keyed on the callee and the call site would not see change.\n"
         "  bool ResolvedIndirectCall = false;\n"
         "\n"
         "  bool onCallBaseVisitStart(CallBase &Call) override {\n"
         "    bool Visit = AnalyzerBase::onCallBaseVisitStart(Call);\n"
         "    WalkDiverged |= !Visit;\n"
         "    if (!Call.getCalledFunction() &&\n"
         "        this->SimplifiedValues.lookup(Call.getCalledOperand()))\n"
         "      ResolvedIndirectCall = true;\n"
         "    return Visit;\n"
         "  }\n"
         "\n"
         "private:\n"),
        *[_hook_edit(*h) for h in _FEATURE_HOOKS],
        ("merged walk: features' lowered call adds its own call penalty",
         "    } else {\n"
         "      onCallPenalty();\n"
         "    }\n",
         "    } else {\n"
         "      // mlgo: the features' own penalty, not the virtual hook (over the cost\n"
         "      // analyzer that hook would also add a cost this path does not add).\n"
         "      increment(InlineCostFeatureIndex::call_penalty, CallPenalty);\n"
         "    }\n"),
        ("merged walk: features' shouldStop asks the base",
         "  bool shouldStop() override { return false; }\n"
         "\n"
         "  void onLoadEliminationOpportunity() override {\n",
         "  bool shouldStop() override { return AnalyzerBase::shouldStop(); }\n"
         "\n"
         "  void onLoadEliminationOpportunity() override {\n"),
        ("merged walk: constructors",
         "public:\n"
         "  InlineCostFeaturesAnalyzer(\n"
         "      const TargetTransformInfo &TTI,\n",
         "public:\n"
         "  // mlgo: over another base, that base's constructor arguments.\n"
         "  template <typename... BaseArgs>\n"
         "  explicit InlineCostFeaturesAnalyzerT(std::in_place_t, BaseArgs &&...Args)\n"
         "      : AnalyzerBase(std::forward<BaseArgs>(Args)...) {}\n"
         "\n"
         "  bool walkDiverged() const { return WalkDiverged; }\n"
         "  bool resolvedIndirectCall() const { return ResolvedIndirectCall; }\n"
         "\n"
         "  InlineCostFeaturesAnalyzerT(\n"
         "      const TargetTransformInfo &TTI,\n"),
        ("merged walk: upstream's name for the features analyzer",
         "      : CallAnalyzer(Callee, Call, TTI, GetAssumptionCache, GetBFI, GetTLI,\n"
         "                     PSI) {}\n"
         "\n"
         "  const InlineCostFeatures &features() const { return Cost; }\n"
         "};\n",
         "      : AnalyzerBase(Callee, Call, TTI, GetAssumptionCache, GetBFI, GetTLI,\n"
         "                     PSI) {}\n"
         "\n"
         "  const InlineCostFeatures &features() const { return Cost; }\n"
         "};\n"
         "\n"
         "using InlineCostFeaturesAnalyzer = InlineCostFeaturesAnalyzerT<CallAnalyzer>;\n"),
        _prefix("compat memo: state and options",
                "/// Test that there are no attribute conflicts between Caller and Callee\n",
                COMPAT_MEMO),
        ("compat memo: the checks, remembered",
         "  auto CalleeTLI = GetTLI(*Callee);\n"
         "  return (IgnoreTTIInlineCompatible ||\n"
         "          TTI.areInlineCompatible(Caller, Callee)) &&\n"
         "         GetTLI(*Caller).areInlineCompatible(CalleeTLI,\n"
         "                                             InlineCallerSupersetNoBuiltin) &&\n"
         "         AttributeFuncs::areInlineCompatible(*Caller, *Callee);\n"
         "}\n",
         "  auto Check = [&] {\n"
         "    auto CalleeTLI = GetTLI(*Callee);\n"
         "    return (IgnoreTTIInlineCompatible ||\n"
         "            TTI.areInlineCompatible(Caller, Callee)) &&\n"
         "           GetTLI(*Caller).areInlineCompatible(CalleeTLI,\n"
         "                                               InlineCallerSupersetNoBuiltin) &&\n"
         "           AttributeFuncs::areInlineCompatible(*Caller, *Callee);\n"
         "  };\n"
         "  // mlgo: remembered per pair of attribute lists (COMPAT_MEMO above).\n"
         "  auto &Memo = mlgoCompatMemo();\n"
         "  if (!MlgoCompatMemo || !Memo.Active)\n"
         "    return Check();\n"
         "  auto [It, New] = Memo.Answers.try_emplace(\n"
         "      {Caller->getAttributes().getRawPointer(),\n"
         "       Callee->getAttributes().getRawPointer()},\n"
         "      false, false);\n"
         "  auto &[AttributesOnly, Compatible] = It->second;\n"
         "  if (New) {\n"
         "    AttributesOnly = mlgoCompatDependsOnAttributesOnly(*Caller, *Callee);\n"
         "    Compatible = AttributesOnly && Check();\n"
         "  }\n"
         "  if (!AttributesOnly)\n"
         "    return Check();\n"
         "  if (!New && MlgoCheckCompatMemo && Check() != Compatible)\n"
         "    report_fatal_error(Twine(\"mlgo: the inline-compatibility memo differs \"\n"
         "                             \"from the checks for \") +\n"
         "                       Caller->getName() + \" and \" + Callee->getName());\n"
         "  return Compatible;\n"
         "}\n"),
        _prefix("merged walk: the entry point",
                "std::optional<InlineResult> llvm::getAttributeBasedInliningDecision(\n",
                MERGED_ENTRY_POINT),
    ],
    ML_INLINE_ADVISOR_SOURCE: [
        _after("merged walk: declaration", "using namespace llvm;\n",
               "\n"
               "// mlgo (llvm_patches/source_edits.py): defined in InlineCost.cpp (edited).\n"
               "namespace llvm {\n"
               "std::optional<std::pair<int, InlineCostFeatures>>\n"
               "mlgoGetInliningCostEstimateAndFeatures(\n"
               "    CallBase &Call, TargetTransformInfo &CalleeTTI,\n"
               "    function_ref<AssumptionCache &(Function &)> GetAssumptionCache,\n"
               "    bool *Reusable);\n"
               "// mlgo: the inline-compatibility memo's switches (InlineCost.cpp, edited).\n"
               "void mlgoCompatMemoSwitch(const void *Advisor, bool Active);\n"
               "void mlgoCompatMemoForget(const void *Advisor);\n"
               "// mlgo: non-zero while the advisor asks for function properties\n"
               "// (FunctionPropertiesAnalysis.cpp, edited: its fast path).\n"
               "unsigned &mlgoFPIForInlineAdvisor();\n"
               "} // namespace llvm\n"
               "\n" + WALK_CACHE),
        ("merged walk: one call for the estimate and the features",
         "  int CostEstimate = 0;\n"
         "  if (!Mandatory) {\n"
         "    auto IsCallSiteInlinable =\n"
         "        llvm::getInliningCostEstimate(CB, TIR, GetAssumptionCache);\n"
         "    if (!IsCallSiteInlinable) {\n"
         "      // We can't inline this for correctness reasons, so return the base\n"
         "      // InlineAdvice, as we don't care about tracking any state changes (which\n"
         "      // won't happen).\n"
         "      return std::make_unique<InlineAdvice>(this, CB, ORE, false);\n"
         "    }\n"
         "    CostEstimate = *IsCallSiteInlinable;\n"
         "  }\n"
         "\n"
         "  const auto CostFeatures =\n"
         "      llvm::getInliningCostFeatures(CB, TIR, GetAssumptionCache);\n"
         "  if (!CostFeatures) {\n"
         "    return std::make_unique<InlineAdvice>(this, CB, ORE, false);\n"
         "  }\n",
         "  // mlgo: the estimate and the features from one walk of the callee; no result\n"
         "  // means the call cannot be inlined (as either of upstream's two calls failing).\n"
         "  int CostEstimate = 0;\n"
         "  std::optional<InlineCostFeatures> CostFeatures;\n"
         "  if (!Mandatory) {\n"
         "    auto Both = mlgoCostWalkCached(this, FAM, CB, TIR, GetAssumptionCache);\n"
         "    if (!Both)\n"
         "      return std::make_unique<InlineAdvice>(this, CB, ORE, false);\n"
         "    CostEstimate = Both->first;\n"
         "    CostFeatures = Both->second;\n"
         "  } else {\n"
         "    CostFeatures = llvm::getInliningCostFeatures(CB, TIR, GetAssumptionCache);\n"
         "    if (!CostFeatures)\n"
         "      return std::make_unique<InlineAdvice>(this, CB, ORE, false);\n"
         "  }\n"),
        ("fpi-fast: the advisor's requests take the fast path",
         "  InsertPair.first->second = FAM.getResult<FunctionPropertiesAnalysis>(F);\n",
         "  ++mlgoFPIForInlineAdvisor();  // mlgo: fpi-fast\n"
         "  InsertPair.first->second = FAM.getResult<FunctionPropertiesAnalysis>(F);\n"
         "  --mlgoFPIForInlineAdvisor();\n"),
        _after("model memo: includes", "#include \"llvm/Support/CommandLine.h\"\n",
               "#include \"llvm/ADT/DenseMap.h\"      // mlgo: model memo\n"
               "#include \"llvm/ADT/SmallString.h\"   // mlgo: model memo\n"
               "#include \"llvm/Support/xxhash.h\"    // mlgo: model memo\n"
               "#include <string>                     // mlgo: model memo\n"
               "#include \"llvm/ADT/SmallPtrSet.h\"   // mlgo: walk cache\n"
               "#include \"llvm/IR/GlobalAlias.h\"    // mlgo: walk cache\n"
               "#include \"llvm/IR/GlobalVariable.h\" // mlgo: walk cache\n"
               "#include \"llvm/IR/Operator.h\"       // mlgo: walk cache\n"
               "#include \"llvm/TargetParser/Triple.h\" // mlgo: walk cache\n"),
        _after("model memo: options and per-thread state", "using namespace llvm;\n",
               "\n" + MODEL_MEMO_STATE),
        _after("model memo: a new advisor does not inherit answers from the address's "
               "last owner",
               "      PSI(MAM.getResult<ProfileSummaryAnalysis>(M)) {\n",
               "  if (MlgoModelMemoOfThread.Owner == this)  // mlgo: model memo\n"
               "    MlgoModelMemoOfThread = MlgoModelMemoState();\n"
               "  mlgoCompatMemoForget(this);  // mlgo: compat memo\n"
               "  FAM.registerPass([] { return MlgoWalkCacheAnalysis(); });  // mlgo\n"),
        _after("walk cache: a new inliner run starts a new cache",
               "void MLInlineAdvisor::onPassEntry(LazyCallGraph::SCC *CurSCC) {\n",
               "  mlgoWalkCacheReset(this, CurSCC);  // mlgo: walk cache\n"
               "  mlgoCompatMemoSwitch(this, CurSCC != nullptr);  // mlgo: compat memo\n"),
        _after("walk cache: and ends it",
               "void MLInlineAdvisor::onPassExit(LazyCallGraph::SCC *CurSCC) {\n",
               "  mlgoWalkCacheReset(nullptr, nullptr);  // mlgo: walk cache\n"
               "  mlgoCompatMemoSwitch(this, false);     // mlgo: compat memo\n"),
        ("model memo: remember the model's answers",
         "std::unique_ptr<MLInlineAdvice>\n"
         "MLInlineAdvisor::getAdviceFromModel(CallBase &CB,\n"
         "                                    OptimizationRemarkEmitter &ORE) {\n"
         "  return std::make_unique<MLInlineAdvice>(\n"
         "      this, CB, ORE, static_cast<bool>(ModelRunner->evaluate<int64_t>()));\n"
         "}\n",
         MODEL_MEMO_LOOKUP),
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
