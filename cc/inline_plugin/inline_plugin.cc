// mlgo inline advisor plugin: an XLA AOT-compiled inlining policy inside stock clang/opt.
//
// Loaded with `clang -fpass-plugin=inline_advisor.so` or `opt -load-pass-plugin=...`, it
// registers LLVM's PluginInlineAdvisorAnalysis with a factory that builds LLVM's own
// MLInlineAdvisor around a model runner evaluating the compiled policy. MLInlineAdvisor
// computes the features exactly as in interactive mode (same code, same order), so the
// policy sees in-process what it saw during training through the channel. Normalization
// is part of the compiled graph.
//
// The model's inputs are matched to the compiler's features by name, type and element
// count. Any difference aborts with a message listing it, when the plugin is loaded and
// again when the advisor is created (the compiler can add features, e.g. IR2Vec ones).
//
// A model trained with the context plugin's features (problems inlining_ctx,
// inlining_ir2vec_ctx) gets them computed here by the same code (context_features.h).
//
// MLGO_INLINE_LOG=PATH appends one JSON line per model decision (caller, callee, the
// features the model saw, the decision) so tests can compare with the Python policy.
// MLGO_INLINE_FOLLOW_DEFAULT=1 evaluates the model but follows LLVM's heuristic: the
// benchmark uses it to measure the advisor's own cost apart from its decisions' effects.

#include "advisor_plugin.h"
#include "context_features.h"
#include "mlgo_model.h"

#include "llvm/Analysis/InlineAdvisor.h"
#if LLVM_VERSION_MAJOR >= 22
#include "llvm/Analysis/IR2Vec.h"
#endif
#include "llvm/Analysis/InlineModelFeatureMaps.h"
#include "llvm/Analysis/MLInlineAdvisor.h"
#include "llvm/Analysis/MLModelRunner.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/TensorSpec.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/Module.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#if LLVM_VERSION_MAJOR >= 21
#include "llvm/Plugins/PassPlugin.h"
#else
#include "llvm/Passes/PassPlugin.h"
#endif

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace llvm;

