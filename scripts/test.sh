#!/usr/bin/env bash
# The README's test command: set up (idempotent), build, run the tests.
#
#   bash scripts/test.sh [--full] [CTEST ARGS...]
#
# Quick (the default): every ctest test not labelled "full", i.e. every
# behaviour once, at this CPU's own kernels (test/CMakeLists.txt says what
# "full" holds). --full (what .ci/run runs): every ctest test, then the
# torch-free unit tests under ASan+UBSan (not when ctest arguments select
# tests, nor with PIPECUT_SKIP_ASAN=1).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
full=0
if [[ ${1:-} == --full ]]; then full=1; shift; fi
start=$SECONDS
"$root/scripts/build.sh" >/dev/null
echo "test.sh: built in $((SECONDS - start)) s" >&2
tier=(-LE full)
((full)) && tier=()
ctest --test-dir "${PIPECUT_BUILD_DIR:-$root/build}" -j2 --output-on-failure "${tier[@]}" "$@"
if ((full)) && [[ $# -eq 0 && ${PIPECUT_SKIP_ASAN:-0} != 1 ]]; then
  bash "$root/scripts/asan_tests.sh"
fi
echo "test.sh: $( ((full)) && echo full || echo quick ) tier passed in $((SECONDS - start)) s" >&2
