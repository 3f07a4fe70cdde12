"""The compiler environment: one clang/llc process per module with a policy in the loop.

    result = mlgo.env.compile_module(module, mlgo.problems.get_problem("inlining"),
                                     mlgo.env.DefaultPolicy(), llvm_version=22)
    result.ok, result.reason, result.trajectories, result.reward, result.decisions

`module` is a corpus module (mlgo.corpus.CorpusModule: pre-optimization bitcode + cc1
flags), a module of a prepared corpus (mlgo.env.prepared: optimized once, for llc-only
problems) or one of mlgo.env.modules' small module types (`SourceModule`, `LlcModule`).
`CompilerDefault()` compiles without the channel (the reference); `trace=True` lets the
problem's tracer plugin label every decision with the default's choice.
Compile failures (crash, timeout, malformed stream, early EOF, a compiler that never
opens the channel) come back as `CompileResult(ok=False, reason=...)`, never as an
exception; no process, FIFO or temporary directory outlives the call.
"""
from mlgo.env.core import CompileResult, Trajectory, compile_module, plain_compile
from mlgo.env.policies import (CompilerDefault, DefaultPolicy, RandomPolicy, MLPPolicy,
                               ShadowPolicy, reference_policy)
from mlgo.env.modules import LlcModule, SourceModule, module_from_files, module_from_source

__all__ = ["CompileResult", "Trajectory", "compile_module", "plain_compile",
           "CompilerDefault", "DefaultPolicy", "reference_policy", "RandomPolicy",
           "MLPPolicy", "ShadowPolicy", "LlcModule", "SourceModule", "module_from_files",
           "module_from_source"]
