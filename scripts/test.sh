#!/usr/bin/env bash
# The README's test command: set up (idempotent), build, run every test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$("$root/scripts/setup.sh")
build=${PIPECUT_BUILD_DIR:-$root/build}
mkdir -p "$build"
# torch's CMake config is chatty (CUDA arch and kineto warnings); show it only on failure.
cmake -S "$root" -B "$build" -G Ninja -DPIPECUT_PYTHON="$venv/bin/python" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2
ctest --test-dir "$build" -j2 --output-on-failure "$@"
