#!/usr/bin/env bash
# Idempotent machine setup for pipecut: Debian packages + a Python venv holding the
# pinned torch (its LibTorch is what we link against) and the fixture generator's needs.
# A second run on a set-up machine only checks stamps and returns in seconds.
set -euo pipefail

TORCH_VERSION=2.11.0
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
echo "$VENV"
