#!/usr/bin/env bash
# pipecut-run in one process: every fixture split into 2 and 4 stages, with 1
# and 4 micro-batches, gives bit for bit what the unsplit program gives here,
# which is within tolerance of the PyTorch references (--check); plus the 1F1B
# schedule, traces, JSON reports, and the exit codes users script against.
set -uo pipefail
run=$1 py=$2 src=$3 splits=$4 out=$5 lonely_port=${6:-29890} manifest_sync=$7
mkdir -p "$out"
models=$src/testdata/models
fail=0 pass=0
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
source "$(dirname "${BASH_SOURCE[0]}")/test_part.sh"  # part, want_m1
# The unsplit program (the one-stage split of `{}`) run here is the bitwise
# oracle for every split; it is itself within tolerance of the committed
# references, which may come from a CPU that rounds differently. Run once per
# (model, M), when a split first needs it; `unsplit MODEL M blas` runs it with
# --cpu-matmul blas (ATen's BLAS, what NativeRT's .pt2 stages run) into
# MODEL.whole.blas.mbM.safetensors (onednn likewise; unsaid, auto).
declare -A whole=()
unsplit() {  # unsplit MODEL M [auto|onednn|blas]
  local model=$1 m=$2 ref=$models/$1.ref.safetensors matmul=${3:-auto} tag=""
  [[ $m == 4 ]] && ref=$models/$model.mb4.ref.safetensors
  [[ $matmul != auto ]] && tag=.$matmul
  [[ -n ${whole[$model.$m$tag]:-} ]] && return
  whole[$model.$m$tag]=1
  # One intra-op thread, as every stage of the splits below gets on the
  # 2-core machines the tests run on: oneDNN's AVX2 kernels (AMD Zen 3)
  # split a product's reduction across threads, so the bits depend on the
  # thread count (docs/limits.md).
  expect 0 "$model unsplit M=$m $matmul" -- "$run" "$splits/$model.whole" -m "$m" --inputs "$ref" --check "$ref" \
    --cpu-matmul "$matmul" --threads 1 --output "$out/$model.whole$tag.mb$m.safetensors" -q
}
for spec in "$src"/testdata/specs/*.json; do
  name=$(basename "$spec" .json); model=${name%.*}
  if want_m1 "$name"; then
    unsplit "$model" 1
    expect 0 "$name M=1" -- "$run" "$splits/$name" --inputs "$models/$model.ref.safetensors" --check "$out/$model.whole.mb1.safetensors" --exact -q
  fi
  if [[ $part != rest ]]; then
    unsplit "$model" 4
    expect 0 "$name M=4" -- "$run" "$splits/$name" -m 4 --inputs "$models/$model.mb4.ref.safetensors" --check "$out/$model.whole.mb4.safetensors" --exact -q
  fi
done
# The .pt2 stages through NativeRT (--stage-format pt2): bit for bit what the
# unsplit TorchScript program gives with ATen's BLAS (NativeRT's linear
# layers are ATen's), for every split, with the no_grad and
# disabled-autocast regions NativeRT does not know inlined and maps of static
# length unrolled (test_split writes NAME.inlined beside each split). An
# enabled autocast region stays, and NativeRT refuses it: below, naming file
# and op.
nativert || no_nativert run_pipeline
nativert && for spec in "$src"/testdata/specs/*.json; do
  name=$(basename "$spec" .json); model=${name%.*}
  if want_m1 "$name"; then
    unsplit "$model" 1 blas
    expect 0 "$name pt2 M=1" -- "$run" "$splits/$name.inlined" --stage-format pt2 --inputs "$models/$model.ref.safetensors" \
      --check "$out/$model.whole.blas.mb1.safetensors" --exact -q
  fi
  if [[ $part != rest ]]; then
    unsplit "$model" 4 blas
    expect 0 "$name pt2 M=4" -- "$run" "$splits/$name.inlined" --stage-format pt2 -m 4 --schedule 1f1b \
      --inputs "$models/$model.mb4.ref.safetensors" --check "$out/$model.whole.blas.mb4.safetensors" --exact -q
  fi
done
if [[ $part == rest ]]; then
  echo "run_pipeline (M=1 of the other splits): $pass passed, $fail failed"
  [[ $fail -eq 0 ]]
  exit
fi
unsplit mlp 1
unsplit multi_io 1
# Both kernel choices, whichever one this CPU's auto takes (blas on Intel CPUs,
# onednn on other x86 ones: runtime/cpu_matmul.h): a split bit for bit the
# unsplit program with the same choice, and auto bit for bit its own. mlp's
# products sum in another order under oneDNN (llama_tiny's are too small to
# differ), so that the last check tells the two apart.
for matmul in onednn blas; do
  unsplit mlp 4 "$matmul"
  expect 0 "mlp.2 --cpu-matmul $matmul M=4" -- "$run" "$splits/mlp.2" -m 4 --cpu-matmul "$matmul" \
    --inputs "$models/mlp.mb4.ref.safetensors" --check "$out/mlp.whole.$matmul.mb4.safetensors" --exact -q
done
cmp -s "$out/mlp.whole.onednn.mb4.safetensors" "$out/mlp.whole.blas.mb4.safetensors" &&
  bad "mlp: onednn and blas agree bit for bit, so the next check tells nothing" || ok
expect 0 "auto is $auto_matmul on this $cpu_vendor CPU" -- "$run" "$splits/mlp.whole" -m 4 \
  --inputs "$models/mlp.mb4.ref.safetensors" --check "$out/mlp.whole.$auto_matmul.mb4.safetensors" --exact -q
# The plain .pt2 stages run as they are where they hold no region.
nativert && for name in mlp.2 cnn_bn.4 dynamic_flatten.2 llama_tiny_decomp.4; do
  model=${name%.*}
  unsplit "$model" 4 blas
  expect 0 "$name pt2 (not inlined) M=4" -- "$run" "$splits/$name" --stage-format pt2 -m 4 \
    --inputs "$models/$model.mb4.ref.safetensors" --check "$out/$model.whole.blas.mb4.safetensors" --exact -q
done
if nativert; then
  expect 2 "pt2: enabled autocast" -- "$run" "$splits/autocast_bf16.both" --stage-format pt2 --random-inputs -q
  contains "pt2 autocast message" "autocast_bf16.both/stage_001.pt2: NativeRT cannot load it: Unknown higher order op: wrap_with_autocast"
else
  expect 2 "pt2 without NativeRT" -- "$run" "$splits/mlp.2" --stage-format pt2 --random-inputs -q
  contains "pt2 without NativeRT message" "mlp.2/stage_000.pt2: this pipecut-run links LibTorch"
  contains "pt2 without NativeRT: what to do" "built without NativeRT"
fi
# Dynamic sizes outside the exported range are refused before any stage runs
# (batch 3 in 3 micro-batches of 1; export assumed a batch of at least 2).
expect 2 "below a symbol's minimum" -- "$run" "$splits/llama_dynamic.2" -m 3 --inputs "$models/llama_dynamic.ref.safetensors" -q
contains "below minimum message" "input 'input_ids': micro-batch shape [1, 5]: dimension 0 is 1, below the exported minimum 2 of s"
# What a stage receives is checked against the manifest: a manifest that
# says the hidden state is one wider than it is fails naming the stage input.
rm -rf "$out/llama_dynamic.2.wider" && cp -r "$splits/llama_dynamic.2" "$out/llama_dynamic.2.wider"
"$py" - "$out/llama_dynamic.2.wider/manifest.json" <<'PY'
import json, sys
path = sys.argv[1]
m = json.load(open(path))
out = next(o for o in m["stages"][0]["outputs"] if len(o["tensor"]["shape"]) == 3)
for o in [out] + [i for i in m["stages"][1]["inputs"] if i["name"] == out["name"]]:
    o["tensor"]["shape"][2]["size"] = str(int(o["tensor"]["shape"][2]["size"]) + 1)
json.dump(m, open(path, "w"))
PY
"$manifest_sync" "$out/llama_dynamic.2.wider"
expect 2 "stage input shape" -- "$run" "$out/llama_dynamic.2.wider" --inputs "$models/llama_dynamic.ref.safetensors" -q
contains "stage input shape message" "stage 1 input '"
contains "stage input shape detail" ": shape [3, 5, 32]: dimension 2 is 32, the program takes 33"
# Llama's no_grad region inlined into its .pt2 stages (split --inline-grad-regions, by test_split).
if nativert; then
  unsplit llama_tiny 4 blas
  expect 0 "llama_tiny.4 inlined pt2 M=4" -- "$run" "$splits/llama_tiny.4.inlined" --stage-format pt2 -m 4 \
    --inputs "$models/llama_tiny.mb4.ref.safetensors" --check "$out/llama_tiny.whole.blas.mb4.safetensors" --exact -q
  expect 2 "pt2: no_grad region" -- "$run" "$splits/llama_tiny.2" --stage-format pt2 --random-inputs -q
  contains "pt2 no_grad message" "llama_tiny.2/stage_000.pt2: NativeRT cannot load it: Unknown higher order op: wrap_with_set_grad_enabled"
  expect 2 "pt2: map" -- "$run" "$splits/control_flow.4" --stage-format pt2 --random-inputs -q
  contains "pt2 map message" "control_flow.4/stage_000.pt2: NativeRT cannot load it: Unknown higher order op: map_impl"
fi
# A stage the split could write only as .pt2 (enabled autocast; test_split's autocast_bf16.both).
expect 2 "stage without .pt" -- "$run" "$splits/autocast_bf16.both" --random-inputs -q
contains "no .pt message" "stage 1: has no TorchScript (.pt) file, the format cannot express it (node 'to_1' (higher_order.wrap_with_autocast)"
contains "no .pt hint" "run its .pt2 with --stage-format pt2"
expect 1 "stage format usage" -- "$run" "$splits/mlp.2" --stage-format onnx --random-inputs
contains "stage format message" "--stage-format: expected torchscript, pt2, aoti or auto"
expect 1 "pt2 training" -- "$run" "$splits/mlp.2" --stage-format pt2 --train --data "$models/mlp.ref.safetensors"
contains "pt2 training message" "--stage-format: --train runs torchscript (autograd) or aoti"
expect 1 "pt2 profile" -- "$run" "$splits/mlp.2" --stage-format pt2 --profile "$out/p.json" --random-inputs
contains "pt2 profile message" "--stage-format excludes --profile"
# 1F1B order, several iterations, trace and JSON report.
expect 0 "1f1b" -- "$run" "$splits/llama_tiny.4" -m 4 --schedule 1f1b --warmup 1 --iterations 2 \
  --inputs "$models/llama_tiny.mb4.ref.safetensors" --check "$out/llama_tiny.whole.mb4.safetensors" --exact \
  --json --trace "$out/trace.json" --output "$out/merged.safetensors"
echo "$LAST_LOG" | python3 -c '
import json, sys
r = json.load(sys.stdin)
assert r["check"]["ok"] and r["schedule"] == "1f1b" and r["microbatches"] == 4, r
assert abs(r["bubble"]["theoretical"] - 3 / 7) < 1e-9, r["bubble"]
assert len(r["stage_stats"]) == 4 and r["throughput_samples_per_s"] > 0 and r["latency_ms"]["p99"] >= r["latency_ms"]["p50"] > 0
assert r["samples"] == 16 and r["peak_memory"][0]["bytes"] > 0
' || { echo "FAIL: JSON report"; fail=$((fail+1)); }
python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in t if e["ph"] == "X" and e["cat"] == "compute"]
assert len(spans) == 4 * 4 * 2, len(spans)
assert {e["tid"] for e in spans} == {0, 1, 2, 3}
' "$out/trace.json" || { echo "FAIL: trace"; fail=$((fail+1)); }
# Random inputs from the manifest (the dynamic batch takes any micro-batch size).
expect 0 "random inputs" -- "$run" "$splits/dynamic_batch.4" --random-inputs --seed 7 --batch-size 3 -m 4 -q
expect 0 "torch.save inputs" -- bash -c "'$py' -c \"
import sys; sys.path.insert(0, '$src/scripts')
import torch; from refio import read_ref
ins, outs, _ = read_ref('$models/multi_io.ref.safetensors')
torch.save(tuple(ins), '$out/multi_io_inputs.pt')
\" && '$run' '$splits/multi_io.2' --inputs '$out/multi_io_inputs.pt' --check '$out/multi_io.whole.mb1.safetensors' --exact -q"
# A mismatch exits 4; bad input exits 2 with a message naming what is wrong.
"$py" -c "
import sys; sys.path.insert(0, '$src/scripts')
from refio import read_ref, write_ref
ins, outs, meta = read_ref('$models/mlp.ref.safetensors')
write_ref('$out/mlp.wrong.safetensors', ins, [o + 1e-3 for o in outs], meta)
"
expect 4 "check mismatch" -- "$run" "$splits/mlp.2" --inputs "$models/mlp.ref.safetensors" --check "$out/mlp.wrong.safetensors" -q
contains "mismatch message" "check: MISMATCH"
# One ulp off: within the default fp32 tolerance, but not bitwise.
"$py" -c "
import sys; sys.path.insert(0, '$src/scripts')
import torch; from refio import read_ref, write_ref
ins, outs, meta = read_ref('$out/mlp.whole.mb1.safetensors')
write_ref('$out/mlp.ulp.safetensors', ins, [torch.nextafter(o, torch.full_like(o, float('inf'))) for o in outs], meta)
"
expect 0 "within tolerance" -- "$run" "$splits/mlp.2" --inputs "$models/mlp.ref.safetensors" --check "$out/mlp.ulp.safetensors" -q
expect 4 "exact mismatch" -- "$run" "$splits/mlp.2" --inputs "$models/mlp.ref.safetensors" --check "$out/mlp.ulp.safetensors" --exact -q
contains "exact message" "output 0 differs bitwise"
expect 2 "wrong batch" -- "$run" "$splits/mlp.2" -m 4 --inputs "$models/mlp.ref.safetensors" -q
contains "batch message" "input 'x': a batch of 2 does not split into 4 equal micro-batches"
expect 2 "static shape" -- "$run" "$splits/mlp.2" -m 1 --inputs "$models/mlp.mb4.ref.safetensors" -q
contains "shape message" "does not match the exported shape"
expect 2 "no cuda" -- "$run" "$splits/mlp.2" --devices cuda:0 --inputs "$models/mlp.ref.safetensors" -q
contains "cuda message" "--devices: 'cuda:0' requested, but no CUDA device is available"
expect 2 "device count" -- "$run" "$splits/mlp.4" --devices cpu,cpu --inputs "$models/mlp.ref.safetensors" -q
contains "devices message" "gives 2 devices for 4 stages"
expect 2 "missing dir" -- "$run" "$out/nowhere" --random-inputs -q
contains "dir message" "$out/nowhere: is not a split directory (no such directory)"
expect 1 "usage" -- "$run" "$splits/mlp.2" --schedule zigzag --random-inputs
contains "usage message" "--schedule: expected gpipe or 1f1b"
expect 2 "stage ranks outside" -- "$run" "$splits/mlp.2" --stage-ranks 0,5 --random-inputs -q
contains "ranks message" "--stage-ranks: rank 5 is outside the world of 1"
expect 2 "stage ranks count" -- "$run" "$splits/mlp.2" --stage-ranks 0 --random-inputs -q
contains "ranks message" "--stage-ranks: gives 1 ranks for 2 stages"
expect 2 "input count" -- "$run" "$splits/multi_io.2" --inputs "$models/mlp.ref.safetensors" -q
contains "inputs message" "mlp.ref.safetensors: holds 1 input tensors; the stages take 4"
expect 2 "bad RANK" -- env RANK=abc "$run" "$splits/mlp.2" --random-inputs -q
contains "RANK message" "RANK: environment variable is not an integer: 'abc'"
# A rank whose peers never come: rendezvous fails at the timeout (exit 5),
# naming the address and the rank that never arrived.
expect 5 "no peer" -- env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$lonely_port "$run" "$splits/mlp.2" --random-inputs -q --timeout 3
contains "rendezvous message" "rendezvous at 127.0.0.1:$lonely_port: rank 1 never arrived within the timeout (3 s)"
# Placements NCCL cannot carry are refused before any rendezvous, so a build
# without NCCL names the placement first (runtime/placement.h).
dist=(env RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$lonely_port)
expect 2 "nccl with a cpu stage" -- "${dist[@]}" "$run" "$splits/mlp.2" --backend nccl --devices cuda:0,cpu --random-inputs -q --timeout 3
contains "nccl cpu message" "--backend nccl: stage 1 (rank 1) is on cpu; NCCL carries only CUDA tensors"
expect 2 "nccl, two ranks on one gpu" -- "${dist[@]}" "$run" "$splits/mlp.2" --backend nccl --devices cuda:0 --random-inputs -q --timeout 3
contains "nccl shared message" "--backend nccl: ranks 0 (stage 0) and 1 (stage 1) of one machine both use cuda:0"
# --devices cuda is cuda:LOCAL_RANK: one GPU per rank passes the placement and
# fails only here, where no GPU exists.
expect 2 "nccl, cuda per rank" -- env RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 "$run" "$splits/mlp.2" --backend nccl --devices cuda --random-inputs -q --timeout 3
contains "cuda per rank message" "--devices: 'cuda:1' requested, but no CUDA device is available"
expect 2 "unknown backend" -- "${dist[@]}" "$run" "$splits/mlp.2" --backend mpi --random-inputs -q --timeout 3
contains "backend message" "--backend: unknown backend 'mpi' (gloo, gloo-strict, nccl, auto)"
rm -rf "$out/tampered" && cp -r "$splits/mlp.2" "$out/tampered" && printf 'x' | dd of="$out/tampered/stage_001.pt" bs=1 seek=64 conv=notrunc 2>/dev/null
expect 2 "tampered stage" -- "$run" "$out/tampered" --inputs "$models/mlp.ref.safetensors" -q
contains "hash message" "stage 1 file 'stage_001.pt': xxh3_128"
echo "run_pipeline: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
