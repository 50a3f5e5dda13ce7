#!/usr/bin/env bash
# Idempotent machine setup for pipecut: Debian packages + a Python venv holding
# torch (its LibTorch is what we link against) and the fixture generator's needs.
# A second run on a set-up machine only checks stamps and returns in seconds.
# Prints the Python to build against on stdout.
#
#   PIPECUT_TORCH_VERSION=X.Y.Z   that torch, in venv-torch-X.Y.Z (default:
#                                 cmake/torch_versions.cmake's, the lent GPU
#                                 machines' torch); 2.11 to the newest release
#   PIPECUT_PYTHON=/path/python   a Python whose torch is already installed:
#                                 nothing is installed into it
#   PIPECUT_VENV=DIR              the venv's directory
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
versions=$root/cmake/torch_versions.cmake
TORCH_VERSION=${PIPECUT_TORCH_VERSION:-$(sed -n 's/^set(PIPECUT_TORCH_DEFAULT \(.*\))$/\1/p' "$versions")}
oldest=$(sed -n 's/^set(PIPECUT_TORCH_OLDEST \(.*\))$/\1/p' "$versions")
newest=$(sed -n 's/^set(PIPECUT_TORCH_NEWEST \(.*\))$/\1/p' "$versions")
TRANSFORMERS_VERSION=5.23.0
VENV="${PIPECUT_VENV:-$HOME/.cache/pipecut/venv-torch-$TORCH_VERSION}"
# libgloo-dev: only its headers, which torch's ProcessGroupGloo.hpp includes (the wheel ships none);
# every gloo type in that class sits behind a pointer, and the symbols come from libtorch.
# ccache: a second checkout (a fresh clone, a CI re-run on a kept machine) builds from the first one's objects.
APT_PACKAGES=(cmake ninja-build g++ ccache libprotobuf-dev protobuf-compiler libcli11-dev
              nlohmann-json3-dev catch2 libgloo-dev python3-venv
              libsimdjson-dev libssl-dev libmimalloc-dev libzip-dev zlib1g-dev libxxhash-dev libabsl-dev)

log() { echo "setup: $*" >&2; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing Debian packages: ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [[ -n ${PIPECUT_PYTHON:-} ]]; then
  # The user's own torch: CMake checks its version (cmake/torch_versions.cmake).
  "$PIPECUT_PYTHON" -c 'import torch' 2>/dev/null ||
    { log "PIPECUT_PYTHON=$PIPECUT_PYTHON cannot import torch"; exit 1; }
  echo "$PIPECUT_PYTHON"
  exit 0
fi
# X.Y.Z within [oldest, newest]: refused before gigabytes are downloaded.
in_range() {
  [[ $1 =~ ^([0-9]+)\.([0-9]+)\.[0-9]+$ ]] || return 1
  local v=$((BASH_REMATCH[1] * 1000 + BASH_REMATCH[2]))
  local lo=$((${oldest%%.*} * 1000 + ${oldest#*.})) hi=$((${newest%%.*} * 1000 + ${newest#*.}))
  ((v >= lo && v <= hi))
}
if ! in_range "$TORCH_VERSION"; then
  log "PIPECUT_TORCH_VERSION=$TORCH_VERSION: pipecut builds against torch $oldest to $newest (a release: X.Y.Z)"
  exit 1
fi

REQS="torch==$TORCH_VERSION transformers==$TRANSFORMERS_VERSION numpy jsonschema"
STAMP="$VENV/.pipecut-stamp"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$REQS" ]]; then
  :
else
  log "creating venv $VENV with $REQS (first run downloads ~3 GB; 5-10 minutes)"
  [[ -x "$VENV/bin/python" ]] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # shellcheck disable=SC2086
  "$VENV/bin/python" -m pip install -q $REQS
  echo "$REQS" > "$STAMP"
fi
echo "$VENV/bin/python"
