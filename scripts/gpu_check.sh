#!/usr/bin/env bash
# The one entry point for GPU checks. On a machine with an NVIDIA GPU and a
# python3 that holds torch: builds pipecut against that torch, splits the
# fixture zoo, and runs every split on CUDA (one process, all stages on one
# GPU) with 1 and 8 micro-batches under --check, then prints throughput and
# bubble for each run. Then 2-process pipelines: over NCCL, one GPU per rank,
# where the machine has two or more GPUs (NCCL refuses two ranks on one GPU);
# over Gloo with CUDA tensors, both ranks on cuda:0, on a one-GPU machine;
# and stages split across devices in one process (--devices cuda:0,cpu).
# Then training (pipecut-run --train) against the eager references, in one
# process and in two; generation (--generate) against the CPU's greedy tokens,
# and its tokens/s against transformers' generate on the GPU.
# With --device cpu the 2-process runs use --backend gloo-strict on the CPU.
#
#   scripts/gpu_check.sh                 # on the GPU machine
#   scripts/gpu_check.sh --device cpu    # the same steps on CPU (tests this script)
#   scripts/gpu_check.sh --only aoti,generate   # some sections: inference (the zoo,
#                                        # 2 processes, two devices, the long run), train,
#                                        # generate, aoti (each with its benchmark on CUDA),
#                                        # aoti-bench (that benchmark alone), support (a
#                                        # split by --support aoti-cuda, mixed formats and devices),
#                                        # train-aoti (compiled training: compile --train, --stage-format aoti)
#
# Environment: PIPECUT_PYTHON (default python3), PIPECUT_GPU_BUILD_DIR (reused
# by a second invocation; default a temp dir), PIPECUT_GPU_BENCH_TIMEOUT (seconds
# each benchmark may take, default 300; 420 for generation's, which compiles),
# PIPECUT_GPU_AOTI_MB (the batch sizes of the AOTInductor benchmark, default "1 8"), PIPECUT_DEPS_PREFIX (headers
# and libraries unpacked by scripts/gpu_deps.sh; default .gpu-deps/prefix when
# present), OUT (a folder for the log and the JSON reports; default a temp dir).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
device=cuda:0 only=
while (($#)); do
  case $1 in
    --device) device=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "gpu_check.sh: unknown argument '$1' (--device DEV, --only inference,train,generate,aoti,aoti-bench,support,train-aoti)" >&2; exit 2 ;;
  esac
done
# want SECTION: whether --only (a comma list; empty: every section) names it.
want() { [[ -z $only || ,$only, == *,$1,* ]]; }
py=${PIPECUT_PYTHON:-python3}
out=${OUT:-$(mktemp -d)}
work=$(mktemp -d)
build=${PIPECUT_GPU_BUILD_DIR:-$work/build}
mkdir -p "$out"
log() { echo "gpu_check: $*" | tee -a "$out/gpu_check.log" >&2; }

"$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')" |
  tee -a "$out/gpu_check.log" || { log "python3 has no torch"; exit 2; }
if [[ $device == cuda* ]] && ! "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  log "no CUDA device visible to torch"; exit 2
fi

# Build against this python's torch.
prefix=${PIPECUT_DEPS_PREFIX:-}
[[ -z $prefix && -d $root/.gpu-deps/prefix ]] && prefix=$root/.gpu-deps/prefix
cmake_args=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DPIPECUT_PYTHON="$(command -v "$py")" -DPIPECUT_BUILD_TESTS=OFF)
if [[ -n $prefix ]]; then
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  cmake_args+=(-DCMAKE_PREFIX_PATH="$prefix/usr" -DCMAKE_CXX_FLAGS="-isystem $prefix/usr/include"
               -DProtobuf_PROTOC_EXECUTABLE="$prefix/usr/bin/protoc" -DProtobuf_INCLUDE_DIR="$prefix/usr/include"
               -DProtobuf_LIBRARY="$prefix/usr/lib/x86_64-linux-gnu/libprotobuf.so")
  # Searched after torch's own nvidia/nccl/include (see CMakeLists.txt).
  [[ -f $prefix/nccl/include/nccl.h ]] && cmake_args+=(-DPIPECUT_NCCL_FALLBACK_INCLUDE="$prefix/nccl/include")
