#!/bin/bash
# Builds clang/llc/opt 22 from Debian's llvm-toolchain-22 source package with mlgo
# policies compiled in (LLVM's release mode: -mllvm -enable-ml-inliner=release and
# -regalloc-enable-advisor=release work without any channel or plugin).
#
#   bazel run //llvm_patches:build_patched_clang -- \
#       --inliner_policy=/abs/OUT_inlining --evict_policy=/abs/OUT_eviction \
#       --workdir=/big/disk/llvm-mlgo [--jobs=N] [--source_dir=DIR]
#
# The policies are export dirs of tools/export_policy (their llvm_embed/ AOT objects are
# used through LLVM_OVERRIDE_MODEL_*; no saved_model_cli runs inside LLVM's build) or plain
# policy dirs (LLVM then AOT-compiles saved_policy/ itself via TENSORFLOW_AOT_PATH).
#
#   --check   only checks what can be checked in seconds (see README.md), no download/build.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_FILE="$HERE/mlgo_release.cmake"
INLINER="" EVICT="" WORKDIR="" SOURCE_DIR="" JOBS="$(nproc)" CHECK=0
PYTHON="${MLGO_PYTHON:-}"
for arg in "$@"; do
  case "$arg" in
    --inliner_policy=*) INLINER="${arg#*=}" ;;
    --evict_policy=*) EVICT="${arg#*=}" ;;
    --workdir=*) WORKDIR="${arg#*=}" ;;
    --source_dir=*) SOURCE_DIR="${arg#*=}" ;;
    --jobs=*) JOBS="${arg#*=}" ;;
    --python=*) PYTHON="${arg#*=}" ;;
    --check) CHECK=1 ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "build_patched_clang: unknown argument $arg" >&2; exit 64 ;;
  esac
done

