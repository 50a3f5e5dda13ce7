#!/usr/bin/env bash
# pipecut-run across processes over Gloo on loopback: every split with 2
# processes, the 4-stage splits with 4 processes, M in {1, 4}. Each run must
# give bit for bit what the unsplit program gives in one process here.
set -uo pipefail
run=$1 src=$2 splits=$3 port=${4:-29700}
models=$src/testdata/models
fail=0 pass=0
# whole MODEL M REF: the unsplit program's outputs, computed once per (model, M).
whole() {
  local model=$1 m=$2 ref=$3 dst="$splits/$1.whole.dist.mb$2.safetensors"
  if [[ ! -f $dst ]]; then
    "$run" "$splits/$model.whole" -m "$m" --inputs "$ref" --output "$dst" -q >/dev/null 2>&1 ||
      { echo "FAIL: unsplit $model M=$m did not run"; fail=$((fail+1)); }
  fi
  echo "$dst"
}
launch() {  # launch WORLD DIR INPUTS EXPECTED M
  local world=$1 dir=$2 ref=$3 expected=$4 m=$5 pids=() rc=0
  port=$((port + 1))
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 120 "$run" "$dir" -m "$m" --inputs "$ref" --check "$expected" --exact -q --timeout 60 >"$dir.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < world; r++)); do wait "${pids[$r]}" || rc=$?; done
  if [[ $rc -ne 0 ]] || ! grep -q "check: ok" "$dir.rank0.log"; then
    echo "FAIL: $(basename "$dir") world=$world M=$m (exit $rc)"; tail -3 "$dir".rank*.log; fail=$((fail+1))
  else
    pass=$((pass+1))
  fi
}
rm -f "$splits"/*.whole.dist.mb*.safetensors
for spec in "$src"/testdata/specs/*.json; do
  name=$(basename "$spec" .json); model=${name%.*}
  mb1=$models/$model.ref.safetensors mb4=$models/$model.mb4.ref.safetensors
  launch 2 "$splits/$name" "$mb1" "$(whole "$model" 1 "$mb1")" 1
  launch 2 "$splits/$name" "$mb4" "$(whole "$model" 4 "$mb4")" 4
  [[ $name == *.4 ]] && launch 4 "$splits/$name" "$mb4" "$(whole "$model" 4 "$mb4")" 4
done
echo "run_distributed: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
