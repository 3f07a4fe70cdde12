// What both inline advisor plugins do alike: the release plugin (inline_plugin.cc, a
// compiled model inside clang) and the training one (interactive_plugin.cc, the
// interactive channel with the context features). Each registers a factory for LLVM's
// PluginInlineAdvisorAnalysis and builds an MLInlineAdvisor subclass that asks LLVM's
// default advisor for clang's own answer.
#ifndef MLGO_INLINE_PLUGIN_ADVISOR_PLUGIN_H
#define MLGO_INLINE_PLUGIN_ADVISOR_PLUGIN_H

#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"

#include <functional>

namespace mlgo_plugin {
// Each plugin is one translation unit built with hidden visibility: the unnamed namespace
// keeps a second plugin in the same process from sharing this state.
namespace {

// The module analysis manager of the latest pass pipeline: the advisor factory receives
// only the function analysis manager, and a compiler runs one pipeline at a time.
inline llvm::ModuleAnalysisManager *&currentMAM() {
  static llvm::ModuleAnalysisManager *MAM = nullptr;
  return MAM;
}

// clang's own decision at a call site, as MLInlineAdvisor asks it (the "inlining_default"
// feature, and the answer of a call site the model does not see). The default advice is
// recorded as not attempted, as LLVM's own setup does, so its bookkeeping stays right.
inline std::function<bool(llvm::CallBase &)> defaultAnswer(llvm::DefaultInlineAdvisor *D) {
  return [D](llvm::CallBase &CB) {
    auto Advice = D->getAdvice(CB);
    bool Recommended = Advice->isInliningRecommended();
    Advice->recordUnattemptedInlining();
    return Recommended;
  };
}

// Makes `Factory` the inline advisor of every pass pipeline PB builds.
inline void registerAdvisor(llvm::PassBuilder &PB,
                            llvm::PluginInlineAdvisorAnalysis::AdvisorFactory Factory) {
  PB.registerAnalysisRegistrationCallback([Factory](llvm::ModuleAnalysisManager &MAM) {
    currentMAM() = &MAM;
    MAM.registerPass([Factory] { return llvm::PluginInlineAdvisorAnalysis(Factory); });
  });
}

}  // namespace
}  // namespace mlgo_plugin

#endif  // MLGO_INLINE_PLUGIN_ADVISOR_PLUGIN_H
