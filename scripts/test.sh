#!/usr/bin/env bash
# The README's test command: set up (idempotent), build, run every test
# (ctest), then the torch-free unit tests under ASan+UBSan (not when ctest
# arguments select tests, nor with PIPECUT_SKIP_ASAN=1).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
ctest --test-dir "${PIPECUT_BUILD_DIR:-$root/build}" -j2 --output-on-failure "$@"
if [[ $# -eq 0 && ${PIPECUT_SKIP_ASAN:-0} != 1 ]]; then
  bash "$root/scripts/asan_tests.sh"
fi
