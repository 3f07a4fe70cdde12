#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine: apt packages, source-package access,
# the pinned Python venv, and .bazelrc.local pointing Bazel at that venv.
# Fast (a few seconds) when everything is already there.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MLGO_HOME=${MLGO_HOME:-$HOME/.cache/mlgo}
mkdir -p "$MLGO_HOME"
log() { echo "[setup] $*" >&2; }
sudo_cmd=""
[ "$(id -u)" = 0 ] || sudo_cmd="sudo"

APT_PACKAGES=(bazel-bootstrap clang-22 llvm-22 llvm-22-dev lld-22 clang-19 llvm-19 llvm-19-dev
  googletest valgrind dpkg-dev default-jdk-headless python3-venv
  libclang-rt-22-dev  # profile runtime: perf_model corpus (PGO builds)
  libpolly-22-dev curl xz-utils)  # the last three: //llvm_patches:clang_release (relinked libLLVM)

# 1. deb-src entry so `apt-get source` can fetch Debian source packages for corpora.
src_list=/etc/apt/sources.list.d/mlgo-deb-src.sources
need_update=0
if [ ! -f "$src_list" ]; then
  log "adding deb-src entry $src_list"
  $sudo_cmd tee "$src_list" >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  need_update=1
fi

# 2. apt packages, only those missing.
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ $need_update = 1 ]; then
  log "apt-get update"
  $sudo_cmd apt-get update -qq >&2
fi
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >&2
fi

# 3. The pinned venv, keyed by the hash of requirements.txt so a pin change builds a new one.
req="$here/requirements.txt"
key=$(sha256sum "$req" | cut -c1-12)
venv="$MLGO_HOME/venv-$key"
if [ ! -f "$venv/.complete" ]; then
  log "creating venv $venv (first time: a few minutes)"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip >&2 || true
  "$venv/bin/pip" install -q -r "$req" >&2
  touch "$venv/.complete"
fi

# 4. Bazel configuration pointing at that venv (read by third_party/python).
want="# written by setup.sh
build --repo_env=MLGO_PYTHON=$venv/bin/python
fetch --repo_env=MLGO_PYTHON=$venv/bin/python
query --repo_env=MLGO_PYTHON=$venv/bin/python
build --action_env=MLGO_HOME=$MLGO_HOME
"
if [ "$(cat "$here/.bazelrc.local" 2>/dev/null)" != "$(printf '%s' "$want")" ]; then
  printf '%s' "$want" > "$here/.bazelrc.local"
fi
