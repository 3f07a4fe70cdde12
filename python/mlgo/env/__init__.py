"""The compiler environment: one clang/llc process per module with a policy in the loop.

    result = mlgo.env.compile_module(module, mlgo.problems.get_problem("inlining"),
                                     mlgo.env.DefaultPolicy(), llvm_version=22)
    result.ok, result.reason, result.trajectories, result.reward, result.decisions

`module` is a corpus module (mlgo.corpus.CorpusModule: pre-optimization bitcode + cc1
flags) or one of mlgo.env.modules' small module types (`SourceModule`, `LlcModule`).
Compile failures (crash, timeout, malformed stream, early EOF, a compiler that never
opens the channel) come back as `CompileResult(ok=False, reason=...)`, never as an
exception; no process, FIFO or temporary directory outlives the call.
"""
from mlgo.env.core import CompileResult, Trajectory, compile_module, plain_compile
from mlgo.env.policies import DefaultPolicy, RandomPolicy, MLPPolicy, ShadowPolicy
from mlgo.env.modules import LlcModule, SourceModule, module_from_files, module_from_source

__all__ = ["CompileResult", "Trajectory", "compile_module", "plain_compile",
           "DefaultPolicy", "RandomPolicy", "MLPPolicy", "ShadowPolicy", "LlcModule", "SourceModule",
           "module_from_files", "module_from_source"]