fi
t0=$SECONDS
cmake -S "$root" -B "$build" "${cmake_args[@]}" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; log "configure failed"; exit 3; }
cmake --build "$build" -j "$(nproc)" --target pipecut pipecut-run >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; log "build failed"; exit 3; }
log "built in $((SECONDS - t0)) s"
pipecut=$build/tools/pipecut run=$build/tools/pipecut-run

if want inference; then
# References for 8 micro-batches come from this machine's torch.
"$py" "$root/scripts/fixtures/microbatch_refs.py" --micro 8 --out "$work/refs" >>"$out/gpu_check.log" 2>&1 || { log "reference generation failed"; exit 3; }
fi

# GPU kernels (TF32 convolutions in cuDNN by default, other reduction orders)
# differ from the CPU references in the last bits.
tol=(--atol 1e-3 --rtol 1e-3)
[[ $device == cpu ]] && tol=()  # per-dtype defaults (lib/runtime/compare.h)
fail=0 pass=0
if want inference; then
printf "%-24s %3s %3s %12s %9s %9s %10s\n" split M ok samples/s bubble theory max_err | tee -a "$out/gpu_check.log"
for spec in "$root"/testdata/specs/*.json; do
  name=$(basename "$spec" .json); model=${name%.*}
  "$pipecut" split "$root/testdata/models/$model.pt2" --spec "$spec" -o "$work/splits/$name" --format torchscript >/dev/null ||
    { log "split $name failed"; fail=$((fail+1)); continue; }
  for m in 1 8; do
    if [[ $m == 1 ]]; then ref=$root/testdata/models/$model.ref.safetensors; else ref=$work/refs/$model.mb8.ref.safetensors; fi
    json=$out/$name.m$m.json
    "$run" "$work/splits/$name" --devices "$device" -m $m --inputs "$ref" --check "$ref" "${tol[@]}" \
      --warmup 2 --iterations 5 --json -q >"$json" 2>"$out/$name.m$m.err"
    rc=$?
    read -r ok tput bubble theory err < <("$py" -c "
import json, sys
try:
    r = json.load(open(sys.argv[1]))
    print(r['check']['ok'], round(r['throughput_samples_per_s'], 1), round(r['bubble']['measured'], 3),
          round(r['bubble']['theoretical'], 3), '%.2g' % r['check']['max_abs_error'])
except Exception:
    print('error - - - -')" "$json")
    printf "%-24s %3s %3s %12s %9s %9s %10s\n" "$name" $m "$ok" "$tput" "$bubble" "$theory" "$err" | tee -a "$out/gpu_check.log"
    if [[ $rc -eq 0 && $ok == True ]]; then pass=$((pass+1)); else fail=$((fail+1)); head -3 "$out/$name.m$m.err" | tee -a "$out/gpu_check.log"; fi
  done
done
fi
# Two processes on loopback. RANK/LOCAL_RANK per process; --devices cuda is
# each rank's cuda:LOCAL_RANK.
gpus=0
[[ $device == cuda* ]] && gpus=$("$py" -c "import torch; print(torch.cuda.device_count())")
if ((gpus >= 2)); then two=(--backend nccl --devices cuda) two_name="nccl, cuda:LOCAL_RANK"
elif ((gpus == 1)); then two=(--backend gloo --devices cuda:0) two_name="gloo, both ranks on cuda:0"
else two=(--backend gloo-strict --devices cpu) two_name="gloo-strict, cpu"
fi
port=29811
if want inference; then
for name in llama_tiny.4 multi_io.2 skip.4 dynamic_batch.2; do
  model=${name%.*} ref=$work/refs/${name%.*}.mb8.ref.safetensors
  port=$((port + 1)) pids=() rc=0
  for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 300 "$run" "$work/splits/$name" "${two[@]}" -m 8 --inputs "$ref" --check "$ref" "${tol[@]}" \
      --warmup 2 --iterations 5 --json -q --timeout 120 >"$out/$name.2proc.rank$r.json" 2>"$out/$name.2proc.rank$r.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  ok=$("$py" -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['check']['ok'], round(r['throughput_samples_per_s'],1), r['backend'])" \
       "$out/$name.2proc.rank0.json" 2>/dev/null || echo "error")
  log "2 processes ($two_name) $name M=8: exit $rc, check/throughput/backend: $ok"
  if [[ $rc -eq 0 && $ok == True* ]]; then pass=$((pass+1)); else fail=$((fail+1)); cat "$out/$name.2proc.rank"*.err | tail -6; fi
done
fi
if want inference; then
# Stages on two devices in one process: copies between the GPU and the host.
if [[ $device == cuda* ]]; then
  for name in llama_tiny.2 multi_io.2; do
    ref=$root/testdata/models/${name%.*}.ref.safetensors
    if "$run" "$work/splits/$name" --devices "$device,cpu" --inputs "$ref" --check "$ref" "${tol[@]}" -q \
         >"$out/$name.cross.log" 2>&1; then pass=$((pass+1)); log "--devices $device,cpu $name: ok"
    else fail=$((fail+1)); log "--devices $device,cpu $name: FAILED"; tail -3 "$out/$name.cross.log"; fi
  done
fi
fi
if want train; then
# Training against the eager CPU references of testdata/train (the tiny Llama
# and the tied GPT-2 with their cross-entropy losses, K=4 steps of M=4): SGD
# and AdamW, 1F1B and ZB1P, both stages on the device in one process, then the
# two-process setup above with 1F1B. The merged checkpoint is compared too;
# GPU kernels round differently, so within 1e-3 there (1e-5 on the CPU).
train=$root/testdata/train
ttol=(--rtol 1e-3 --atol 1e-3)
[[ $device == cpu ]] && ttol=()
# check_train TAG REF: merge TAG.ckpt, compare TAG.json and the merged state with REF.
check_train() {
  "$pipecut" merge "$1.ckpt" -o "$1.state.safetensors" -q >"$1.check" 2>&1 &&
    "$py" "$root/scripts/check_train.py" "$1.json" "$2" --state "$1.state.safetensors" "${ttol[@]}" >>"$1.check" 2>&1
}
for model in llama_loss gpt2_loss; do
  split=$work/train/$model.2
  "$pipecut" split "$train/$model.pt2" --spec "$train/$model.2.json" --format torchscript -o "$split" -q >/dev/null ||
    { log "split $model failed"; fail=$((fail+1)); continue; }
  for opt in sgd adamw; do
    ref=$train/$model.$opt.ref.safetensors
    flags=$("$py" -c "
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
print(json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])['__metadata__']['optimizer_flags'])" "$ref")
    for schedule in 1f1b zb1p; do
      tag=$out/train.$model.$opt.$schedule
      # shellcheck disable=SC2086  # flags: several words
      if "$run" "$split" --train --devices "$device" --data "$train/$model.data.safetensors" -m 4 --steps 4 $flags            --schedule $schedule --json -q --save-checkpoint "$tag.ckpt" >"$tag.json" 2>"$tag.err" && check_train "$tag" "$ref"; then
        pass=$((pass+1)); log "train $model $opt $schedule on $device: ok"
      else
        fail=$((fail+1)); log "train $model $opt $schedule on $device: FAILED"; tail -4 "$tag.err" "$tag.check" 2>/dev/null
      fi
    done
    tag=$out/train.$model.$opt.2proc port=$((port + 1)) pids=() rc=0
    for r in 0 1; do
      # shellcheck disable=SC2086
      RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 300 "$run" "$split" --train "${two[@]}" --data "$train/$model.data.safetensors" -m 4 --steps 4 $flags \
        --schedule 1f1b --json -q --timeout 120 --save-checkpoint "$tag.ckpt" >"$tag.rank$r.json" 2>"$tag.rank$r.err" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    cp "$tag.rank0.json" "$tag.json" 2>/dev/null
    if [[ $rc -eq 0 ]] && check_train "$tag" "$ref"; then
      pass=$((pass+1)); log "train $model $opt 1f1b, 2 processes ($two_name): ok"
    else
      fail=$((fail+1)); log "train $model $opt 1f1b, 2 processes ($two_name): FAILED (exit $rc)"
      tail -3 "$tag".rank*.err "$tag.check" 2>/dev/null
    fi
  done
done
fi
if want generate; then
# Generation (pipecut-run --generate) on the KV-cache fixtures: greedy tokens
# as the CPU references (testdata/generate/*.greedy.jsonl), 2 stages on the
# device in one process and in the two-process setup above; then tokens/s
# against transformers' generate on the same device (bench/generate.py).
gen=$root/testdata/generate
echo '{"split_points": {"model.model.layers.2": "BEGINNING"}}' >"$work/gen.two.json"
for model in llama_kv llama_kv_chunk qwen2_kv; do
  split=$work/generate/$model.two eos=()
  [[ $model == qwen2_kv ]] && eos=(--eos 2)
  "$pipecut" split "$gen/$model.pt2" --spec "$work/gen.two.json" -o "$split" -q >/dev/null ||
    { log "split $model failed"; fail=$((fail+1)); continue; }
  tag=$out/generate.$model
  if "$run" "$split" --generate --devices "$device" --prompts "$gen/prompts.jsonl" --max-new-tokens 12 "${eos[@]}" \
       --check-tokens "$gen/$model.greedy.jsonl" --json -q >"$tag.json" 2>"$tag.err"; then
    pass=$((pass+1)); log "generate $model on $device: tokens as the CPU reference"
  else
    fail=$((fail+1)); log "generate $model on $device: FAILED"; tail -3 "$tag.err"
  fi
  port=$((port + 1)) pids=() rc=0
  for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 300 "$run" "$split" --generate "${two[@]}" --prompts "$gen/prompts.jsonl" --max-new-tokens 12 "${eos[@]}" \
      --check-tokens "$gen/$model.greedy.jsonl" --json -q --timeout 120 >"$tag.rank$r.json" 2>"$tag.rank$r.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  if [[ $rc -eq 0 ]]; then pass=$((pass+1)); log "generate $model, 2 processes ($two_name): tokens as the CPU reference"
  else fail=$((fail+1)); log "generate $model, 2 processes ($two_name): FAILED (exit $rc)"; tail -3 "$tag".rank*.err; fi
done
if [[ $device == cuda* ]]; then
  # --aoti: the same splits compiled for CUDA (~2 minutes more) and run as
  # packages, the path that should close the gap to transformers' generate.
  timeout "${PIPECUT_GPU_BENCH_TIMEOUT:-420}" "$py" "$root/bench/generate.py" --device "$device" --rounds 2 --pipecut "$pipecut" --pipecut-run "$run" \
    --rows 16 --hidden 1024 --intermediate 2816 --heads 16 --kv-heads 4 --vocab 8192 --prompts 96 --aoti \
    >"$out/bench_generate.log" 2>&1 || log "bench/generate.py on $device failed"
  grep -E "^compiled|^round" "$out/bench_generate.log" | tee -a "$out/gpu_check.log"
  grep -A16 "^medians" "$out/bench_generate.log" | tee -a "$out/gpu_check.log"
fi
fi
if want aoti; then
# Compiled stages (pipecut compile, --stage-format aoti): llama_dynamic's
# 2-stage split compiled for the device kind, run M=1 and M=4 against the
# CPU references in one process and over 2 processes; then
# bench/aoti_vs_torchscript.py (packages vs TorchScript stages, batch 1 and 8).
kind=${device%%:*}
aoti=$work/aoti.llama_dynamic
if "$pipecut" split "$root/testdata/models/llama_dynamic.pt2" --spec "$root/testdata/specs/llama_dynamic.2.json" -o "$aoti" -q &&
   "$pipecut" compile "$aoti" --device "$kind" --python "$py" --cache "$work/aoti-cache" --json >"$out/aoti_compile.json" 2>"$out/aoti_compile.err"; then
  pass=$((pass+1)); log "pipecut compile --device $kind: $(tr -d '\n' <"$out/aoti_compile.json" | head -c 400)"
  for m in 1 4; do
    ref=$root/testdata/models/llama_dynamic.ref.safetensors && [[ $m == 4 ]] && ref=$root/testdata/models/llama_dynamic.mb4.ref.safetensors
    if "$run" "$aoti" --stage-format aoti --devices "$device" -m $m --inputs "$ref" --check "$ref" --atol 1e-3 --rtol 1e-3 -q \
         >"$out/aoti.m$m.log" 2>&1; then pass=$((pass+1)); log "aoti llama_dynamic M=$m on $device: within 1e-3 of the CPU reference"
    else fail=$((fail+1)); log "aoti llama_dynamic M=$m on $device: FAILED"; tail -3 "$out/aoti.m$m.log"; fi
  done
  # The packages' libraries load from private copies under TMPDIR, deleted
  # once loaded (kernels embedded by pipecut compile): with both stages
  # mapped from deleted copies, SIGKILL leaves nothing there.
  mkdir -p "$work/aoti-tmp"
  TMPDIR="$work/aoti-tmp" "$run" "$aoti" --stage-format aoti --devices "$device" -m 4 \
    --inputs "$root/testdata/models/llama_dynamic.mb4.ref.safetensors" --iterations 1000000 -q >/dev/null 2>&1 &
  pid=$! loaded=0
  for _ in $(seq 600); do
    loaded=$(grep -o "$work/aoti-tmp/pipecut-aoti-[A-Za-z0-9]*/stage.so (deleted)" /proc/$pid/maps 2>/dev/null | sort -u | wc -l)
    [[ $loaded -ge 2 ]] && break
    sleep 0.1
  done
  kill -9 $pid; wait $pid 2>/dev/null
  if [[ $loaded -eq 2 && -z $(ls -A "$work/aoti-tmp") ]]; then
    pass=$((pass+1)); log "aoti on $device: both libraries mapped from deleted copies under TMPDIR, nothing left after SIGKILL"
  else fail=$((fail+1)); log "aoti on $device: $loaded of 2 libraries mapped from TMPDIR copies, left: $(ls -A "$work/aoti-tmp" | head -3)"; fi
  port=$((port + 1)) pids=() rc=0
  for r in 0 1; do
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 300 "$run" "$aoti" --stage-format aoti "${two[@]}" -m 4 --inputs "$root/testdata/models/llama_dynamic.mb4.ref.safetensors" \
      --check "$root/testdata/models/llama_dynamic.mb4.ref.safetensors" --atol 1e-3 --rtol 1e-3 -q --timeout 120 \
      >"$out/aoti.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  if [[ $rc -eq 0 ]]; then pass=$((pass+1)); log "aoti llama_dynamic, 2 processes ($two_name): within 1e-3"
  else fail=$((fail+1)); log "aoti llama_dynamic, 2 processes ($two_name): FAILED (exit $rc)"; tail -3 "$out"/aoti.rank*.log; fi
