# CMake initial cache (cmake -C) for a clang/llc with mlgo policies compiled in.
# build_patched_clang.sh passes the model locations on top of this:
#   -DTENSORFLOW_AOT_PATH=<venv>/lib/python3.11/site-packages/tensorflow
#   -DLLVM_INLINER_MODEL_PATH=<policy>/saved_policy   (or "none")
#   -DLLVM_RAEVICT_MODEL_PATH=<policy>/saved_policy   (or "none")
# or, with models already AOT-compiled by tools/export_policy (OUT/llvm_embed/):
#   -DLLVM_OVERRIDE_MODEL_HEADER_INLINERSIZEMODEL=OUT/llvm_embed/InlinerSizeModel.h
#   -DLLVM_OVERRIDE_MODEL_OBJECT_INLINERSIZEMODEL=OUT/llvm_embed/InlinerSizeModel.o
#   (same with REGALLOCEVICTMODEL / RegAllocEvictModel)
set(CMAKE_BUILD_TYPE Release CACHE STRING "")
set(LLVM_ENABLE_PROJECTS "clang" CACHE STRING "")
# The host target only (the configuration whose size was counted: ~2,600 compiles for
# `ninja clang llc`); add AArch64 etc. for a cross compiler.
set(LLVM_TARGETS_TO_BUILD "X86" CACHE STRING "")
set(LLVM_ENABLE_ASSERTIONS OFF CACHE BOOL "")
set(LLVM_INCLUDE_TESTS OFF CACHE BOOL "")
set(LLVM_INCLUDE_EXAMPLES OFF CACHE BOOL "")
set(LLVM_INCLUDE_BENCHMARKS OFF CACHE BOOL "")
set(LLVM_INCLUDE_DOCS OFF CACHE BOOL "")
set(LLVM_ENABLE_ZSTD OFF CACHE BOOL "")
# Shared libLLVM like Debian's, so the result can also load mlgo plugins.
set(LLVM_BUILD_LLVM_DYLIB ON CACHE BOOL "")
set(LLVM_LINK_LLVM_DYLIB ON CACHE BOOL "")
set(CLANG_VENDOR "mlgo" CACHE STRING "")
