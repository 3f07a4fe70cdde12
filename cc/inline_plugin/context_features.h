// Call-site context features that stock clang's ML inline advisor does not send.
//
// Why: explain_growth found the inliner's largest regressions on unseen code in call
// sites that look cheap one at a time (a callee with "2 users") but are the Nth copy of
// the same callee in the module, or a callee that stays in the object anyway because
// something other than a call keeps it. LLVM's features cannot say either: callee_users
// comes from a cache taken before earlier inlines, and nothing tells linkage or how many
// copies were already made. These five are computed fresh at each decision from the IR:
//
//   callee_discardable     1 if the callee disappears once nothing uses it (local,
//                          linkonce or available_externally: isDiscardableIfUnused)
//   callee_address_taken   1 if something other than a direct call uses it (it stays)
//   callee_uses            its current number of uses in the module
//   callee_sites_in_caller direct calls to it in this caller, this one included
//   callee_times_inlined   how many call sites of it this advisor has inlined so far
//
// Used by the training plugin (interactive_plugin.cc, the channel to Python) and by the
// release plugin (inline_plugin.cc, a compiled model), so both compute the same values.
#ifndef MLGO_INLINE_CONTEXT_FEATURES_H_
#define MLGO_INLINE_CONTEXT_FEATURES_H_

#include "llvm/ADT/DenseMap.h"
#include "llvm/Analysis/MLInlineAdvisor.h"
#include "llvm/Analysis/MLModelRunner.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/TensorSpec.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/Instructions.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace mlgo_context {

inline constexpr const char *kNames[] = {
    "callee_discardable", "callee_address_taken", "callee_uses",
    "callee_sites_in_caller", "callee_times_inlined",
};
inline constexpr size_t kCount = sizeof(kNames) / sizeof(kNames[0]);

inline bool isContextFeature(const char *Name) {
  for (const char *N : kNames)
    if (std::strcmp(N, Name) == 0) return true;
  return false;
}

inline std::vector<llvm::TensorSpec> specs() {
  std::vector<llvm::TensorSpec> S;
  for (const char *N : kNames) S.push_back(llvm::TensorSpec::createSpec<int64_t>(N, {1}));
  return S;
}

// The per-module state (inline counts per callee) and the computation. One per advisor.
class Tracker {
public:
  // Writes the five values for call site CB into the runner's tensors First..First+4.
  void fill(llvm::MLModelRunner &R, size_t First, llvm::CallBase &CB) const {
    const llvm::Function &Callee = *CB.getCalledFunction();
    const llvm::Function &Caller = *CB.getCaller();
    int64_t Sites = 0;
    for (const llvm::BasicBlock &BB : Caller)
      for (const llvm::Instruction &I : BB)
        if (const auto *C = llvm::dyn_cast<llvm::CallBase>(&I))
          Sites += C->getCalledFunction() == &Callee;
    auto It = Inlined.find(&Callee);
    const int64_t Values[kCount] = {
        Callee.isDiscardableIfUnused() ? 1 : 0,
        Callee.hasAddressTaken() ? 1 : 0,
        static_cast<int64_t>(Callee.getNumUses()),
        Sites,
        It == Inlined.end() ? 0 : It->second,
    };
    for (size_t I = 0; I < kCount; ++I) *R.getTensor<int64_t>(First + I) = Values[I];
  }

  // Called when a call site of Callee was inlined.
  void inlined(const llvm::Function *Callee) { ++Inlined[Callee]; }
  // Its last use is gone and it will be deleted: no later call site names it, and its
  // address may be reused by a function created later.
  void deleted(const llvm::Function *Callee) { Inlined.erase(Callee); }

private:
  llvm::DenseMap<const llvm::Function *, int64_t> Inlined;
};

// MLInlineAdvice that tells the tracker when its call site was inlined.
class CountingAdvice final : public llvm::MLInlineAdvice {
public:
  CountingAdvice(llvm::MLInlineAdvisor *Advisor, llvm::CallBase &CB,
                 llvm::OptimizationRemarkEmitter &ORE, bool Recommendation, Tracker &T)
      : llvm::MLInlineAdvice(Advisor, CB, ORE, Recommendation), T(T),
        Callee(CB.getCalledFunction()) {}

  void recordInliningImpl() override {
    llvm::MLInlineAdvice::recordInliningImpl();
    T.inlined(Callee);
  }
  void recordInliningWithCalleeDeletedImpl() override {
    llvm::MLInlineAdvice::recordInliningWithCalleeDeletedImpl();
    T.deleted(Callee);
  }

private:
  Tracker &T;
  const llvm::Function *Callee;
};

}  // namespace mlgo_context

#endif  // MLGO_INLINE_CONTEXT_FEATURES_H_