else
  fail=$((fail+1)); log "pipecut compile --device $kind: FAILED"; tail -5 "$out/aoti_compile.err"
fi
fi
if want support; then
# Operator support (split --support, docs/pipecut.md): scripts/fixtures/support.py's
# nested (a map inside a cond, which AOTInductor cannot compile) split with
# --support aoti-cuda; the supported stages compiled for the device kind,
# placed on it with --supported-device, the cond's stage on the CPU with
# --fallback-device, --stage-format auto; M=1 and M=4 against PyTorch's CPU
# outputs, in one process and on 2 processes.
sfx=$work/support-fx sdir=$work/support.nested kind=${device%%:*}
if "$py" "$root/scripts/fixtures/support.py" "$sfx" >"$out/support_fixtures.log" 2>&1 &&
   "$pipecut" split "$sfx/nested.pt2" --support aoti-cuda -o "$sdir" -q &&
   "$pipecut" compile "$sdir" --device "$kind" --python "$py" --cache "$work/aoti-cache" --json >"$out/support_compile.json" 2>"$out/support_compile.err"; then
  pass=$((pass+1)); log "support: split --support aoti-cuda, compiled: $(tr -d '\n' <"$out/support_compile.json" | head -c 300)"
  for m in 1 4; do
    ref=$sfx/nested.ref.safetensors
    ((m == 4)) && ref=$sfx/nested.mb4.ref.safetensors
    if "$run" "$sdir" --stage-format auto --supported-device "$device" --fallback-device cpu -m $m --inputs "$ref" \
         --check "$ref" --atol 1e-3 --rtol 1e-3 --json >"$out/support.m$m.json" 2>"$out/support.m$m.err"; then
      pass=$((pass+1)); log "support nested M=$m, supported stages on $device, the cond on cpu: $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print([(s["device"], s["format"]) for s in j["stage_stats"]])' "$out/support.m$m.json")"
    else fail=$((fail+1)); log "support nested M=$m: FAILED"; tail -3 "$out/support.m$m.err"; fi
  done
  pids=() rc=0 port=$((29500 + RANDOM % 1000))
  for r in 0 1; do
    RANK=$r LOCAL_RANK=0 WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 300 "$run" "$sdir" --stage-format auto --supported-device "$device" --fallback-device cpu --backend gloo -m 4 \
      --inputs "$sfx/nested.mb4.ref.safetensors" --check "$sfx/nested.mb4.ref.safetensors" --atol 1e-3 --rtol 1e-3 -q \
      --timeout 120 >"$out/support.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  if [[ $rc -eq 0 ]]; then pass=$((pass+1)); log "support nested, 2 processes (gloo): within 1e-3"
  else fail=$((fail+1)); log "support nested, 2 processes: FAILED (exit $rc)"; tail -3 "$out"/support.rank*.log; fi
