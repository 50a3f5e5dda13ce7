#!/usr/bin/env bash
# Fuzz pipecut's readers with libFuzzer (ASan+UBSan), then run the torch-free
# Catch2 unit tests under ASan+UBSan.
#
#   bash scripts/fuzz.sh [SECONDS] [--no-asan-tests]     (SECONDS per target, default 60)
#
# 1. Installs clang-14 and libclang-rt-14-dev when missing (idempotent, like setup.sh).
# 2. Makes sure the normal build exists (scripts/build.sh): its pipecut splits
#    fixtures for the manifest seeds.
# 3. Builds build-fuzz (cmake -S test/fuzz ... -DPIPECUT_LIBFUZZER=ON): one
#    fuzz_<target> per reader, torch-free, with the lib/ sources compiled in.
# 4. Extracts seeds from the fixtures (scripts/fuzz_seeds.py -> build-fuzz/seeds).
# 5. Runs every target for SECONDS (program_json, the slowest, for twice that
#    on the otherwise idle core), two at a time (one per core), with the
#    corpus kept in build-fuzz/corpus/<target> between runs, the seeds and
#    testdata/fuzz/<target> as extra read-only corpora, and anything found in
#    build-fuzz/findings/<target>/. Prints executions, exec/s, corpus size and
#    findings per target. Then runs each known, not yet fixed finding in
#    testdata/fuzz/open/<target>/ and says whether it still reproduces.
# 6. Unless --no-asan-tests: builds the project in build-asan with
#    -fsanitize=address,undefined (gcc; without UBSan's vptr check, which needs
#    the typeinfo of LibTorch classes the wheel does not export, e.g.
#    c10::DynamicType) and runs pipecut_core_tests on the tags that
#    load no TorchScript/.pt2 modules (LibTorch is not instrumented; leak
#    checking is off because it holds global allocations).
#
# Exits non-zero when a fuzzer found something or the ASan tests failed. A
# finding becomes a regression input by copying it, under a name that says
# what it is, to testdata/fuzz/<target>/; ctest -R fuzz_replay replays it.
#
# Measured on the 2-core development machine (other work running), with
# build/, build-fuzz/ and build-asan/ already built: `bash scripts/fuzz.sh 30`
# takes about 3.5 min: 1.5 min of fuzzing (three rounds of 30 s), 5 s for the
# open findings, and about 2 min for the ASan+UBSan unit tests themselves
# (38 test cases, 105-125 s). A first build of build-fuzz adds about 2 min, a
# first build of build-asan about 7 min.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

secs=60
asan_tests=1
for a in "$@"; do
  case $a in
    --no-asan-tests) asan_tests=0 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS] [--no-asan-tests]" >&2; exit 1 ;;
    *) secs=$a ;;
  esac
done
log() { echo "fuzz: $*" >&2; }
start=$SECONDS

# ---- 1. clang and its runtimes (libFuzzer, ASan, UBSan) ------------------------
APT_PACKAGES=(clang-14 libclang-rt-14-dev)
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
CXX_CLANG=clang++-14

# ---- 2. the normal build ----------------------------------------------------------
source "$root/scripts/torch_env.sh"
pipecut_torch_env
bash scripts/build.sh >/dev/null
build=$PIPECUT_BUILD
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

# ---- 3. the libFuzzer executables ---------------------------------------------
fuzz=$root/build-fuzz
log "building $fuzz"
cmake -S test/fuzz -B "$fuzz" -G Ninja -DCMAKE_CXX_COMPILER="$CXX_CLANG" -DPIPECUT_LIBFUZZER=ON "${launcher[@]}" \
  >"$fuzz.configure.log" 2>&1 || { cat "$fuzz.configure.log" >&2; exit 1; }
mv "$fuzz.configure.log" "$fuzz/configure.log"
cmake --build "$fuzz" -j2 >&2

# ---- 4. seeds --------------------------------------------------------------------
rm -rf "$fuzz/seeds"
python3 scripts/fuzz_seeds.py "$fuzz/seeds" --pipecut "$build/tools/pipecut" >&2

# ---- 5. fuzz ---------------------------------------------------------------------
TARGETS=(program_json payload_config split_spec manifest safetensors pickle archive run_options control_messages)
# Inputs up to about the largest seed: program JSON of the decomposed tiny
# Llama is 1 MB; the others are small.
declare -A MAX_LEN=([program_json]=1100000 [payload_config]=65536 [split_spec]=4096 [manifest]=65536
                    [safetensors]=131072 [pickle]=16384 [archive]=65536 [run_options]=4096 [control_messages]=4096)
