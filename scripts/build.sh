#!/usr/bin/env bash
# Set up (idempotent), configure and build; prints the Python it built
# against on stdout. Shared by test.sh and demo.sh. Extra arguments go to
# `cmake --build`. The torch and the build directory: scripts/torch_env.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/torch_env.sh"
pipecut_torch_env
build=$PIPECUT_BUILD
mkdir -p "$build"
# ccache, when installed, makes rebuilds of other checkouts (and clean CI
# re-runs on a kept machine) cheap; nothing requires it.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Paths relative to the checkout, and the build directory left out of the
# hash: every clone of the repository shares one cache's objects.
export CCACHE_BASEDIR=$root CCACHE_NOHASHDIR=1
# More configure options (e.g. -DPIPECUT_TEST_PORT_BASE=31000), word-split.
read -r -a extra <<<"${PIPECUT_CMAKE_ARGS:-}"
# torch's CMake config is chatty (CUDA arch and kineto warnings); show it only on failure.
cmake -S "$root" -B "$build" -G Ninja -DPIPECUT_PYTHON="$PIPECUT_PY" -DPIPECUT_BUILD_TESTS=ON "${launcher[@]}" "${extra[@]}" \
  >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; exit 1; }
cmake --build "$build" -j2 "$@" >&2
echo "$PIPECUT_PY"