fail() { echo "build_patched_clang: error: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }

# --- TensorFlow (XLA AOT runtime sources + saved_model_cli) from the project venv ---
if [[ -z "$PYTHON" ]]; then
  PYTHON="$(sed -n 's/.*MLGO_PYTHON=\([^ ]*\).*/\1/p' "$HERE/../.bazelrc.local" 2>/dev/null | head -1)"
fi
[[ -x "$PYTHON" ]] || fail "venv python not found (set MLGO_PYTHON or run ./setup.sh)"
TF_DIR="$("$PYTHON" -c 'import importlib.util,os; s=importlib.util.find_spec("tensorflow"); print(list(s.submodule_search_locations)[0])')"
[[ -d "$TF_DIR/xla_aot_runtime_src" ]] || fail "$TF_DIR has no xla_aot_runtime_src"
SMCLI="$("$PYTHON" -c 'import os,sys; print(os.path.join(os.path.dirname(sys.executable), "saved_model_cli"))')"
[[ -x "$SMCLI" ]] || fail "no saved_model_cli next to the venv python ($SMCLI)"
ok "TENSORFLOW_AOT_PATH=$TF_DIR (xla_aot_runtime_src, saved_model_cli present)"

# --- LLVM's model hooks, as shipped by llvm-22-dev (same 22.1 release as the source) ---
TFC=/usr/lib/llvm-22/lib/cmake/llvm/TensorFlowCompile.cmake
[[ -f "$TFC" ]] || fail "$TFC missing (apt-get install llvm-22-dev)"
for needle in "function(tf_find_and_compile" "LLVM_OVERRIDE_MODEL_HEADER_" \
              "LLVM_OVERRIDE_MODEL_OBJECT_" "aot_compile_cpu" "--signature_def_key"; do
  grep -qF -- "$needle" "$TFC" || fail "$TFC lacks '$needle': LLVM's AOT hooks changed"
done
grep -qF -- '--tag_set ${tag_set}' "$TFC" || fail "$TFC: unexpected aot_compile_cpu call"
ok "LLVM 22 TensorFlowCompile.cmake has tf_find_and_compile + LLVM_OVERRIDE_MODEL_{HEADER,OBJECT}_<NAME>"

# --- the cache file is valid CMake and sets what we rely on ---
command -v cmake >/dev/null || fail "cmake not installed"
CHECK_SCRIPT="$(mktemp --suffix=.cmake)"
trap 'rm -f "$CHECK_SCRIPT"' EXIT
cat > "$CHECK_SCRIPT" <<CMAKE
include("$CACHE_FILE")
foreach(v CMAKE_BUILD_TYPE LLVM_ENABLE_PROJECTS LLVM_TARGETS_TO_BUILD)
  if(NOT DEFINED \${v})
    message(FATAL_ERROR "\${v} not set by the cache file")
  endif()
endforeach()
if(NOT LLVM_ENABLE_PROJECTS MATCHES "clang")
  message(FATAL_ERROR "clang not enabled")
endif()
CMAKE
cmake -P "$CHECK_SCRIPT" || fail "$CACHE_FILE does not load in CMake"
ok "mlgo_release.cmake loads in CMake $(cmake --version | head -1 | awk '{print $3}')"

model_args() {  # $1 = policy/export dir, $2 = LLVM model name, $3 = path option
  local dir="$1" name="$2" opt="$3" up
  up="$(echo "$name" | tr a-z A-Z)"
  if [[ -z "$dir" ]]; then
    echo "-D$opt=none"
  elif [[ -f "$dir/llvm_embed/$name.h" && -f "$dir/llvm_embed/$name.o" ]]; then
    echo "-DLLVM_OVERRIDE_MODEL_HEADER_$up=$dir/llvm_embed/$name.h -DLLVM_OVERRIDE_MODEL_OBJECT_$up=$dir/llvm_embed/$name.o"
  elif [[ -f "$dir/saved_policy/saved_model.pb" ]]; then
    echo "-D$opt=$dir/saved_policy"
  else
    fail "$dir: neither an export dir (llvm_embed/$name.{h,o}) nor a policy dir (saved_policy/)"
  fi
}
INL_ARGS="$(model_args "$INLINER" InlinerSizeModel LLVM_INLINER_MODEL_PATH)"
EV_ARGS="$(model_args "$EVICT" RegAllocEvictModel LLVM_RAEVICT_MODEL_PATH)"
ok "model options: $INL_ARGS $EV_ARGS"
if [[ $CHECK == 1 ]]; then
  echo "check only: no source download, configure or build (see README.md)"
  exit 0
fi

[[ -n "$INLINER$EVICT" ]] || fail "give --inliner_policy and/or --evict_policy"
[[ -n "$WORKDIR" ]] || fail "give --workdir (needs ~40 GB free)"
command -v ninja >/dev/null || fail "ninja not installed (apt-get install ninja-build)"
mkdir -p "$WORKDIR"
cd "$WORKDIR"
if [[ -z "$SOURCE_DIR" ]]; then
  SOURCE_DIR="$(ls -d "$WORKDIR"/llvm-toolchain-22-*/ 2>/dev/null | head -1 || true)"
  if [[ -z "$SOURCE_DIR" ]]; then
    echo "fetching Debian's llvm-toolchain-22 source package (~200 MB)..."
    apt-get source llvm-toolchain-22 || fail "apt-get source failed: add a deb-src line for bookworm (see DESIGN.md), or pass --source_dir of an llvm-project 22 checkout"
    SOURCE_DIR="$(ls -d "$WORKDIR"/llvm-toolchain-22-*/ | head -1)"
  fi
fi
[[ -f "$SOURCE_DIR/llvm/CMakeLists.txt" ]] || fail "$SOURCE_DIR/llvm/CMakeLists.txt missing"
for opt in TENSORFLOW_AOT_PATH LLVM_INLINER_MODEL_PATH LLVM_RAEVICT_MODEL_PATH; do
  grep -rqF "$opt" "$SOURCE_DIR/llvm/CMakeLists.txt" "$SOURCE_DIR/llvm/lib/Analysis/CMakeLists.txt" \
      "$SOURCE_DIR/llvm/lib/CodeGen/CMakeLists.txt" || fail "$opt not found in the LLVM sources"
done
ok "LLVM sources know TENSORFLOW_AOT_PATH, LLVM_INLINER_MODEL_PATH, LLVM_RAEVICT_MODEL_PATH"
# Project patches, if any (none needed for LLVM 22.1: the release-mode hooks are upstream).
for p in "$HERE"/*.patch; do
  [[ -e "$p" ]] || continue
  patch -d "$SOURCE_DIR" -p1 --forward < "$p" || fail "patch $p does not apply"
done
# shellcheck disable=SC2086
cmake -G Ninja -S "$SOURCE_DIR/llvm" -B "$WORKDIR/build" -C "$CACHE_FILE" \
  -DTENSORFLOW_AOT_PATH="$TF_DIR" $INL_ARGS $EV_ARGS \
  -DPython3_EXECUTABLE="$PYTHON"
ninja -C "$WORKDIR/build" -j "$JOBS" clang llc opt
echo "built: $WORKDIR/build/bin/clang (use -mllvm -enable-ml-inliner=release)"