else
  fail=$((fail+1)); log "support: split --support aoti-cuda / compile --device $kind: FAILED"; tail -5 "$out/support_compile.err"
fi
fi
if want train-aoti; then
# Compiled training (pipecut compile --train --device cuda, pipecut-run
# --train --stage-format aoti; docs/training.md): the tied GPT-2 in 2 stages,
# its F/I/W (and B) programs compiled for the device kind, SGD under 1f1b and
# zb1p and AdamW under zb1p on the device in one process, then 1f1b on 2
# processes (the setup above: NCCL with two GPUs, else Gloo on cuda:0);
# against the eager CPU references within 1e-3 (1e-5 / 1e-4 on the CPU); and
# the seeded dropout programs against eager on the device. The CPU's
# bench/train_vs_torch_pipelining.py is not run here: it measures the 2-core
# CPU case the issue names.
train=$root/testdata/train kind=${device%%:*}
ctol=(--rtol 1e-3 --atol 1e-3)
[[ $device == cpu ]] && ctol=(--atol 1e-4)
csplit=$work/train-aoti/gpt2_loss.2
if "$pipecut" split "$train/gpt2_loss.pt2" --spec "$train/gpt2_loss.2.json" --format pt2 -o "$csplit" -q >/dev/null &&
   "$pipecut" compile "$csplit" --train --device "$kind" --python "$py" --cache "$work/aoti-cache" --json \
     >"$out/train_aoti_compile.json" 2>"$out/train_aoti_compile.err"; then
  pass=$((pass+1)); log "train-aoti: compiled: $(tr -d '\n' <"$out/train_aoti_compile.json" | head -c 300)"
  ref_flags() {  # the optimizer flags a reference was trained with
    "$py" -c "
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
print(json.loads(b[8:8 + struct.unpack('<Q', b[:8])[0]])['__metadata__']['optimizer_flags'])" "$1"
  }
  for run_case in "sgd 1f1b" "sgd zb1p" "adamw zb1p"; do
    set -- $run_case
    ref=$train/gpt2_loss.$1.ref.safetensors tag=$out/train_aoti.$1.$2
    flags=$(ref_flags "$ref")
    # shellcheck disable=SC2086  # flags: several words
    if "$run" "$csplit" --train --stage-format aoti --devices "$device" --data "$train/gpt2_loss.data.safetensors" -m 4 \
         --steps 4 $flags --schedule "$2" --json -q --save-checkpoint "$tag.ckpt" >"$tag.json" 2>"$tag.err" &&
       "$pipecut" merge "$tag.ckpt" -o "$tag.state.safetensors" -q >"$tag.check" 2>&1 &&
       "$py" "$root/scripts/check_train.py" "$tag.json" "$ref" --state "$tag.state.safetensors" "${ctol[@]}" >>"$tag.check" 2>&1; then
      pass=$((pass+1)); log "train-aoti gpt2_loss $1 $2 on $device: ok, $(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("steady samples/s", round(j.get("steady_throughput_samples_per_s", 0), 1), "saved bytes", [s.get("saved_activation_bytes") for s in j["stage_stats"]])' "$tag.json")"
    else
      fail=$((fail+1)); log "train-aoti gpt2_loss $1 $2 on $device: FAILED"; tail -4 "$tag.err" "$tag.check" 2>/dev/null
    fi
  done
  tag=$out/train_aoti.2proc port=$((29500 + RANDOM % 1000)) pids=() rc=0
  ref=$train/gpt2_loss.sgd.ref.safetensors flags=$(ref_flags "$train/gpt2_loss.sgd.ref.safetensors")
  for r in 0 1; do
    # shellcheck disable=SC2086  # flags: several words
    RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 300 "$run" "$csplit" --train --stage-format aoti "${two[@]}" --data "$train/gpt2_loss.data.safetensors" -m 4 \
      --steps 4 $flags --schedule 1f1b --json -q --timeout 120 \
      --save-checkpoint "$tag.ckpt" >"$tag.rank$r.json" 2>"$tag.rank$r.err" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  if [[ $rc -eq 0 ]] && "$pipecut" merge "$tag.ckpt" -o "$tag.state.safetensors" -q >"$tag.check" 2>&1 &&
     "$py" "$root/scripts/check_train.py" "$tag.rank0.json" "$ref" --state "$tag.state.safetensors" "${ctol[@]}" >>"$tag.check" 2>&1; then
    pass=$((pass+1)); log "train-aoti gpt2_loss sgd 1f1b, 2 processes (${two[*]}): ok"
  else fail=$((fail+1)); log "train-aoti, 2 processes: FAILED (exit $rc)"; tail -3 "$tag".rank*.err "$tag.check" 2>/dev/null; fi
  # Seeded dropout on the device: a stage with Dropout, Dropout2d, SDPA's
  # dropout_p and randn_like, its F/I/W/B under --recompute all against
  # eager autograd with the same draws (the int64 hash on the device).
  if "$py" "$root/test/train_programs.py" "$pipecut" "$work/train-aoti/programs" --models=dropout --policies=all \
       --device="$kind" >"$out/train_aoti_dropout.log" 2>&1; then
    pass=$((pass+1)); log "train-aoti dropout programs on $kind: $(tail -1 "$out/train_aoti_dropout.log")"
  else fail=$((fail+1)); log "train-aoti dropout programs on $kind: FAILED"; tail -4 "$out/train_aoti_dropout.log"; fi
