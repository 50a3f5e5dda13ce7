#!/usr/bin/env bash
# The torch-free unit tests under ASan+UBSan, in their own build tree
# (build-asan, or $PIPECUT_ASAN_BUILD_DIR). Run by scripts/test.sh (CI) after
# ctest, and by scripts/fuzz.sh.
#
# gcc with -fsanitize=address,undefined, without UBSan's vptr check (it needs
# the typeinfo of LibTorch classes the wheel does not export, e.g.
# c10::DynamicType). Only tags whose tests load no TorchScript or .pt2 module
# run: LibTorch is not instrumented, and leak checking is off because it holds
# global allocations. Build type Asan (CMakeLists.txt): -O1, the test code
# -O0. The binary is pipecut_core_tests (test/CMakeLists.txt): the unit
# tests that load no module, without the LibTorch-facing runtime, which was a
# third of the build when the whole pipecut_tests was built instrumented (686
# s on the 2-core machine, 2026-12-07, beside other work). ccache makes later
# builds cheap; the tests take ~2.5 min.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=$("$root/scripts/setup.sh")
asan=${PIPECUT_ASAN_BUILD_DIR:-$root/build-asan}
log() { echo "asan: $*" >&2; }
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
mkdir -p "$asan"
start=$SECONDS
cmake -S "$root" -B "$asan" -G Ninja -DPIPECUT_PYTHON="$python" -DCMAKE_BUILD_TYPE=Asan \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
  "${launcher[@]}" >"$asan/configure.log" 2>&1 || { cat "$asan/configure.log" >&2; exit 1; }
cmake --build "$asan" -j2 --target pipecut_core_tests >&2
build_s=$((SECONDS - start))
# The readers, passes, manifest, safetensors, carving, packages (LibTorch's zip
# reader only), the CLI (inspect, normalize, refusals), checkpoints and merge,
# the training schedules and their message orders, the zip writer (LibTorch's
# writer only as the reference), and the safety rules (destinations, store
# messages, failure texts, option parsing), the operator rules and the dtype
# table with its c10 adapter, and weights from checkpoints (parsed, mapped,
# bound; casts checked against ATen's), operator support (dictionaries,
# marks, runs) (no module is loaded). [split], [emit] and
# [compare] run LibTorch; a new tag runs only once it is added here.
ALLOWED=(json passes manifest carve package cli safetensors checkpoint train_schedule zip_writer safety op_traits weights
         support)
mapfile -t have < <("$asan/test/pipecut_core_tests" --list-tags | grep -o '\[[^]]*\]' | tr -d '[]' | sort -u)
run=() skipped=()
for tag in "${have[@]}"; do
  if [[ " ${ALLOWED[*]} " == *" $tag "* ]]; then run+=("[$tag]"); else skipped+=("[$tag]"); fi
done
log "unit tests ${run[*]} (not ${skipped[*]})"
tests_start=$SECONDS
set +e
(cd "$asan/test" &&
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:detect_stack_use_after_return=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ./pipecut_core_tests "$(IFS=,; echo "${run[*]}")")
rc=$?
set -e
echo "ASan+UBSan unit tests: exit $rc; build ${build_s}s, tests $((SECONDS - tests_start))s"
exit $rc
