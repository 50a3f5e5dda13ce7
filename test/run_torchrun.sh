#!/usr/bin/env bash
# Launched by the pinned torch's torchrun --no-python: the agent owns the store
# (TORCHELASTIC_USE_AGENT_STORE=True) and every rank is a store client. The
# pipeline gives bit for bit what the unsplit program gives in one process.
# BACKEND: gloo (default) or gloo-strict.
set -euo pipefail
run=$1 py=$2 src=$3 splits=$4 port=${5:-29900} backend=${6:-gloo}
ref=$src/testdata/models/llama_tiny.mb4.ref.safetensors
expected=$splits/llama_tiny.whole.torchrun.$backend.safetensors
# One intra-op thread, as each rank's stage runs here (run_pipeline.sh's unsplit says why).
"$run" "$splits/llama_tiny.whole" -m 4 --inputs "$ref" --check "$ref" --threads 1 --output "$expected" -q
torchrun=$(dirname "$py")/torchrun
log=$(timeout 180 "$torchrun" --no-python --nproc-per-node 4 --master-addr 127.0.0.1 --master-port "$port" \
  "$run" "$splits/llama_tiny.4" -m 4 --inputs "$ref" --check "$expected" --exact -q --backend "$backend" 2>&1)
echo "$log" | grep -v "^W1\|^\*\*\*" || true
grep -q "4 processes" <<<"$log" && grep -q "check: ok" <<<"$log"
# The .pt2 stages through NativeRT over the same transport (core-ATen Llama:
# NativeRT refuses the no_grad region the pre-dispatch one keeps), against
# the unsplit program run with ATen's BLAS, as NativeRT runs its linears.
if [[ $("$run" --version) == *"without NativeRT"* ]]; then
  echo "run_torchrun: the NativeRT check skipped: $("$run" --version)"
  exit 0
fi
ref=$src/testdata/models/llama_tiny_decomp.mb4.ref.safetensors
expected=$splits/llama_tiny_decomp.whole.torchrun.$backend.safetensors
"$run" "$splits/llama_tiny_decomp.whole" -m 4 --inputs "$ref" --check "$ref" --cpu-matmul blas --threads 1 --output "$expected" -q
log=$(timeout 180 "$torchrun" --no-python --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$((port + 1))" \
  "$run" "$splits/llama_tiny_decomp.2" -m 4 --stage-format pt2 --inputs "$ref" --check "$expected" --exact -q \
  --backend "$backend" 2>&1)
echo "$log" | grep -v "^W1\|^\*\*\*" || true
grep -q "2 processes" <<<"$log" && grep -q "check: ok" <<<"$log"