else
  fail=$((fail+1)); log "train-aoti: split / compile --train --device $kind: FAILED"; tail -5 "$out/train_aoti_compile.err"
fi
fi
# The benchmark alone (--only aoti-bench) costs a device session ~3 minutes a
# batch size, most of it compiling (both splits at once).
if [[ $device == cuda* ]] && { want aoti || want aoti-bench; }; then
  for mb in ${PIPECUT_GPU_AOTI_MB:-1 8}; do
    timeout "${PIPECUT_GPU_BENCH_TIMEOUT:-300}" "$py" "$root/bench/aoti_vs_torchscript.py" --device cuda --python "$py" \
      --mb-size $mb --repeat 3 --iterations 20 --pipecut "$pipecut" --runner "$run" 2>&1 |
      tee "$out/bench_aoti.mb$mb.log" || log "bench/aoti_vs_torchscript.py --mb-size $mb failed"
  done
fi
if want inference; then
# A longer pipelined run for throughput: 4 stages on one GPU, 8 micro-batches.
"$run" "$work/splits/llama_tiny.4" --devices "$device" -m 8 --random-inputs --int-high 256 --warmup 5 --iterations 50 \
  --trace "$out/llama_tiny.4.trace.json" -q | tee -a "$out/gpu_check.log"
fi
echo "gpu_check: $pass passed, $fail failed" | tee -a "$out/gpu_check.log"
[[ $fail -eq 0 ]]