namespace {

constexpr const char *kFeedPrefix = "feed_";

std::string typeName(const TensorSpec &S) {
  if (S.isElementType<int64_t>()) return "int64_t";
  if (S.isElementType<int32_t>()) return "int32_t";
  if (S.isElementType<float>()) return "float";
  if (S.isElementType<double>()) return "double";
  if (S.isElementType<int8_t>()) return "int8_t";
  if (S.isElementType<uint8_t>()) return "uint8_t";
  return "unknown";
}

bool isBookkeeping(const char *Name) {
  for (const char *B : mlgo_model::kBookkeeping)
    if (std::strcmp(B, Name) == 0) return true;
  return false;
}

bool isDefaultDecision(const char *Name) {
  return std::strcmp(Name, DefaultDecisionName) == 0;
}

// Features MLInlineAdvisor adds only when clang runs with an IR2Vec vocabulary
// (-mllvm -ml-inliner-ir2vec-vocab-file=F -mllvm -ir2vec-vocab-path=F): a model that
// takes them (problem inlining_ir2vec) is accepted when the plugin loads, and checked
// against what the compiler sends when the advisor is created.
bool isIR2VecFeature(const char *Name) {
  return std::strcmp(Name, "callee_embedding") == 0 ||
         std::strcmp(Name, "caller_embedding") == 0;
}

bool modelTakesIR2Vec() {
  for (const auto &I : mlgo_model::kInputs)
    if (isIR2VecFeature(I.name)) return true;
  return false;
}

// All five context features or none: the plugin fills them as a block.
bool modelTakesContext() {
  size_t N = 0;
  for (const auto &I : mlgo_model::kInputs) N += mlgo_context::isContextFeature(I.name);
  if (N != 0 && N != mlgo_context::kCount)
    report_fatal_error("mlgo inline advisor plugin: the model takes some but not all of "
                       "the context features", false);
  return N != 0;
}

// MLInlineAdvisor adds the embedding features only if the IR2Vec vocabulary analysis is
// already cached; clang's own advisor setup computes it when the vocabulary option is
// given, a plugin advisor must do the same. Without the option nothing is computed and
// compareFeatures names the flags.
void loadIR2VecVocabularyIfGiven(Module &M, ModuleAnalysisManager &MAM) {
#if LLVM_VERSION_MAJOR >= 22
  auto &Opts = cl::getRegisteredOptions();
  auto It = Opts.find("ml-inliner-ir2vec-vocab-file");
  if (It != Opts.end() && It->second->getNumOccurrences() > 0)
    (void)MAM.getResult<IR2VecVocabAnalysis>(M);
#else
  (void)M;
  (void)MAM;
#endif
}

// Empty when the model's inputs are exactly the compiler's features (plus inputs no
// compiler sends that we can fill: tf-agents bookkeeping, the default decision, the
// context features).
// AtLoad: the compiler's feature list before options are known (no IR2Vec features).
std::string compareFeatures(const std::vector<TensorSpec> &Compiler, bool AtLoad = false) {
  std::string Err;
  raw_string_ostream OS(Err);
  for (const TensorSpec &S : Compiler) {
    const mlgo_model::TensorInfo *Found = nullptr;
    for (const auto &I : mlgo_model::kInputs)
      if (S.name() == I.name) Found = &I;
    if (!Found) {
      OS << "\n  compiler feature '" << S.name() << "' is not an input of the model";
      continue;
    }
    if (typeName(S) != Found->type ||
        static_cast<int64_t>(S.getElementCount()) != Found->elements)
      OS << "\n  feature '" << S.name() << "': compiler sends " << typeName(S) << " x"
         << S.getElementCount() << ", model expects " << Found->type << " x"
         << Found->elements;
  }
  for (const auto &I : mlgo_model::kInputs) {
    if (isBookkeeping(I.name) || isDefaultDecision(I.name) ||
        mlgo_context::isContextFeature(I.name))
      continue;
    if (AtLoad && isIR2VecFeature(I.name)) continue;
    bool Sent = false;
    for (const TensorSpec &S : Compiler) Sent |= S.name() == I.name;
    if (!Sent)
      OS << "\n  model input '" << I.name << "' is not a feature this compiler sends"
         << (isIR2VecFeature(I.name) ? " (run clang with -mllvm "
                                       "-ml-inliner-ir2vec-vocab-file=VOCAB -mllvm "
                                       "-ir2vec-vocab-path=VOCAB)" : "");
  }
  OS.flush();
  return Err;
}

[[noreturn]] void featureMismatch(const std::string &Diff, const char *When) {
  std::string Msg = std::string("mlgo inline advisor plugin: the model's feature list "
                                "does not match what this compiler (LLVM ") +
                    LLVM_VERSION_STRING + ") computes (" + When + "):" + Diff +
                    "\nRebuild the plugin from a policy trained with this compiler's "
                    "features.";
  // Not report_fatal_error: clang turns that into a crash report with a stack dump,
  // which reads like a compiler bug. This is a configuration error.
  errs() << "error: " << Msg << "\n";
  errs().flush();
  std::exit(1);
}

const std::vector<TensorSpec> &initialFeatures() {
#if LLVM_VERSION_MAJOR >= 21
  return MLInlineAdvisor::getInitialFeatureMap();
#else
  return FeatureMap;
#endif
}

// The AOT model as LLVM's MLModelRunner. Feature buffers are the model's own argument
// buffers (no copy); one extra slot after the compiler's features receives the default
// decision, and (a context model) the next five the context features.
class AOTModelRunner final : public MLModelRunner {
public:
  AOTModelRunner(LLVMContext &Ctx, const std::vector<TensorSpec> &Features)
      : MLModelRunner(Ctx, MLModelRunner::Kind::Release,
                      Features.size() + 1 + (modelTakesContext() ? mlgo_context::kCount : 0)),
        Model(std::make_unique<mlgo_model::Model>()), Features(Features) {
    std::string Diff = compareFeatures(Features);
    if (!Diff.empty()) featureMismatch(Diff, "creating the advisor");
    for (int I = 0; I < Model->num_args(); ++I)
      std::memset(Model->arg_data(I), 0, Model->arg_size(I));
    for (size_t I = 0; I < Features.size(); ++I) {
      int Arg = Model->LookupArgIndex(kFeedPrefix + Features[I].name());
      if (Arg < 0)
        report_fatal_error(Twine("mlgo inline advisor plugin: compiled model has no "
                                 "argument for feature ") + Features[I].name());
      setUpBufferForTensor(I, Features[I], Model->arg_data(Arg));
    }
    DefaultArg = Model->LookupArgIndex(std::string(kFeedPrefix) + DefaultDecisionName);
    TensorSpec DefaultSpec = TensorSpec::createSpec<int64_t>(DefaultDecisionName, {1});
    setUpBufferForTensor(Features.size(), DefaultSpec,
                         DefaultArg >= 0 ? Model->arg_data(DefaultArg) : nullptr);
    if (modelTakesContext()) {
      const std::vector<TensorSpec> Specs = mlgo_context::specs();
      for (size_t I = 0; I < Specs.size(); ++I) {
        int Arg = Model->LookupArgIndex(kFeedPrefix + Specs[I].name());
        if (Arg < 0)
          report_fatal_error(Twine("mlgo inline advisor plugin: compiled model has no "
                                   "argument for feature ") + Specs[I].name());
        setUpBufferForTensor(contextFirst() + I, Specs[I], Model->arg_data(Arg));
      }
    }
    if (const char *Path = std::getenv("MLGO_INLINE_LOG")) {
      std::error_code EC;
      Log = std::make_unique<raw_fd_ostream>(Path, EC, sys::fs::OF_Append);
      if (EC)
        report_fatal_error(Twine("mlgo inline advisor plugin: cannot open MLGO_INLINE_LOG ") +
                           Path + ": " + EC.message());
    }
  }

