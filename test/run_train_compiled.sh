#!/usr/bin/env bash
# Compiled training (pipecut compile --train, pipecut-run --train
# --stage-format aoti) against eager PyTorch: the tiny Llama in 4 stages and
# the tied GPT-2 in 2 (testdata/train), K=4 steps of M=4 micro-batches, every
# schedule in one process and on 2 Gloo ranks, SGD and AdamW. Per-step losses
# within 1e-5 relative of eager and merged final parameters within atol
# 1e-6 (SGD) and 1e-4 (AdamW, whose normalised steps turn rounding noise in a
# near-zero gradient into 1e-5-sized differences; compiled kernels round
# otherwise than eager's). Also: resume equals an uninterrupted run byte for
# byte; a schedule CSV trains what the built-in schedule does, byte for byte;
# --recompute all and a per-layer REGEX train the same losses with fewer
# saved bytes (--json saved_activation_bytes); torchrun --no-python; refusals;
# dropout drawn from (--seed, step, stage, micro-batch) alone.
#
# PIPECUT_TEST_PART (test/test_part.sh): quick (the quick tier, and the
# newest torch's pass) the GPT-2 split only: three schedules in one process
# and one on 2 ranks, --json's fields, schedule CSVs, resume, the refusals;
# rest (what the full tier adds) the other schedules and the Llama split,
# the multi-rank matrix, torchrun, recompute and dropout; all (by hand) both.
set -uo pipefail
pipecut=$1 run=$2 python=$3 src=$4 out=$5 port=${6:-29850}
cache=${7:-$out/cache}  # the compile cache: the quick and the full entries share theirs
sync=${8:-}  # pipecut_manifest_sync: manifest.json's edits into manifest.pb
train=$src/testdata/train
source "$src/test/expect.sh"
source "$src/test/test_part.sh"
fail=0 pass=0
rm -rf "$out" && mkdir -p "$out"

flags() {  # the optimizer flags the reference was trained with
  "$python" -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print(json.loads(b[8:8 + n])["__metadata__"]["optimizer_flags"])' "$1"
}

split_compile() {  # split_compile MODEL N DIR [COMPILE FLAGS...]
  local model=$1 n=$2 dir=$3; shift 3
  "$pipecut" split "$train/$model.pt2" --spec "$train/$model.$n.json" --format pt2 -o "$dir" -q >/dev/null &&
    "$pipecut" compile "$dir" --train --cache "$cache" -q "$@" >"$dir.compile.log" 2>&1 ||
    { echo "FAIL: split and compile $model into $n ($*)"; cat "$dir.compile.log"; fail=$((fail+1)); }
}
split_compile gpt2_loss 2 "$out/g2"
[[ $part == quick ]] || split_compile llama_loss 4 "$out/l4"
want_quick() { [[ $part != rest ]]; }

checks=$out/checks.tsv
: >"$checks"
check() {  # check NAME REPORT CKPT REF OPT
  local name=$1 report=$2 ckpt=$3 ref=$4 opt=$5 atol=1e-6
  [[ $opt == adamw ]] && atol=1e-4
  if ! "$pipecut" merge "$ckpt" -o "$ckpt.state.safetensors" -q >"$ckpt.merge.log" 2>&1; then
    echo "FAIL ($name): merge"; cat "$ckpt.merge.log"; fail=$((fail+1)); return
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$report" "$ref" "$ckpt.state.safetensors" "$atol" >>"$checks"
}

one() {  # one DIR MODEL OPT SCHEDULE [FLAGS...]
  local dir=$1 model=$2 opt=$3 schedule=$4; shift 4
  local tag=$out/$(basename "$dir").$opt.$schedule.p1 name="$model $opt $schedule compiled, one process"
  "$run" "$dir" --train --stage-format aoti --data "$train/$model.data.safetensors" -m 4 --steps 4 \
    $(flags "$train/$model.$opt.ref.safetensors") --schedule "$schedule" --json --save-checkpoint "$tag.ckpt" "$@" \
    >"$tag.json" 2>"$tag.err" || { echo "FAIL ($name): exit $?"; tail -3 "$tag.err"; fail=$((fail+1)); return; }
  check "$name" "$tag.json" "$tag.ckpt" "$train/$model.$opt.ref.safetensors" "$opt"
}

