#!/bin/bash
# The source route: builds clang/llc/opt 22 from Debian's llvm-toolchain-22 source (the
# pinned version in debian_pins.json, with Debian's patches) with mlgo policies compiled
# in (LLVM's release mode: -mllvm -enable-ml-inliner=release and
# -regalloc-enable-advisor=release work without any channel or plugin).
# For the same result in ~1 minute instead of ~1.7 CPU-hours, use the relink route:
# `bazel build //llvm_patches:clang_release` (README.md).
#
#   bazel run //llvm_patches:build_patched_clang -- \
#       --inliner_policy=/abs/OUT_inlining --evict_policy=/abs/OUT_eviction \
#       --workdir=/big/disk/llvm-mlgo [--jobs=N] [--source_dir=DIR] [--prepare_only]
#
# The policies are export dirs of tools/export_policy (their llvm_embed/ AOT objects are
# used through LLVM_OVERRIDE_MODEL_*; no saved_model_cli runs inside LLVM's build) or plain
# policy dirs (LLVM then AOT-compiles saved_policy/ itself via TENSORFLOW_AOT_PATH).
#
# Sources: `apt-get source llvm-toolchain-22=<pinned>` first; when that fails (the security
# mirror 404s for this package's .dsc and .orig.tar.xz), the orig tarball from the main
# pool and the debian tarball from the security pool, each checked against the pinned
# sha256 and apt's signed Sources index (release_prefix.py fetch; cached, resumable, in
# $MLGO_HOME/debian_llvm), unpacked with Debian's debian/patches/series applied.
# ccache is used when installed (a model-only rebuild is then minutes).
#
#   --prepare_only  fetch, unpack, patch and check the LLVM options, then stop.
#   --check         only checks what can be checked in seconds (see README.md), no
#                   download/build.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE_FILE="$HERE/mlgo_release.cmake"
PINS="$HERE/debian_pins.json"
TOOL="$HERE/release_prefix.py"
INLINER="" EVICT="" WORKDIR="" SOURCE_DIR="" JOBS="$(nproc)" CHECK=0 PREPARE_ONLY=0
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
    --prepare_only) PREPARE_ONLY=1 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
    *) echo "build_patched_clang: unknown argument $arg" >&2; exit 64 ;;
  esac
done

