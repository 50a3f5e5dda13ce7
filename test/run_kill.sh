#!/usr/bin/env bash
# Killing one rank mid-run (SIGKILL) makes every other rank exit 5, naming the
# failed peer, well within the timeout; a frozen (SIGSTOP) rank is found by its
# silent heartbeat after about 5 s, long before the 30 s timeout, which is how
# a dead peer is found under NCCL, whose transport does not notice it. Every
# rank gets there by unwinding to a typed error, not by the fallback exit.
# BACKEND: gloo (default) or gloo-strict.
set -uo pipefail
run=$1 src=$2 splits=$3 port=${4:-29950} out=$5 backend=${6:-gloo}
mkdir -p "$out"
ref=$src/testdata/models/llama_tiny.mb4.ref.safetensors
fail=0
trial() {  # trial SIGNAL TIMEOUT MAX_SECONDS PATTERN
  local sig=$1 timeout=$2 limit=$3 pattern=$4 pids=() log=$out/kill.$backend.$1
  port=$((port + 1))
  for r in 0 1 2; do
    RANK=$r WORLD_SIZE=3 LOCAL_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$run" "$splits/llama_tiny.4" -m 4 --inputs "$ref" -q --iterations 1000000 --timeout "$timeout" --backend "$backend" \
      >"$log.rank$r.log" 2>&1 &
    pids+=($!)
  done
  sleep 3
  kill -"$sig" "${pids[1]}"
  local t0=$SECONDS
  for r in 0 2; do
    while kill -0 "${pids[$r]}" 2>/dev/null && ((SECONDS - t0 < limit + 20)); do sleep 0.2; done
    if kill -0 "${pids[$r]}" 2>/dev/null; then
      echo "FAIL ($sig): rank $r still running $((SECONDS - t0)) s after rank 1 was stopped"; kill -9 "${pids[$r]}"; fail=$((fail+1))
    fi
    wait "${pids[$r]}"; local rc=$?
    local elapsed=$((SECONDS - t0))
    if [[ $rc -ne 5 ]]; then echo "FAIL ($sig): rank $r exited $rc, wanted 5"; fail=$((fail+1)); fi
    if ((elapsed > limit)); then echo "FAIL ($sig): rank $r took ${elapsed}s (limit ${limit}s)"; fail=$((fail+1)); fi
    grep -q "$pattern" "$log.rank$r.log" ||
      { echo "FAIL ($sig): rank $r message:"; cat "$log.rank$r.log"; fail=$((fail+1)); }
    # The rank ended by unwinding to a typed error (its blocked c10d calls
    # interrupted), not by the last-resort exit under its threads.
    if grep -q "did not unwind" "$log.rank$r.log"; then
      echo "FAIL ($sig): rank $r needed the fallback exit:"; cat "$log.rank$r.log"; fail=$((fail+1))
    fi
    echo "$backend $sig: rank $r exit $rc after ~${elapsed}s: $(head -1 "$log.rank$r.log")"
  done
  kill -9 "${pids[1]}" 2>/dev/null; wait "${pids[1]}" 2>/dev/null
}
# The dead peer is named: by the rank that lost its connection to it, or in
# the abort that rank posted, which the other rank repeats.
trial KILL 30 10 "rank 1 failed or is unreachable\|rank 1 is dead or frozen"
trial STOP 30 15 "rank 1 is dead or frozen\|rank 1 failed or is unreachable"
[[ $fail -eq 0 ]]