multi() {  # multi DIR MODEL OPT SCHEDULE BACKEND
  local dir=$1 model=$2 opt=$3 schedule=$4 backend=$5 pids=() rc=0
  local tag=$out/$(basename "$dir").$opt.$schedule.$backend name="$model $opt $schedule compiled, 2 ranks over $backend"
  port=$((port + 1))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 120 "$run" "$dir" --train --stage-format aoti --data "$train/$model.data.safetensors" -m 4 --steps 4 \
      --timeout 60 --backend "$backend" $(flags "$train/$model.$opt.ref.safetensors") --schedule "$schedule" --json \
      --save-checkpoint "$tag.ckpt" >"$tag.rank$r.json" 2>"$tag.rank$r.err" &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[$r]}" || rc=$?; done
  if [[ $rc -ne 0 ]]; then echo "FAIL ($name): exit $rc"; tail -n 2 "$tag".rank*.err; fail=$((fail+1)); return; fi
  check "$name" "$tag.rank0.json" "$tag.ckpt" "$train/$model.$opt.ref.safetensors" "$opt"
}

g2=$out/g2 l4=$out/l4
if want_quick; then
  for schedule in gpipe 1f1b zb1p; do one "$g2" gpt2_loss sgd "$schedule"; done
  multi "$g2" gpt2_loss adamw zb1p gloo
fi
if [[ $part != quick ]]; then
  # Every schedule, both optimizers, across the two models; the tied GPT-2
  # syncs its tied gradients in one process and across ranks.
  one "$g2" gpt2_loss sgd interleaved-1f1b
  for schedule in gpipe 1f1b interleaved-1f1b zb1p; do one "$l4" llama_loss adamw "$schedule"; done
  one "$g2" gpt2_loss adamw zb1p
  one "$l4" llama_loss sgd 1f1b
  multi "$g2" gpt2_loss sgd zb1p gloo
  multi "$g2" gpt2_loss adamw 1f1b gloo-strict
  multi "$l4" llama_loss adamw interleaved-1f1b gloo
  multi "$l4" llama_loss sgd gpipe gloo
  multi "$l4" llama_loss sgd zb1p gloo-strict

  # torchrun --no-python launches the ranks (its agent owns the store).
  torchrun=$(dirname "$python")/torchrun
  port=$((port + 1))
  if timeout 180 "$torchrun" --no-python --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$port" \
    "$run" "$l4" --train --stage-format aoti --data "$train/llama_loss.data.safetensors" -m 4 --steps 4 --timeout 60 \
    $(flags "$train/llama_loss.sgd.ref.safetensors") --schedule 1f1b --json --save-checkpoint "$out/torchrun.ckpt" \
    >"$out/torchrun.json" 2>"$out/torchrun.log"; then
    # stdout: rank 0's report (the other rank prints none); torchrun's own lines are on stderr.
    check "llama_loss sgd 1f1b compiled, torchrun --no-python" "$out/torchrun.json" "$out/torchrun.ckpt" \
      "$train/llama_loss.sgd.ref.safetensors" sgd
  else
    echo "FAIL: torchrun --no-python"; tail -5 "$out/torchrun.log"; fail=$((fail+1))
  fi
fi

"$python" "$src/scripts/check_train.py" --batch "$checks" >"$out/checks.log" 2>&1
passed=$(grep -c '^PASS ' "$out/checks.log") failed=$(grep -c '^FAIL ' "$out/checks.log")
pass=$((pass + passed)) fail=$((fail + failed))
if [[ $failed -gt 0 || $passed -ne $(wc -l <"$checks") ]]; then
  echo "FAIL: $failed of $(wc -l <"$checks") compiled runs differ from eager PyTorch:"; grep -B6 '^FAIL ' "$out/checks.log" | head -60
fi

base=(--train --stage-format aoti --data "$train/gpt2_loss.data.safetensors" -m 4 $(flags "$train/gpt2_loss.sgd.ref.safetensors") --json)

