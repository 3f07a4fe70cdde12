// Default-decision tracer for the greedy register allocator of a stock LLVM 22,
// loaded into llc with `llc -load=libregalloc_trace.so ...`.
//
// Stock LLVM's interactive eviction and priority channels send the features but
// not what the default heuristic would have decided, so a behavioral-cloning warm
// start has no labels. This plugin fills that gap without rebuilding LLVM:
//
// * At load time it replaces the constructor registered for the legacy analyses
//   RegAllocEvictionAdvisorAnalysisLegacy and RegAllocPriorityAdvisorAnalysisLegacy
//   (PassInfo::setNormalCtor) with one that builds a wrapping analysis.
// * The wrapping analysis keeps the mode the command line asked for
//   (-regalloc-enable-advisor / -regalloc-enable-priority-advisor): in default
//   mode it only wraps the default advisor; in release mode it also owns the
//   ML advisor of that mode (which talks over the interactive channel).
// * Each decision asks both. The default's answer is what the allocator uses
//   (so the compile is exactly the default one), unless
//   -regalloc-trace-follow-policy is given. The default's answer is written to a
//   log in LLVM's training-log format, one observation per observation the ML
//   advisor sent over the channel, so the two streams line up by index.
//
// Eviction: the default answer is a physical register; it is logged as the
// column the ML advisor uses for it (its position in the allocation order, or 32
// for "evict nothing"). The channel's feature columns follow the same order.
// Detecting whether the ML advisor sent an observation relies on the driver: in
// trace mode the driver answers a valid column below 32, so the ML advisor
// returns a register exactly when it asked (it returns no register, without
// asking, when no column is available).
//
// Priority: the ML advisor asks for every live range; the default priority is
// logged as a float next to the one the channel answered.
//
// Guarded compiles (-regalloc-trace-policy-functions=FILE): only the functions
// the file names are allocated with the ML advisor's decisions; every other
// function gets the default's, without the ML advisor being asked. Greedy
// allocation of one function does not depend on another's, so after a default
// compile and a policy compile, a third compile that names the functions the
// policy made cheaper yields, function by function, the better of the two
// (mlgo.env.guarded).
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/CodeGen/LiveInterval.h"
#include "llvm/CodeGen/MachineBlockFrequencyInfo.h"
#include "llvm/CodeGen/MachineFunction.h"
#include "llvm/CodeGen/MachineLoopInfo.h"
#include "llvm/CodeGen/RegAllocEvictionAdvisor.h"
#include "llvm/CodeGen/RegAllocPriorityAdvisor.h"
#include "llvm/CodeGen/SlotIndexes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/GlobalValue.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/InitializePasses.h"
#include "llvm/Pass.h"
#include "llvm/PassInfo.h"
#include "llvm/PassRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

using namespace llvm;

namespace {

cl::opt<std::string> EvictTraceLog(
    "regalloc-evict-trace-log", cl::Hidden, cl::init(""),
    cl::desc("mlgo tracer: write the default eviction decisions (training-log "
             "format) to this file"));

cl::opt<std::string> PriorityTraceLog(
    "regalloc-priority-trace-log", cl::Hidden, cl::init(""),
    cl::desc("mlgo tracer: write the default priorities (training-log format) "
             "to this file"));

cl::opt<std::string> ScoreLog(
    "regalloc-score-log", cl::Hidden, cl::init(""),
    cl::desc("mlgo tracer: write each function's RegAllocScore (LLVM's weighted "
             "copy/load/store/remat cost, computed by the scoring pass after "
             "allocation) to this file, one observation per function"));

cl::opt<bool> FollowPolicy(
    "regalloc-trace-follow-policy", cl::Hidden, cl::init(false),
    cl::desc("mlgo tracer: when the ML advisor is active, allocate with its "
             "decisions (still logging the default's) instead of the default's"));

cl::opt<std::string> PolicyFunctions(
    "regalloc-trace-policy-functions", cl::Hidden, cl::init(""),
    cl::desc("mlgo tracer: a file with one function name per line; when the ML "
             "advisor is active, only these functions are allocated with its "
             "decisions, the others with the default's (the ML advisor is not "
             "asked for them)"));

// The functions -regalloc-trace-policy-functions names; Loaded=false when the
// option is not given (every function follows -regalloc-trace-follow-policy).
struct FunctionSelection {
  bool Loaded = false;
  StringSet<> Names;