fail() { echo "build_patched_clang: error: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
pin() { python3 -c "import json,sys; d=json.load(open('$PINS')); print(eval(sys.argv[1]))" "$1"; }

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

# --- the pinned source package: parses, and agrees with apt's signed index if present ---
VERSION="$(pin 'd["version"]')"
SRC_PKG="$(pin 'd["source_package"]')"
python3 "$TOOL" check-index --pins "$PINS" || fail "debian_pins.json disagrees with apt's Sources index"
ok "pinned source $SRC_PKG $VERSION (orig sha256 $(pin 'd["files"]["orig"]["sha256"][:16]')...)"

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

[[ -n "$WORKDIR" ]] || fail "give --workdir (needs ~2 GB for sources, ~15 GB more for the build)"
mkdir -p "$WORKDIR"
WORKDIR="$(cd "$WORKDIR" && pwd)"
cd "$WORKDIR"
T0=$(date +%s)
if [[ -z "$SOURCE_DIR" ]]; then
  SOURCE_DIR="$WORKDIR/src"
  if [[ ! -f "$SOURCE_DIR/.mlgo-patched" ]]; then
    rm -rf "$SOURCE_DIR" "$WORKDIR/apt"
    mkdir -p "$WORKDIR/apt"
    if (cd "$WORKDIR/apt" && apt-get source -q "$SRC_PKG=$VERSION" >/dev/null 2>&1); then
      mv "$(ls -d "$WORKDIR"/apt/"$SRC_PKG"-*/ | head -1)" "$SOURCE_DIR"
      ok "apt-get source $SRC_PKG=$VERSION (dpkg-source applied Debian's patches)"
    else
      echo "apt-get source $SRC_PKG=$VERSION failed (the security mirror 404s for it);" \
           "fetching the orig tarball from the main pool instead"
      FILES="$(python3 "$TOOL" fetch --pins "$PINS" --kinds=orig,debian)" || fail "fetch failed"
      ORIG="$(echo "$FILES" | awk '$1=="orig"{print $2}')"
      DEB="$(echo "$FILES" | awk '$1=="debian"{print $2}')"
      ok "sha256 verified: $(basename "$ORIG"), $(basename "$DEB")"
      mkdir -p "$SOURCE_DIR"
      tar -xJf "$ORIG" -C "$SOURCE_DIR" --strip-components=1
      tar -xJf "$DEB" -C "$SOURCE_DIR"
      n=0
      while read -r p opts; do
        [[ -z "$p" || "$p" == \#* ]] && continue
        patch -d "$SOURCE_DIR" -s -p1 --no-backup-if-mismatch ${opts:-} \
            < "$SOURCE_DIR/debian/patches/$p" || fail "Debian patch $p does not apply"
        n=$((n + 1))
      done < "$SOURCE_DIR/debian/patches/series"
      ok "unpacked and applied $n Debian patches (debian/patches/series)"
    fi
    touch "$SOURCE_DIR/.mlgo-patched"
  fi
fi
[[ -f "$SOURCE_DIR/llvm/CMakeLists.txt" ]] || fail "$SOURCE_DIR/llvm/CMakeLists.txt missing"
for opt in TENSORFLOW_AOT_PATH LLVM_INLINER_MODEL_PATH LLVM_RAEVICT_MODEL_PATH; do
  grep -rqF "$opt" "$SOURCE_DIR/llvm/CMakeLists.txt" "$SOURCE_DIR/llvm/lib/Analysis/CMakeLists.txt" \
      "$SOURCE_DIR/llvm/lib/CodeGen/CMakeLists.txt" || fail "$opt not found in the LLVM sources"
done
ok "LLVM sources know TENSORFLOW_AOT_PATH, LLVM_INLINER_MODEL_PATH, LLVM_RAEVICT_MODEL_PATH"
# mlgo's source edits (source_edits.py; the relink route compiles the same edited files).
# The release-mode hooks themselves are upstream in LLVM 22.1.
python3 "$HERE/source_edits.py" apply "$SOURCE_DIR" || fail "mlgo's source edits do not apply"
echo "sources ready in $(( $(date +%s) - T0 )) s: $SOURCE_DIR"
if [[ $PREPARE_ONLY == 1 ]]; then
  exit 0
fi

[[ -n "$INLINER$EVICT" ]] || fail "give --inliner_policy and/or --evict_policy"
command -v ninja >/dev/null || fail "ninja not installed (apt-get install ninja-build)"
LAUNCHER=()
if command -v ccache >/dev/null; then
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
T1=$(date +%s)
# shellcheck disable=SC2086
cmake -G Ninja -S "$SOURCE_DIR/llvm" -B "$WORKDIR/build" -C "$CACHE_FILE" \
  -DTENSORFLOW_AOT_PATH="$TF_DIR" $INL_ARGS $EV_ARGS "${LAUNCHER[@]}" \
  -DPython3_EXECUTABLE="$PYTHON"
T2=$(date +%s)
# LLVM's build runs saved_model_cli with no dependency on the model's files, so a changed
# policy would keep the old compiled model. A stamp of the models' contents decides when
# the generated model files must go (then ninja regenerates them and relinks).
STAMP="$WORKDIR/build/.mlgo-models.sha256"
NEW_STAMP="$( { for d in "$INLINER" "$EVICT"; do
    [[ -n "$d" ]] && find "$d" -type f \( -path '*saved_policy*' -o -path '*llvm_embed*' \) \
        -print0 | sort -z | xargs -0 sha256sum | awk '{print $1}'; echo "--"; done; } | sha256sum)"
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$NEW_STAMP" ]]; then
  rm -f "$WORKDIR"/build/lib/Analysis/InlinerSizeModel* "$WORKDIR"/build/lib/CodeGen/RegAllocEvictModel*
  ok "models changed (or first build): their generated files are rebuilt"
fi
ninja -C "$WORKDIR/build" -j "$JOBS" clang llc opt
echo "$NEW_STAMP" > "$STAMP"
T3=$(date +%s)
{
  echo "configure_seconds=$((T2 - T1))"
  echo "build_seconds=$((T3 - T2)) jobs=$JOBS nproc=$(nproc)"
  echo "compiles=$(ninja -C "$WORKDIR/build" -t commands clang llc opt | grep -c ' -c ')"
  # A build resumed over several runs: build_seconds is the last run's wall time; the
  # step total (each step's last recorded duration in ninja's log, summed; about the
  # CPU seconds of one core per step) covers them all.
  awk '!/^#/ {d[$4] = $2 - $1} END {for (t in d) {s += d[t]; n++};
       printf "steps_logged=%d step_seconds_total=%.0f\n", n, s / 1000}' \
      "$WORKDIR/build/.ninja_log"
} | tee "$WORKDIR/build_times.txt"
echo "built: $WORKDIR/build/bin/clang (use -mllvm -enable-ml-inliner=release)"