if want_quick; then
# Every stage reports what it ran and the bytes it held per micro-batch.
report_field() { "$python" -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2] and eval(sys.argv[2]))' "$@"; }
if [[ $(report_field "$out/g2.sgd.zb1p.p1.json" '[s["format"] for s in r["stage_stats"]]') == "['aoti', 'aoti']" &&
  $(report_field "$out/g2.sgd.zb1p.p1.json" 'all(s["saved_activation_bytes"] > 0 for s in r["stage_stats"])') == True &&
  $(report_field "$out/g2.sgd.zb1p.p1.json" '[s["held_for_weights_bytes"] > 0 for s in r["stage_stats"]]') == "[False, True]" ]]; then
  ok; else bad "--json stage_stats: format aoti, saved_activation_bytes, held_for_weights_bytes (0 for the one-B first stage)"; fi

# A schedule as data: zb1p dumped, then run from the file: the same state, byte for byte.
expect 0 "dump zb1p" -- "$run" "$g2" "${base[@]}" --steps 2 --schedule zb1p --dump-schedule "$out/zb1p.csv" \
  --save-checkpoint "$out/zb1p.builtin.ckpt"
expect 0 "run the dumped CSV" -- "$run" "$g2" "${base[@]}" --steps 2 --schedule-file "$out/zb1p.csv" \
  --save-checkpoint "$out/zb1p.file.ckpt"
if cmp -s "$out/zb1p.builtin.ckpt/stage_000.safetensors" "$out/zb1p.file.ckpt/stage_000.safetensors" &&
  cmp -s "$out/zb1p.builtin.ckpt/stage_001.safetensors" "$out/zb1p.file.ckpt/stage_001.safetensors"; then ok; else
  bad "the CSV schedule trains other parameters than the built-in zb1p"; fi
# Invalid files, refused before anything loads, naming the action (2 stages, M=4).
printf '0B0,0F0,0F1,0F2,0F3,0B1,0B2,0B3\n1F0,1F1,1F2,1F3,1B0,1B1,1B2,1B3\n' >"$out/early.csv"
printf '0F0,0F0,0F1,0F2,0F3,0B0,0B1,0B2,0B3\n1F0,1F1,1F2,1F3,1B0,1B1,1B2,1B3\n' >"$out/twice.csv"
printf '0F0,0B0,0F1,0B1,0F2,0B2,0F3,0B3\n1F0,1F1,1B0,1B1,1F2,1B2,1F3,1B3\n' >"$out/deadlock.csv"
expect 2 "a backward before its forward (compiled)" -- "$run" "$g2" "${base[@]}" --steps 1 --schedule-file "$out/early.csv"
contains "names the action" "rank 0 stalls at 0B0"
expect 2 "a micro-batch twice (compiled)" -- "$run" "$g2" "${base[@]}" --steps 1 --schedule-file "$out/twice.csv"
contains "names the action" "0F0"
expect 2 "a deadlock across ranks (compiled)" -- "$run" "$g2" "${base[@]}" --steps 1 --schedule-file "$out/deadlock.csv"
contains "names the stalled actions" "stalls at"

# Resume: 2 steps, then 2 more from the checkpoint, equals 4 at once, byte for byte.
expect 0 "4 steps" -- "$run" "$g2" "${base[@]}" --steps 4 --schedule 1f1b --save-checkpoint "$out/resume.full.ckpt"
expect 0 "2 steps" -- "$run" "$g2" "${base[@]}" --steps 2 --schedule 1f1b --save-checkpoint "$out/resume.first.ckpt"
expect 0 "2 more" -- "$run" "$g2" "${base[@]}" --steps 2 --schedule 1f1b --load-checkpoint "$out/resume.first.ckpt" \
  --save-checkpoint "$out/resume.rest.ckpt"
if cmp -s "$out/resume.full.ckpt/stage_000.safetensors" "$out/resume.rest.ckpt/stage_000.safetensors" &&
  cmp -s "$out/resume.full.ckpt/stage_001.safetensors" "$out/resume.rest.ckpt/stage_001.safetensors"; then ok; else
  bad "a resumed compiled run differs from an uninterrupted one"; fi