  void load(LLVMContext &Ctx) {
    if (PolicyFunctions.empty() || Loaded)
      return;
    Loaded = true;
    auto Buf = MemoryBuffer::getFile(PolicyFunctions, /*IsText=*/true);
    if (!Buf) {
      Ctx.emitError("mlgo regalloc tracer: cannot read " + PolicyFunctions +
                    ": " + Buf.getError().message());
      return;
    }
    SmallVector<StringRef, 64> Lines;
    (*Buf)->getBuffer().split(Lines, '\n', -1, /*KeepEmpty=*/false);
    for (StringRef L : Lines) {
      L = L.rtrim("\r");
      if (!L.empty())
        Names.insert(L);
    }
  }

  // Whether the ML advisor decides for MF (given that it is active). Names are
  // compared as the remarks print them (without the \1 of asm labels).
  bool policyDecides(const MachineFunction &MF) const {
    return !Loaded ||
           Names.contains(GlobalValue::dropLLVMManglingEscape(MF.getName()));
  }
  // Whether its answers are used (else only logged next to the default's).
  bool follow() const { return FollowPolicy || Loaded; }
};

// Number of columns of the eviction features: 32 candidates + the live range
// being allocated (LLVM's NumberOfInterferences).
constexpr int kColumns = 33;
constexpr int kCandidateColumn = kColumns - 1;

// A minimal writer of LLVM's training-log format: a JSON header line naming the
// tensors, then per function `{"context":NAME}`, per record `{"observation":N}`,
// the raw tensor bytes in header order, and a newline.
class TraceLog {
public:
  struct Spec {
    std::string Name;
    std::string Type; // "int64_t" or "float"
  };

  TraceLog(StringRef Path, std::vector<Spec> Specs, LLVMContext &Ctx)
      : Specs(std::move(Specs)) {
    std::error_code EC;
    OS = std::make_unique<raw_fd_ostream>(Path, EC);
    if (EC) {
      Ctx.emitError("mlgo regalloc tracer: cannot open " + Path + ": " +
                    EC.message());
      OS.reset();
      return;
    }
    *OS << "{\"features\":[";
    for (size_t I = 0; I < this->Specs.size(); ++I) {
      if (I)
        *OS << ",";
      *OS << "{\"name\":\"" << this->Specs[I].Name << "\",\"port\":" << I
          << ",\"shape\":[1],\"type\":\"" << this->Specs[I].Type << "\"}";
    }
    *OS << "]}\n";
    OS->flush();
  }

  bool ok() const { return OS != nullptr; }

  // The allocator may run twice on a function (x86 runs greedy once for AMX
  // tile registers, then for the rest); consecutive contexts of the same
  // function are merged, so there is one context per function.
  void context(StringRef Name) {
    if (!OS || (HaveContext && Name == LastContext))
      return;
    HaveContext = true;
    LastContext = Name.str();
    // Function names are plain identifiers or mangled names; escape the two
    // characters JSON cares about anyway.
    *OS << "{\"context\":\"";
    for (char C : Name) {
      if (C == '"' || C == '\\')
        *OS << '\\';
      *OS << C;
    }
    *OS << "\"}\n";
    NextObservation = 0;
  }