# Nine targets on two cores take five rounds of SECONDS; program_json, whose
# inputs are the largest and slowest (it replays its corpus for a good part of
# a short run), runs first and uses the third round's free core too.
declare -A TIME_FACTOR=([program_json]=2)
# Corpus entries kept between runs are at most this big: libFuzzer re-runs the
# whole corpus before fuzzing, and big mutants of the Llama programs (up to
# 1 MB, about a second each under ASan) would soon fill a short run with that.
# The big fixtures come back as seeds every run.
declare -A KEEP_MAX=([program_json]=131072)
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$fuzz/logs"
findings_now() { mkdir -p "$fuzz/findings/$1"; find "$fuzz/findings/$1" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) 2>/dev/null | sort; }
declare -A BEFORE
run_target() {
  local t=$1
  mkdir -p "$fuzz/corpus/$t" "$fuzz/findings/$t"
  local extra=()
  [[ -d testdata/fuzz/$t ]] && extra+=(testdata/fuzz/$t)
  set +e
  "$fuzz/fuzz_$t" "$fuzz/corpus/$t" "$fuzz/seeds/$t" "${extra[@]}" \
    -max_total_time="$((secs * ${TIME_FACTOR[$t]:-1}))" -max_len="${MAX_LEN[$t]}" -timeout=10 -rss_limit_mb=4096 \
    -dict=test/fuzz/pipecut.dict -print_final_stats=1 -artifact_prefix="$fuzz/findings/$t/" \
    >"$fuzz/logs/$t.log" 2>&1
  echo $? >"$fuzz/logs/$t.rc"
  [[ -n ${KEEP_MAX[$t]:-} ]] && find "$fuzz/corpus/$t" -type f -size +"${KEEP_MAX[$t]}"c -delete
}
log "fuzzing ${#TARGETS[@]} targets for ${secs}s each (program_json $((secs * 2))s), two at a time (logs: $fuzz/logs)"
fuzz_start=$SECONDS
for t in "${TARGETS[@]}"; do
  BEFORE[$t]=$(findings_now "$t")
  run_target "$t" &
  while (($(jobs -rp | wc -l) >= 2)); do wait -n || true; done
done
wait
fuzz_wall=$((SECONDS - fuzz_start))

stat() { grep -m1 "^stat::$2:" "$fuzz/logs/$1.log" | awk '{print $2}'; }
total=0 failed=0 new_findings=()
printf '\n%-16s %12s %9s %8s %9s\n' target executions exec/s corpus findings
for t in "${TARGETS[@]}"; do
  execs=$(stat "$t" number_of_executed_units); execs=${execs:-0}
  rate=$(stat "$t" average_exec_per_sec); rate=${rate:-?}
  corpus=$(find "$fuzz/corpus/$t" -type f | wc -l)
  mapfile -t found < <(comm -13 <(echo "${BEFORE[$t]}") <(findings_now "$t") | sed '/^$/d')
  rc=$(cat "$fuzz/logs/$t.rc")
  note=""
  if ((${#found[@]})); then
    new_findings+=("${found[@]}")
    failed=1
  elif [[ $rc != 0 ]]; then
    note="  (exit $rc without an artifact: see $fuzz/logs/$t.log)"
    failed=1
  fi
  total=$((total + execs))
  printf '%-16s %12s %9s %8s %9s%s\n' "$t" "$execs" "$rate" "$corpus" "${#found[@]}" "$note"
done
printf '%-16s %12s\n' total "$total"
echo "fuzzing took ${fuzz_wall}s"
if ((${#new_findings[@]})); then
  echo
  echo "findings (reproduce with build-fuzz/fuzz_<target> FILE; the log is build-fuzz/logs/<target>.log):"
  printf '  %s\n' "${new_findings[@]}"
  echo "Once understood, keep each one as a regression input: copy it to testdata/fuzz/<target>/"
  echo "under a name that says what it exercises (e.g. testdata/fuzz/program_json/cyclic_hop_body.json);"
  echo "ctest -R fuzz_replay then replays it with every build."
fi

# Known findings not fixed yet (testdata/fuzz/open/<target>/, kept out of the
# corpora and the ctest replay): say whether each still reproduces.
if [[ -d testdata/fuzz/open ]]; then
  mkdir -p "$fuzz/open-artifacts"
  while IFS= read -r f; do
    t=$(basename "$(dirname "$f")")
    [[ -x $fuzz/fuzz_$t ]] || continue
    log_open=$fuzz/logs/open-$(basename "$f").log
    # In a subshell that outlives it, so that "Aborted" goes to the log too.
    ("$fuzz/fuzz_$t" -timeout=60 -rss_limit_mb=4096 -artifact_prefix="$fuzz/open-artifacts/" "$f" &&
       echo "exit 0" || echo "exit $?") >"$log_open" 2>&1
    if [[ $(tail -n1 "$log_open") == "exit 0" ]]; then
      echo "open finding $f: no longer reproduces; move it to testdata/fuzz/$t/"
    else
      echo "open finding $f: still reproduces (${log_open#"$root"/})"
    fi
  done < <(find testdata/fuzz/open -type f ! -name '*.md' | sort)
fi

# ---- 6. the unit tests under ASan+UBSan -----------------------------------------
if ((asan_tests)); then
  bash "$root/scripts/asan_tests.sh" || failed=1
fi
echo "scripts/fuzz.sh took $((SECONDS - start))s"
exit $failed