# Refusals, before anything trains.
"$pipecut" split "$train/gpt2_loss.pt2" --spec "$train/gpt2_loss.2.json" -o "$out/plain" -q >/dev/null
expect 2 "a split without training programs" -- "$run" "$out/plain" "${base[@]}" --steps 1
contains "names the stage" "stage 0: has no training programs for cpu"
contains "says how to make them" "pipecut compile $out/plain --train --device cpu"
# A damaged or forged package (its signature rewritten; --no-verify, as a
# package whose manifest record was rewritten too would pass the digests).
for how in garbled missing program param kind outputs; do
  program=W
  [[ $how == param ]] && program=F
  rm -rf "$out/tampered" && cp -r "$g2" "$out/tampered" &&
    "$python" "$src/test/tamper_train_package.py" "$out/tampered/stage_001.train-cpu.$program.pt2" "$how" ||
    bad "tamper with a package ($how)"
  expect 2 "a package whose signature is $how" -- "$run" "$out/tampered" "${base[@]}" --steps 1 --schedule zb1p --no-verify
  case $how in
    garbled) contains "names the package" "$out/tampered/stage_001.train-cpu.W.pt2: stage 1: has a pipecut.train signature pipecut cannot read" ;;
    missing) contains "names the package" "$out/tampered/stage_001.train-cpu.W.pt2: stage 1: is not a training program (its metadata has no pipecut.train)" ;;
    program) contains "says the program differs" "stage_001.train-cpu.W.pt2: stage 1: has a pipecut.train signature pipecut cannot read: another program" ;;
    param) contains "names the parameter" "stage_001.train-cpu.F.pt2: program F: reads parameter 'm.not_trained', which the stage does not train; compile the stage again" ;;
    kind) contains "names the reference" "stage_001.train-cpu.W.pt2: stage 1: 'weight:0' is not a value of a training program; compile it again" ;;
    outputs) contains "counts the values" "stage_001.train-cpu.W.pt2: program W: returned "
             contains "says what the signature lists" " values, its signature lists " ;;
  esac
done
# A compile script that fails (a Python that answers the probe, then refuses
# each compile, exits 0 saying nothing, or is killed): exit 2 naming the
# stage and why, and nothing written.
"$pipecut" split "$train/gpt2_loss.pt2" --spec "$train/gpt2_loss.2.json" --format pt2 -o "$out/refused" -q >/dev/null
torch_version=$("$python" -c 'import torch; print(torch.__version__)')
for how in error silent killed; do
  case $how in
    error) action='echo "error: RuntimeError: refused"; exit 1' ;;
    silent) action='exit 0' ;;
    killed) action='kill -9 $$' ;;
  esac
  cat >"$out/$how-python" <<EOF
#!/bin/sh
case "\$2" in
  *'"probe"'*) echo '{"torch": "$torch_version", "cuda": false}' ;;
  *) $action ;;
esac
EOF
  chmod +x "$out/$how-python"
  expect 2 "compile --train, the script $how" -- "$pipecut" compile "$out/refused" --train --python "$out/$how-python" \
    --no-cache -j 1 -q
  case $how in
    error) contains "names the stage and the error" "stage 0: cannot compile its training programs for cpu: RuntimeError: refused" ;;
    silent) contains "says no program came" "cannot compile its training programs for cpu: the compiler exited 0 without every program" ;;
    killed) contains "names the signal" "cannot compile its training programs for cpu: the compiler was killed by signal 9" ;;
  esac
  [[ -z $(compgen -G "$out/refused/*.train-cpu.*") && -z $(compgen -G "$out/refused.tmp.*") ]] && ok ||
    bad "compile --train, the script $how: nothing written"
done
# Ranks given other seeds would draw their stages' dropout apart: refused.
port=$((port + 1)) pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$run" "$g2" "${base[@]}" \
    --steps 1 --schedule 1f1b --timeout 60 --backend gloo --seed $((r + 1)) >"$out/seeds.$r.log" 2>&1 &
  pids+=($!)
done
for r in 0 1; do
  wait "${pids[$r]}"; rc=$?
  [[ $rc -eq 2 ]] && ok || bad "ranks with other --seed: rank $r exited $rc"
  LAST_LOG=$(cat "$out/seeds.$r.log")
  contains "names --seed" "was started with another --seed than rank $r (here: $((r + 1)))"