  // Values in header order; each is written with the header's type.
  void observation(ArrayRef<double> Values) {
    if (!OS)
      return;
    *OS << "{\"observation\":" << NextObservation++ << "}\n";
    for (size_t I = 0; I < Specs.size(); ++I) {
      if (Specs[I].Type == "float") {
        float V = static_cast<float>(Values[I]);
        OS->write(reinterpret_cast<const char *>(&V), sizeof(V));
      } else {
        int64_t V = static_cast<int64_t>(Values[I]);
        OS->write(reinterpret_cast<const char *>(&V), sizeof(V));
      }
    }
    *OS << "\n";
    // Flushed per record: a compile that is killed still leaves a readable log.
    OS->flush();
  }

private:
  std::vector<Spec> Specs;
  std::unique_ptr<raw_fd_ostream> OS;
  int64_t NextObservation = 0;
  bool HaveContext = false;
  std::string LastContext;
};

// Read-only view of llvm::AllocationOrder (a private header of lib/CodeGen):
// the hints, the order and the iteration limit, in declaration order. Used only
// to find the column of a register, which follows the order's iteration: hints
// first, then the order without the hints, up to the iteration limit.
struct AllocationOrderView {
  const SmallVector<MCPhysReg, 16> Hints;
  ArrayRef<MCPhysReg> Order;
  const int IterationLimit;
};

int columnOf(const AllocationOrder &AO, MCRegister Reg) {
  if (!Reg)
    return kCandidateColumn;
  const auto &V = reinterpret_cast<const AllocationOrderView &>(AO);
  int Pos = 0;
  for (MCPhysReg H : V.Hints) {
    if (H == Reg.id())
      return Pos < kCandidateColumn ? Pos : -1;
    ++Pos;
  }
  for (int I = 0; I < V.IterationLimit; ++I) {
    MCPhysReg P = V.Order[I];
    if (is_contained(V.Hints, P))
      continue;
    if (P == Reg.id())
      return Pos < kCandidateColumn ? Pos : -1;
    ++Pos;
  }
  return -1;
}

// ---------------------------------------------------------------- eviction

class TracingEvictAdvisor : public RegAllocEvictionAdvisor {
public:
  TracingEvictAdvisor(const MachineFunction &MF, const RAGreedy &RA,
                      std::unique_ptr<RegAllocEvictionAdvisor> Policy,
                      TraceLog *Log, bool Follow)
      : RegAllocEvictionAdvisor(MF, RA), Default(MF, RA),
        Policy(std::move(Policy)), Log(Log), Follow(Follow) {}

  MCRegister
  tryFindEvictionCandidate(const LiveInterval &VirtReg,
                           const AllocationOrder &Order,
                           uint8_t CostPerUseLimit,
                           const SmallVirtRegSet &FixedRegisters) const override {
    const RegAllocEvictionAdvisor &D = Default;
    MCRegister DefaultReg = D.tryFindEvictionCandidate(
        VirtReg, Order, CostPerUseLimit, FixedRegisters);
    if (!Policy) {
      if (Log)
        Log->observation({double(columnOf(Order, DefaultReg)),
                          double(columnOf(Order, DefaultReg))});
      return DefaultReg;
    }
    MCRegister PolicyReg = Policy->tryFindEvictionCandidate(
        VirtReg, Order, CostPerUseLimit, FixedRegisters);
    // See the file comment: a register back from the ML advisor means it sent
    // an observation (in trace mode the driver never answers column 32).
    if (Log && PolicyReg)
      Log->observation({double(columnOf(Order, DefaultReg)),
                        double(columnOf(Order, PolicyReg))});
    return Follow ? PolicyReg : DefaultReg;
  }

  bool canEvictHintInterference(
      const LiveInterval &VirtReg, MCRegister PhysReg,
      const SmallVirtRegSet &FixedRegisters) const override {
    const RegAllocEvictionAdvisor &D = Default;
    return D.canEvictHintInterference(VirtReg, PhysReg, FixedRegisters);
  }

private:
  DefaultEvictionAdvisor Default;
  std::unique_ptr<RegAllocEvictionAdvisor> Policy;
  TraceLog *Log;
  bool Follow;
};

class TracingEvictProvider : public RegAllocEvictionAdvisorProvider {
public:
  TracingEvictProvider(bool UsePolicy, LLVMContext &Ctx)
      : RegAllocEvictionAdvisorProvider(
            UsePolicy ? AdvisorMode::Release : AdvisorMode::Default, Ctx) {
    if (UsePolicy)
      Policy.reset(createReleaseModeAdvisorProvider(Ctx));
    Selection.load(Ctx);
    if (!EvictTraceLog.empty()) {
      Log = std::make_unique<TraceLog>(
          EvictTraceLog,
          std::vector<TraceLog::Spec>{{"default_index", "int64_t"},
                                      {"policy_index", "int64_t"}},
          Ctx);
      if (!Log->ok())
        Log.reset();
    }
    if (!ScoreLog.empty()) {
      Scores = std::make_unique<TraceLog>(
          ScoreLog, std::vector<TraceLog::Spec>{{"score", "float"}}, Ctx);
      if (!Scores->ok())
        Scores.reset();
    }
  }