  bool wantsDefaultDecision() const { return DefaultArg >= 0; }
  size_t contextFirst() const { return Features.size() + 1; }
  int64_t *defaultDecisionSlot() { return getTensor<int64_t>(Features.size()); }
  bool logging() const { return Log != nullptr; }
  void setSite(StringRef Caller, StringRef Callee) {
    SiteCaller = Caller.str();
    SiteCallee = Callee.str();
  }

private:
  void *evaluateUntyped() override {
    if (!Model->Run())
      report_fatal_error(Twine("mlgo inline advisor plugin: model evaluation failed: ") +
                         Model->error_msg());
    const void *Out = Model->result_data(0);
    const std::string Type = mlgo_model::kOutput.type;
    if (Type == "int64_t") Result = *static_cast<const int64_t *>(Out);
    else if (Type == "int32_t") Result = *static_cast<const int32_t *>(Out);
    else if (Type == "float") Result = *static_cast<const float *>(Out) > 0.5f;
    else if (Type == "double") Result = *static_cast<const double *>(Out) > 0.5;
    else Result = *static_cast<const uint8_t *>(Out);
    if (Log) writeLog();
    return &Result;
  }

  void writeLog() {
    auto &OS = *Log;
    OS << "{\"caller\": \"";
    OS.write_escaped(SiteCaller) << "\", \"callee\": \"";
    OS.write_escaped(SiteCallee) << "\", \"features\": {";
    for (size_t I = 0; I < Features.size(); ++I) {
      OS << (I ? ", " : "") << "\"" << Features[I].name() << "\": ";
      // A scalar as a number, a vector (IR2Vec embeddings) as a list.
      const size_t N = Features[I].getElementCount();
      if (N > 1) OS << "[";
      for (size_t J = 0; J < N; ++J) {
        if (J) OS << ", ";
        if (Features[I].isElementType<int64_t>())
          OS << getTensor<int64_t>(I)[J];
        else if (Features[I].isElementType<float>())
          OS << format("%.9g", getTensor<float>(I)[J]);
        else
          OS << "null";
      }
      if (N > 1) OS << "]";
    }
    if (modelTakesContext())
      for (size_t I = 0; I < mlgo_context::kCount; ++I)
        OS << ", \"" << mlgo_context::kNames[I] << "\": "
           << getTensor<int64_t>(contextFirst() + I)[0];
    OS << "}";
    // The default decision, when the model takes it (a policy that defers to it).
    if (DefaultArg >= 0) OS << ", \"default\": " << *getTensor<int64_t>(Features.size());
    OS << ", \"decision\": " << Result << "}\n";
    OS.flush();
  }