done
# Training packages for another device than the run's: the manifest says
# CUDA (its records rewritten), the run is on the CPU.
if [[ -n $sync ]]; then
  rm -rf "$out/cuda_only" && cp -r "$g2" "$out/cuda_only"
  "$python" - "$out/cuda_only/manifest.json" <<'EOF' && "$sync" "$out/cuda_only" || bad "rewrite the manifest's device"
import json, sys
m = json.load(open(sys.argv[1]))
for st in m["stages"]:
    for f in st["files"]:
        if f["format"] == "aoti-train":
            f["compiled"]["device"] = "cuda"
json.dump(m, open(sys.argv[1], "w"))
EOF
  expect 2 "training packages for another device" -- "$run" "$out/cuda_only" "${base[@]}" --steps 1
  contains "names the stage and the device" "stage 0: has no training programs for cpu"
  contains "says how to make them" "pipecut compile $out/cuda_only --train --device cpu"
fi
expect 1 "--train --stage-format pt2" -- "$run" "$g2" --train --stage-format pt2 --data "$train/gpt2_loss.data.safetensors"
contains "names the formats" "--train runs torchscript (autograd) or aoti"
# Usage errors exit 1, as every flag error does.
expect 1 "compile --train --cpu-matmul" -- "$pipecut" compile "$out/plain" --train --cpu-matmul blas
expect 1 "--seed with TorchScript training" -- "$run" "$g2" --train --data "$train/gpt2_loss.data.safetensors" --seed 3
contains "says what --seed seeds" "--seed: with --train, seeds the random ops of --stage-format aoti's programs"
expect 1 "--recompute without --train" -- "$pipecut" compile "$out/plain" --recompute all
expect 1 "--recompute that is not a regular expression" -- "$pipecut" compile "$out/plain" --train --recompute '(('
contains "names the flag" "--recompute"
fi

if [[ $part != quick ]]; then
  # Recompute: the same losses, fewer bytes held between F and I/W.
  cp -r "$g2" "$out/g2all" && cp -r "$g2" "$out/g2layer"
  "$pipecut" compile "$out/g2all" --train --recompute all --cache "$cache" -q >/dev/null 2>&1 || bad "compile --recompute all"
  "$pipecut" compile "$out/g2layer" --train --recompute 'm\.transformer\.h\.[0-9]+' --cache "$cache" -q >/dev/null 2>&1 ||
    bad "compile --recompute REGEX"
  for d in g2 g2all g2layer; do
    "$run" "$out/$d" "${base[@]}" --steps 4 --schedule 1f1b >"$out/$d.recompute.json" 2>"$out/$d.recompute.err" ||
      bad "train $d"
  done
  if "$python" - "$out/g2.recompute.json" "$out/g2layer.recompute.json" "$out/g2all.recompute.json" <<'EOF'
import json, sys
none, layer, every = (json.load(open(p)) for p in sys.argv[1:])
for r in (layer, every):
    for a, b in zip(none["losses"], r["losses"]):
        assert abs(a - b) <= 1e-6 * abs(a), (none["losses"], r["losses"])
saved = [[s["saved_activation_bytes"] for s in r["stage_stats"]] for r in (none, layer, every)]
print("saved activation bytes per stage (none, layers, all):", saved)
for s in range(len(saved[0])):
    assert saved[2][s] < saved[0][s] and saved[2][s] <= saved[1][s] <= saved[0][s], saved
assert sum(saved[1]) < sum(saved[0]), saved
EOF
  then ok; else bad "recompute: the same losses with fewer saved bytes"; fi
fi

if [[ $part != quick ]]; then
  # Dropout: the tied GPT-2 with every dropout at 0.1 (attention's through
  # SDPA's dropout_p), exported here. Its draws are a function of (--seed,
  # step, stage, micro-batch): the same bytes from one process under 1f1b
  # and from 2 ranks under zb1p, and after a resume; --recompute all
  # rebuilds F's masks from the seed (the same losses as saving them, stage
  # 0 holding only its inputs and the seed); another --seed draws others.
  if "$python" - "$src" "$out/dropout.pt2" >"$out/dropout.export.log" 2>&1 <<'EOF'
