#!/usr/bin/env bash
# Killing one rank mid-run makes every other rank exit non-zero, naming the
# failed peer, well within the timeout; a hung (stopped) rank ends the others
# at the timeout.
set -uo pipefail
run=$1 src=$2 splits=$3 port=${4:-29950} out=$5
mkdir -p "$out"
ref=$src/testdata/models/llama_tiny.mb4.ref.safetensors
fail=0
trial() {  # trial SIGNAL TIMEOUT MAX_SECONDS
  local sig=$1 timeout=$2 limit=$3 pids=()
  port=$((port + 1))
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$run" "$splits/llama_tiny.4" -m 4 --inputs "$ref" -q --iterations 1000000 --timeout "$timeout" \
      >"$out/kill.$sig.rank$r.log" 2>&1 &
    pids+=($!)
  done
  sleep 3
  kill -"$sig" "${pids[1]}"
  local t0=$SECONDS
  for r in 0 2; do
    local waited=0
    while kill -0 "${pids[$r]}" 2>/dev/null && ((SECONDS - t0 < limit + 20)); do sleep 0.2; done
    if kill -0 "${pids[$r]}" 2>/dev/null; then
      echo "FAIL ($sig): rank $r still running $((SECONDS - t0)) s after rank 1 was stopped"; kill -9 "${pids[$r]}"; fail=$((fail+1))
    fi
    wait "${pids[$r]}"; local rc=$?
    local elapsed=$((SECONDS - t0))
    if [[ $rc -eq 0 ]]; then echo "FAIL ($sig): rank $r exited 0"; fail=$((fail+1)); fi
    if ((elapsed > limit)); then echo "FAIL ($sig): rank $r took ${elapsed}s (limit ${limit}s)"; fail=$((fail+1)); fi
    grep -q "rank . failed or is unreachable\|no data from rank . within the timeout\|stopping: rank\|lost contact" "$out/kill.$sig.rank$r.log" ||
      { echo "FAIL ($sig): rank $r message:"; cat "$out/kill.$sig.rank$r.log"; fail=$((fail+1)); }
    echo "$sig: rank $r exit $rc after ~${elapsed}s: $(head -1 "$out/kill.$sig.rank$r.log")"
  done
  kill -9 "${pids[1]}" 2>/dev/null; wait "${pids[1]}" 2>/dev/null
}
trial KILL 30 10    # a dead peer is noticed at once, long before the 30 s timeout
trial STOP 5 15     # a silent peer is noticed at the timeout
[[ $fail -eq 0 ]]