  std::unique_ptr<mlgo_model::Model> Model;
  std::vector<TensorSpec> Features;
  int DefaultArg = -1;
  int64_t Result = 0;
  std::unique_ptr<raw_fd_ostream> Log;
  std::string SiteCaller, SiteCallee;
};

// MLInlineAdvisor plus the two things interactive mode has and release mode lacks: the
// default decision as a model input (if the model takes it) and the call site's names
// for the decision log.
class PluginAdvisor final : public MLInlineAdvisor {
public:
  template <typename... Args>
  PluginAdvisor(std::shared_ptr<DefaultInlineAdvisor> Default, Args &&...A)
      : MLInlineAdvisor(std::forward<Args>(A)...), Default(std::move(Default)) {}

protected:
  std::unique_ptr<MLInlineAdvice> getAdviceFromModel(CallBase &CB,
                                                     OptimizationRemarkEmitter &ORE) override {
    auto &R = static_cast<AOTModelRunner &>(*ModelRunner);
    if (R.wantsDefaultDecision()) *R.defaultDecisionSlot() = GetDefaultAdvice(CB);
    if (R.logging())
      R.setSite(CB.getCaller()->getName(), CB.getCalledFunction()->getName());
    if (Context) Tracker.fill(R, R.contextFirst(), CB);
    if (FollowDefault) {
      // Benchmark mode: evaluate the model (its cost is what we measure) but follow the
      // heuristic, so compile time is not changed by different inlining.
      (void)ModelRunner->evaluate<int64_t>();
      return advice(CB, ORE, GetDefaultAdvice(CB));
    }
    return advice(CB, ORE, static_cast<bool>(ModelRunner->evaluate<int64_t>()));
  }

  // always_inline call sites are counted too (as the context plugin counts them).
  std::unique_ptr<MLInlineAdvice> getMandatoryAdviceImpl(CallBase &CB) override {
    if (!Context) return MLInlineAdvisor::getMandatoryAdviceImpl(CB);
    auto &ORE = FAM.getResult<OptimizationRemarkEmitterAnalysis>(*CB.getCaller());
    return advice(CB, ORE, true);
  }

private:
  std::unique_ptr<MLInlineAdvice> advice(CallBase &CB, OptimizationRemarkEmitter &ORE,
                                         bool Inline) {
    if (Context)
      return std::make_unique<mlgo_context::CountingAdvice>(this, CB, ORE, Inline, Tracker);
    return std::make_unique<MLInlineAdvice>(this, CB, ORE, Inline);
  }

  std::shared_ptr<DefaultInlineAdvisor> Default;
  const bool Context = modelTakesContext();
  mlgo_context::Tracker Tracker;
  // MLGO_INLINE_FOLLOW_DEFAULT=1: measure the advisor's overhead alone.
  const bool FollowDefault = [] {
    const char *E = std::getenv("MLGO_INLINE_FOLLOW_DEFAULT");
    return E && *E && std::strcmp(E, "0") != 0;
  }();
};

InlineAdvisor *makeAdvisor(Module &M, FunctionAnalysisManager &FAM, InlineParams Params,
                           InlineContext IC) {
  ModuleAnalysisManager *MAM = mlgo_plugin::currentMAM();
  if (!MAM)
    report_fatal_error("mlgo inline advisor plugin: no module analysis manager registered");
  if (modelTakesIR2Vec()) loadIR2VecVocabularyIfGiven(M, *MAM);
  auto Default = std::make_shared<DefaultInlineAdvisor>(M, FAM, Params, IC);
  auto GetDefaultAdvice = mlgo_plugin::defaultAnswer(Default.get());
#if LLVM_VERSION_MAJOR >= 21
  auto GetRunner = [&M](const std::vector<TensorSpec> &Features)
      -> std::unique_ptr<MLModelRunner> {
    return std::make_unique<AOTModelRunner>(M.getContext(), Features);
  };
  return new PluginAdvisor(Default, M, *MAM, GetRunner, GetDefaultAdvice);
#else
  auto Runner = std::make_unique<AOTModelRunner>(M.getContext(), FeatureMap);
  return new PluginAdvisor(Default, M, *MAM, std::move(Runner), GetDefaultAdvice);
#endif
}

void registerCallbacks(PassBuilder &PB) {
  // Refuse a model built for other features right away, before any compilation.
  std::string Diff = compareFeatures(initialFeatures(), /*AtLoad=*/true);
  if (!Diff.empty()) featureMismatch(Diff, "loading the plugin");
  if (std::strcmp(mlgo_model::kOutput.name, DecisionName) != 0 &&
      std::strcmp(mlgo_model::kProblem, "inlining") != 0)
    report_fatal_error(Twine("mlgo inline advisor plugin: the model is not an inlining "
                             "policy (problem '") + mlgo_model::kProblem + "')",
                       false);
  mlgo_plugin::registerAdvisor(PB, makeAdvisor);
}

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK __attribute__((visibility("default")))
::llvm::PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "mlgo-inline-advisor", "1", registerCallbacks};
}
