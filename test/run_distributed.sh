#!/usr/bin/env bash
# pipecut-run across processes over Gloo on loopback: every split with 2
# processes, the 4-stage splits with 4 processes, M in {1, 4}, 1F1B on the
# 4-stage Llama, and the .pt2 stages through NativeRT. Each run must give bit for bit what the unsplit program gives
# in one process here.
#
# BACKEND gloo-strict gives every message one tag, so that messages match by
# order alone, as under NCCL, and checks that one thread issues them all; it
# runs M=4 only (the order of messages does not depend on M).
set -uo pipefail
run=$1 src=$2 splits=$3 port=${4:-29700} backend=${5:-gloo}
models=$src/testdata/models
fail=0 pass=0
# whole MODEL M REF [MATMUL]: the unsplit program's outputs, computed once per
# (model, M, --cpu-matmul; auto unless told), at one intra-op thread as each
# rank's stages run here (run_pipeline.sh's unsplit says why).
whole() {
  local model=$1 m=$2 ref=$3 matmul=${4:-auto}
  local dst="$splits/$1.whole.dist.$backend.$matmul.mb$2.safetensors"
  if [[ ! -f $dst ]]; then
    "$run" "$splits/$model.whole" -m "$m" --inputs "$ref" --cpu-matmul "$matmul" --threads 1 --output "$dst" -q >/dev/null 2>&1 ||
      { echo "FAIL: unsplit $model M=$m did not run"; fail=$((fail+1)); }
  fi
  echo "$dst"
}
launch() {  # launch WORLD DIR INPUTS EXPECTED M [OPTION...]
  local world=$1 dir=$2 ref=$3 expected=$4 m=$5 pids=() rc=0 log=$2.$backend
  shift 5
  port=$((port + 1))
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 120 "$run" "$dir" -m "$m" --inputs "$ref" --check "$expected" --exact -q --timeout 60 --backend "$backend" "$@" \
      >"$log.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < world; r++)); do wait "${pids[$r]}" || rc=$?; done
  if [[ $rc -ne 0 ]] || ! grep -q "check: ok" "$log.rank0.log"; then
    echo "FAIL: $(basename "$dir") world=$world M=$m $* (exit $rc)"; tail -n 3 "$log".rank*.log; fail=$((fail+1))
  else
    pass=$((pass+1))
  fi
}
source "$src/test/test_part.sh"  # part, want_m1
source "$src/test/expect.sh"     # nativert
rm -f "$splits"/*.whole.dist.$backend.*.safetensors  # computed afresh by whole() each run
for spec in "$src"/testdata/specs/*.json; do
  name=$(basename "$spec" .json); model=${name%.*}
  mb1=$models/$model.ref.safetensors mb4=$models/$model.mb4.ref.safetensors
  [[ $backend != gloo-strict ]] && want_m1 "$name" && launch 2 "$splits/$name" "$mb1" "$(whole "$model" 1 "$mb1")" 1
  [[ $part == rest ]] && continue
  launch 2 "$splits/$name" "$mb4" "$(whole "$model" 4 "$mb4")" 4
  [[ $name == *.4 ]] && launch 4 "$splits/$name" "$mb4" "$(whole "$model" 4 "$mb4")" 4
done
if [[ $part == rest ]]; then
  echo "run_distributed ($backend, M=1 of the other splits): $pass passed, $fail failed"
  [[ $fail -eq 0 ]]
  exit
fi
# 1F1B: stage 0 waits for the outputs of micro-batch g - 4 before admitting g;
# with 2 processes each runs two stages, and a queue depth of 1.
ref=$models/llama_tiny.mb4.ref.safetensors
launch 4 "$splits/llama_tiny.4" "$ref" "$(whole llama_tiny 4 "$ref")" 4 --schedule 1f1b --iterations 3
launch 2 "$splits/llama_tiny.4" "$ref" "$(whole llama_tiny 4 "$ref")" 4 --schedule 1f1b --queue-depth 1
# The .pt2 stages through NativeRT (--stage-format pt2) over the same
# transport: 4 stages on 2 ranks for every fixture NativeRT loads, and Llama's
# inlined no_grad split on 4 ranks, against the unsplit TorchScript program
# run with ATen's BLAS, as NativeRT runs. Gloo only: the message order is the
# same whichever files run.
[[ $backend == gloo ]] && ! nativert && no_nativert run_distributed
if [[ $backend == gloo ]] && nativert; then
  # Each fixture's most-stages split (NAME.inlined, from test_split), on 2 ranks.
  for spec in "$src"/testdata/specs/*.json; do
    name=$(basename "$spec" .json); model=${name%.*}
    [[ $name == *.2 && -f $src/testdata/specs/$model.4.json ]] && continue
    mb4=$models/$model.mb4.ref.safetensors
    launch 2 "$splits/$name.inlined" "$mb4" "$(whole "$model" 4 "$mb4" blas)" 4 --stage-format pt2
  done
  launch 4 "$splits/llama_tiny.4.inlined" "$ref" "$(whole llama_tiny 4 "$ref" blas)" 4 --stage-format pt2 --schedule 1f1b
  mb4=$models/llama_dynamic.mb4.ref.safetensors
  launch 4 "$splits/llama_dynamic.4.inlined" "$mb4" "$(whole llama_dynamic 4 "$mb4" blas)" 4 --stage-format pt2
fi
echo "run_distributed ($backend): $pass passed, $fail failed"
[[ $fail -eq 0 ]]
