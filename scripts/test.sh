#!/usr/bin/env bash
# The README's test command: set up (idempotent), build, run the tests.
#
#   bash scripts/test.sh [--full] [CTEST ARGS...]
#
# Quick (the default): every ctest test not labelled "full", i.e. every
# behaviour once, at this CPU's own kernels (test/CMakeLists.txt says what
# "full" holds). --full (what .ci/run runs): every ctest test, then the
# torch-free unit tests under ASan+UBSan (not when ctest arguments select
# tests, nor with PIPECUT_SKIP_ASAN=1), then the quick tier against the
# newest torch and exports read across the two torches (not with
# PIPECUT_SKIP_NEWEST_TORCH=1).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
full=0
if [[ ${1:-} == --full ]]; then full=1; shift; fi
start=$SECONDS
source "$root/scripts/torch_env.sh"
pipecut_torch_env
"$root/scripts/build.sh" >/dev/null
echo "test.sh: built in $((SECONDS - start)) s against $("$PIPECUT_PY" -c 'import torch; print("torch", torch.__version__)') in $PIPECUT_BUILD" >&2
tier=(-LE full)
((full)) && tier=()
phase=$SECONDS
ctest --test-dir "$PIPECUT_BUILD" -j2 --output-on-failure "${tier[@]}" "$@"
echo "test.sh: ctest took $((SECONDS - phase)) s" >&2
if ((full)) && [[ $# -eq 0 && ${PIPECUT_SKIP_ASAN:-0} != 1 ]]; then
  phase=$SECONDS
  bash "$root/scripts/asan_tests.sh"
  echo "test.sh: ASan+UBSan took $((SECONDS - phase)) s" >&2
fi
# The newest torch beside the default (cmake/torch_versions.cmake): its own
# venv and build directory, the quick tier there, then exports read across
# the two, both ways (test/cross_torch.sh). Not when ctest arguments select
# tests, when this run is itself for another torch, or with
# PIPECUT_SKIP_NEWEST_TORCH=1.
newest=$(sed -n 's/^set(PIPECUT_TORCH_NEWEST_RELEASE \(.*\))$/\1/p' "$root/cmake/torch_versions.cmake")
if ((full)) && [[ $# -eq 0 && ${PIPECUT_SKIP_NEWEST_TORCH:-0} != 1 && -z ${PIPECUT_PYTHON:-} &&
                  ${PIPECUT_TORCH_VERSION:-} != "$newest" ]]; then
  default_py=$PIPECUT_PY default_build=$PIPECUT_BUILD
  echo "test.sh: the quick tier against torch $newest" >&2
  phase=$SECONDS
  PIPECUT_TORCH_VERSION=$newest PIPECUT_BUILD_DIR= bash "$root/scripts/test.sh"
  newest_py=$(PIPECUT_TORCH_VERSION=$newest "$root/scripts/setup.sh")
  newest_build=$(PIPECUT_TORCH_VERSION=$newest PIPECUT_BUILD_DIR= bash -c \
    "source '$root/scripts/torch_env.sh' && pipecut_torch_env && echo \$PIPECUT_BUILD")
  bash "$root/test/cross_torch.sh" "$root" "$default_build/test/out/cross_torch" "$default_build" "$default_py" \
    "$newest_build" "$newest_py"
  echo "test.sh: torch $newest (setup, build, quick tier, cross) took $((SECONDS - phase)) s" >&2
fi
echo "test.sh: $( ((full)) && echo full || echo quick ) tier passed in $((SECONDS - start)) s" >&2
