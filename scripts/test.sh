#!/usr/bin/env bash
# The README's test command: set up (idempotent), build, run every test.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh" >/dev/null
ctest --test-dir "${PIPECUT_BUILD_DIR:-$root/build}" -j2 --output-on-failure "$@"
