// mlgo context plugin: stock clang-22's ML inline advisor on the interactive channel,
// plus the call-site context features of context_features.h.
//
// Loaded with `clang-22 -fpass-plugin=libinline_context.so` together with the usual
// interactive-mode options (-mllvm -enable-ml-inliner=release -mllvm
// -inliner-interactive-channel-base=BASE -mllvm -inliner-interactive-include-default).
// A registered plugin advisor takes precedence over clang's own, so this advisor owns
// the channel: LLVM's MLInlineAdvisor fills its features exactly as without the plugin
// (same code), and the context features follow them in the channel's header. Answering
// clang's default decision at every call site reproduces the plain -Oz compile.
//
// Training only: the release plugin (inline_plugin.cc) computes the same context
// features in-process when its compiled model takes them.

#include "advisor_plugin.h"
#include "context_features.h"

#include "llvm/Analysis/IR2Vec.h"
#include "llvm/Analysis/InlineAdvisor.h"
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/InteractiveModelRunner.h"
#include "llvm/Analysis/MLInlineAdvisor.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"
#if LLVM_VERSION_MAJOR >= 21
#include "llvm/Plugins/PassPlugin.h"
#else
#include "llvm/Passes/PassPlugin.h"
#endif

#include <cstdlib>
#include <memory>
#include <string>

#if LLVM_VERSION_MAJOR < 21
#error "the context plugin needs LLVM 21 or newer (MLInlineAdvisor's runner factory)"
#endif

using namespace llvm;

namespace {

[[noreturn]] void fail(const Twine &Msg) {
  // A configuration error, not a compiler crash: no stack dump.
  errs() << "error: mlgo context plugin: " << Msg << "\n";
  errs().flush();
  std::exit(1);
}

// The value of one of libLLVM's own options (e.g. the channel base), "" if not given.
std::string llvmOption(StringRef Name) {
  auto &Opts = cl::getRegisteredOptions();
  auto It = Opts.find(Name);
  if (It == Opts.end() || It->second->getNumOccurrences() == 0) return "";
  auto *S = static_cast<cl::opt<std::string> *>(It->second);
  return S->getValue();
}

class ContextAdvisor final : public MLInlineAdvisor {
public:
  template <typename... Args>
  ContextAdvisor(std::shared_ptr<DefaultInlineAdvisor> Default, Args &&...A)
      : MLInlineAdvisor(std::forward<Args>(A)...), Default(std::move(Default)),
        First(getFeatureMap().size()) {}

protected:
  std::unique_ptr<MLInlineAdvice> getAdviceFromModel(CallBase &CB,
                                                     OptimizationRemarkEmitter &ORE) override {
    Tracker.fill(*ModelRunner, First, CB);
    bool Inline = static_cast<bool>(ModelRunner->evaluate<int64_t>());
    return std::make_unique<mlgo_context::CountingAdvice>(this, CB, ORE, Inline, Tracker);
  }

  // always_inline call sites are inlined too; count them, as the release plugin does.
  std::unique_ptr<MLInlineAdvice> getMandatoryAdviceImpl(CallBase &CB) override {
    auto &ORE = FAM.getResult<OptimizationRemarkEmitterAnalysis>(*CB.getCaller());
    return std::make_unique<mlgo_context::CountingAdvice>(this, CB, ORE, true, Tracker);
  }

private:
  std::shared_ptr<DefaultInlineAdvisor> Default;
  // Index of the first context feature in the runner's inputs: they follow the features
  // MLInlineAdvisor gave the runner factory (its feature map).
  const size_t First;
  mlgo_context::Tracker Tracker;
};

InlineAdvisor *makeAdvisor(Module &M, FunctionAnalysisManager &FAM, InlineParams Params,
                           InlineContext IC) {
  ModuleAnalysisManager *MAM = mlgo_plugin::currentMAM();
  if (!MAM) fail("no module analysis manager registered");
  const std::string Base = llvmOption("inliner-interactive-channel-base");
  if (Base.empty())
    fail("no channel: run clang with -mllvm -inliner-interactive-channel-base=BASE "
         "(and -mllvm -inliner-interactive-include-default)");
  // clang's own advisor setup computes the IR2Vec vocabulary when its option is given;
  // a plugin advisor must do the same for MLInlineAdvisor to send the embeddings.
  if (!llvmOption("ml-inliner-ir2vec-vocab-file").empty())
    (void)MAM->getResult<IR2VecVocabAnalysis>(M);
  auto Default = std::make_shared<DefaultInlineAdvisor>(M, FAM, Params, IC);
  auto GetDefaultAdvice = mlgo_plugin::defaultAnswer(Default.get());
  // LLVM's features (with IR2Vec's and inlining_default when enabled) come first, at the
  // indices MLInlineAdvisor writes; the context features follow.
  auto GetRunner = [&M, Base](const std::vector<TensorSpec> &Features)
      -> std::unique_ptr<MLModelRunner> {
    std::vector<TensorSpec> All = Features;
    for (const TensorSpec &S : mlgo_context::specs()) All.push_back(S);
    return std::make_unique<InteractiveModelRunner>(M.getContext(), All, InlineDecisionSpec,
                                                    Base + ".out", Base + ".in");
  };
  return new ContextAdvisor(Default, M, *MAM, GetRunner, GetDefaultAdvice);
}

void registerCallbacks(PassBuilder &PB) { mlgo_plugin::registerAdvisor(PB, makeAdvisor); }

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK __attribute__((visibility("default")))
::llvm::PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "mlgo-inline-context", "1", registerCallbacks};
}