  void logRewardIfNeeded(const MachineFunction &MF,
                         function_ref<float()> GetReward) override {
    if (!Scores)
      return;
    Scores->context(MF.getName());
    Scores->observation({double(GetReward())});
  }

  std::unique_ptr<RegAllocEvictionAdvisor>
  getAdvisor(const MachineFunction &MF, const RAGreedy &RA,
             MachineBlockFrequencyInfo *MBFI, MachineLoopInfo *Loops) override {
    // The ML advisor switches the channel's context in its constructor; the
    // trace follows it so both streams have the same contexts.
    std::unique_ptr<RegAllocEvictionAdvisor> P;
    if (Policy && Selection.policyDecides(MF))
      P = Policy->getAdvisor(MF, RA, MBFI, Loops);
    if (Log)
      Log->context(MF.getName());
    return std::make_unique<TracingEvictAdvisor>(MF, RA, std::move(P),
                                                 Log.get(), Selection.follow());
  }

private:
  FunctionSelection Selection;
  std::unique_ptr<RegAllocEvictionAdvisorProvider> Policy;
  std::unique_ptr<TraceLog> Log;
  std::unique_ptr<TraceLog> Scores;
};

class TracingEvictAnalysis : public RegAllocEvictionAdvisorAnalysisLegacy {
public:
  explicit TracingEvictAnalysis(AdvisorMode Mode)
      : RegAllocEvictionAdvisorAnalysisLegacy(Mode) {}

  bool doInitialization(Module &M) override {
    Provider = std::make_unique<TracingEvictProvider>(
        getAdvisorMode() == AdvisorMode::Release, M.getContext());
    return false;
  }

  // Called by the scoring pass that stock llc runs after the rewriter.
  void logRewardIfNeeded(const MachineFunction &MF,
                         function_ref<float()> GetReward) override {
    Provider->logRewardIfNeeded(MF, GetReward);
  }

  void getAnalysisUsage(AnalysisUsage &AU) const override {
    // The ML advisor needs these (the release-mode analysis asks for them).
    AU.addRequired<MachineBlockFrequencyInfoWrapperPass>();
    AU.addRequired<MachineLoopInfoWrapperPass>();
    RegAllocEvictionAdvisorAnalysisLegacy::getAnalysisUsage(AU);
  }
};

PassInfo::NormalCtor_t OriginalEvictCtor = nullptr;

Pass *createTracingEvictAnalysis() {
  // The original constructor reads -regalloc-enable-advisor; keep its mode.
  using Mode = RegAllocEvictionAdvisorAnalysisLegacy::AdvisorMode;
  Mode M = Mode::Default;
  if (OriginalEvictCtor) {
    std::unique_ptr<Pass> Original(OriginalEvictCtor());
    if (Original)
      M = static_cast<RegAllocEvictionAdvisorAnalysisLegacy *>(Original.get())
              ->getAdvisorMode();
  }
  if (M == Mode::Development)
    M = Mode::Default; // not available in stock builds
  return new TracingEvictAnalysis(M);
}

// ---------------------------------------------------------------- priority

class TracingPriorityAdvisor : public RegAllocPriorityAdvisor {
public:
  TracingPriorityAdvisor(const MachineFunction &MF, const RAGreedy &RA,
                         SlotIndexes *Indexes,
                         std::unique_ptr<RegAllocPriorityAdvisor> Policy,
                         TraceLog *Log, bool Follow)
      : RegAllocPriorityAdvisor(MF, RA, Indexes), Default(MF, RA, Indexes),
        Policy(std::move(Policy)), Log(Log), Follow(Follow) {}