import sys
import torch
sys.path[:0] = [sys.argv[1] + "/scripts", sys.argv[1] + "/scripts/fixtures"]
from generate import build_gpt2
from train_refs import WithLoss
torch.manual_seed(31)
m = build_gpt2()[0]
for mod in m.modules():
    if isinstance(mod, torch.nn.Dropout):
        mod.p = 0.1
ids = torch.zeros(2, 8, dtype=torch.int64)
torch.export.save(torch.export.export(WithLoss(m).train(), (ids, ids)), sys.argv[2])
EOF
  then
    for policy in none all; do
      "$pipecut" split "$out/dropout.pt2" --spec "$train/gpt2_loss.2.json" --format pt2 -o "$out/drop.$policy" -q \
        >/dev/null && "$pipecut" compile "$out/drop.$policy" --train --recompute "$policy" --cache "$cache" -q \
        >"$out/drop.$policy.log" 2>&1 || { bad "split and compile the dropout GPT-2 (--recompute $policy)"; tail -3 "$out/drop.$policy.log"; }
    done
    drop() {  # drop NAME DIR FLAGS...: one training run, its report in $out/NAME.json
      local name=$1 dir=$2; shift 2
      "$run" "$out/$dir" "${base[@]}" "$@" >"$out/$name.json" 2>"$out/$name.err" || {
        bad "dropout run $name"; tail -3 "$out/$name.err"; }
    }
    drop drop.1f1b drop.all --steps 4 --schedule 1f1b --save-checkpoint "$out/drop.1f1b.ckpt"
    drop drop.none drop.none --steps 4 --schedule 1f1b
    drop drop.seed1 drop.all --steps 4 --schedule 1f1b --seed 1
    drop drop.first drop.all --schedule 1f1b --steps 2 --save-checkpoint "$out/drop.first.ckpt"
    drop drop.rest drop.all --schedule 1f1b --steps 2 --load-checkpoint "$out/drop.first.ckpt" \
      --save-checkpoint "$out/drop.rest.ckpt"
    port=$((port + 1)) pids=()
    for r in 0 1; do
      RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$run" "$out/drop.all" \
        "${base[@]}" --steps 4 --schedule zb1p --timeout 60 --backend gloo --save-checkpoint "$out/drop.ranks.ckpt" \
        >"$out/drop.ranks.$r.json" 2>"$out/drop.ranks.$r.err" &
      pids+=($!)
    done
    for r in 0 1; do wait "${pids[$r]}" || bad "dropout on 2 ranks (rank $r)"; done
    same_state() { cmp -s "$1/stage_000.safetensors" "$2/stage_000.safetensors" && cmp -s "$1/stage_001.safetensors" "$2/stage_001.safetensors"; }
    if same_state "$out/drop.1f1b.ckpt" "$out/drop.ranks.ckpt"; then ok; else
      bad "dropout: 2 ranks under zb1p train other bytes than one process under 1f1b"; fi
    if same_state "$out/drop.1f1b.ckpt" "$out/drop.rest.ckpt"; then ok; else
      bad "dropout: a resumed run differs from an uninterrupted one"; fi
    if "$python" - "$out" <<'EOF'
import json, sys
r = {n: json.load(open(f"{sys.argv[1]}/drop.{n}.json")) for n in ("1f1b", "none", "seed1")}
every, none, seed1 = r["1f1b"]["losses"], r["none"]["losses"], r["seed1"]["losses"]
assert all(abs(a - b) <= 1e-6 * abs(a) for a, b in zip(none, every)), ("recompute all vs none", every, none)
assert all(abs(a - b) > 1e-6 * abs(a) for a, b in zip(seed1, every)), ("--seed 1 vs 0", every, seed1)
saved = [[s["saved_activation_bytes"] for s in r[n]["stage_stats"]] for n in ("none", "1f1b")]
# Stage 0 under all holds its one input (input_ids, int64 [2, 8]) and the 8-byte seed.
assert saved[1][0] == 2 * 8 * 8 + 8 and all(a < n for a, n in zip(saved[1], saved[0])), saved
print("dropout saved bytes (none, all):", saved)
EOF
    then ok; else bad "dropout: recompute all trains what none does, --seed 1 other losses, fewer saved bytes"; fi
  else
    bad "export the dropout GPT-2"; tail -3 "$out/dropout.export.log"
  fi
fi

echo "run_train_compiled: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