  unsigned getPriority(const LiveInterval &LI) const override {
    const RegAllocPriorityAdvisor &D = Default;
    unsigned DefaultPrio = D.getPriority(LI);
    if (!Policy) {
      if (Log)
        Log->observation({double(DefaultPrio), double(DefaultPrio)});
      return DefaultPrio;
    }
    unsigned PolicyPrio = Policy->getPriority(LI);
    if (Log)
      Log->observation({double(DefaultPrio), double(PolicyPrio)});
    return Follow ? PolicyPrio : DefaultPrio;
  }

private:
  DefaultPriorityAdvisor Default;
  std::unique_ptr<RegAllocPriorityAdvisor> Policy;
  TraceLog *Log;
  bool Follow;
};

class TracingPriorityProvider : public RegAllocPriorityAdvisorProvider {
public:
  TracingPriorityProvider(bool UsePolicy, LLVMContext &Ctx)
      : RegAllocPriorityAdvisorProvider(UsePolicy ? AdvisorMode::Release
                                                  : AdvisorMode::Default) {
    if (UsePolicy)
      Policy.reset(createReleaseModePriorityAdvisorProvider());
    Selection.load(Ctx);
    if (!PriorityTraceLog.empty()) {
      Log = std::make_unique<TraceLog>(
          PriorityTraceLog,
          std::vector<TraceLog::Spec>{{"default_priority", "float"},
                                      {"policy_priority", "float"}},
          Ctx);
      if (!Log->ok())
        Log.reset();
    }
  }

  std::unique_ptr<RegAllocPriorityAdvisor>
  getAdvisor(const MachineFunction &MF, const RAGreedy &RA,
             SlotIndexes &SI) override {
    std::unique_ptr<RegAllocPriorityAdvisor> P;
    if (Policy && Selection.policyDecides(MF))
      P = Policy->getAdvisor(MF, RA, SI);
    if (Log)
      Log->context(MF.getName());
    return std::make_unique<TracingPriorityAdvisor>(MF, RA, &SI, std::move(P),
                                                    Log.get(), Selection.follow());
  }

private:
  FunctionSelection Selection;
  std::unique_ptr<RegAllocPriorityAdvisorProvider> Policy;
  std::unique_ptr<TraceLog> Log;
};

class TracingPriorityAnalysis : public RegAllocPriorityAdvisorAnalysisLegacy {
public:
  explicit TracingPriorityAnalysis(AdvisorMode Mode)
      : RegAllocPriorityAdvisorAnalysisLegacy(Mode) {}

  bool doInitialization(Module &M) override {
    Provider = std::make_unique<TracingPriorityProvider>(
        getAdvisorMode() == AdvisorMode::Release, M.getContext());
    return false;
  }

  void getAnalysisUsage(AnalysisUsage &AU) const override {
    AU.addRequired<SlotIndexesWrapperPass>();
    RegAllocPriorityAdvisorAnalysisLegacy::getAnalysisUsage(AU);
  }
};

PassInfo::NormalCtor_t OriginalPriorityCtor = nullptr;

Pass *createTracingPriorityAnalysis() {
  using Mode = RegAllocPriorityAdvisorAnalysisLegacy::AdvisorMode;
  Mode M = Mode::Default;
  if (OriginalPriorityCtor) {
    std::unique_ptr<Pass> Original(OriginalPriorityCtor());
    if (Original)
      M = static_cast<RegAllocPriorityAdvisorAnalysisLegacy *>(Original.get())
              ->getAdvisorMode();
  }
  if (M != Mode::Release)
    M = Mode::Default; // development/dummy: keep the plain default
  return new TracingPriorityAnalysis(M);
}

// ---------------------------------------------------------------- install

struct Installer {
  Installer() {
    PassRegistry &R = *PassRegistry::getPassRegistry();
    // llc registers the code generator's passes before it parses the command
    // line (where -load runs us); registering again is a no-op.
    initializeRegAllocEvictionAdvisorAnalysisLegacyPass(R);
    initializeRegAllocPriorityAdvisorAnalysisLegacyPass(R);
    if (const PassInfo *PI =
            R.getPassInfo(&RegAllocEvictionAdvisorAnalysisLegacy::ID)) {
      auto *Mutable = const_cast<PassInfo *>(PI);
      OriginalEvictCtor = Mutable->getNormalCtor();
      Mutable->setNormalCtor(&createTracingEvictAnalysis);
    }
    if (const PassInfo *PI =
            R.getPassInfo(&RegAllocPriorityAdvisorAnalysisLegacy::ID)) {
      auto *Mutable = const_cast<PassInfo *>(PI);
      OriginalPriorityCtor = Mutable->getNormalCtor();
      Mutable->setNormalCtor(&createTracingPriorityAnalysis);
    }
  }
} TheInstaller;

} // namespace
