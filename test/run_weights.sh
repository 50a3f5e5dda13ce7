#!/usr/bin/env bash
# Weights from the model's own checkpoint (docs/weights.md), against the
# oracle: the split of the same program exported with its weights, run here.
# Fixtures are made now (scripts/fixtures/weights.py: transformers models
# with random weights, saved as transformers saves them; the meta exports by
# scripts/export_meta.py, the recipe itself):
#   llama    float32, sharded (an index and shards), rotary inv_freq in the
#            recipe's buffers file; also its KV-cache decode step
#   gpt2     bfloat16, tied embeddings saved once; also cast to a float32
#            program with --weights-cast
#   wrapped  an untied GPT-2 inside a wrapper (`lm.`), its checkpoint with
#            the legacy LayerNorm names gamma and beta
#   gemma    tied, with a 0-d buffer (embed_scale)
#   phi3_longrope  its program updates a bound buffer (inv_freq) in place
#   train    testdata/train/llama_loss.pt2's weights as a checkpoint
# Every run is --exact against the oracle: split-time binding and run-time
# binding (a weightless split, and one pinned with --bind-at run), one
# process and 2 Gloo ranks, TorchScript and NativeRT stages, generation
# (greedy tokens) and training (merged parameters byte for byte). Then every
# bad source: exit 2, the file and tensor named, nothing written.
set -uo pipefail
pipecut=$1 run=$2 python=$3 src=$4 out=$5 port=${6:-29775}
source "$src/test/expect.sh"
fail=0 pass=0
rm -rf "$out" && mkdir -p "$out" && cd "$out" || exit 1

"$python" "$src/scripts/fixtures/weights.py" fx >fixtures.log 2>&1 || { cat fixtures.log; echo "FAIL: fixtures"; exit 1; }
for c in llama gpt2; do
  # The recipe, as a newcomer runs it (docs/weights.md), on a small config.
  expect 0 "export_meta $c" -- "$python" "$src/scripts/export_meta.py" --config "fx/$c/ckpt" -o "fx/$c/meta" \
    --batch 2 --seq 8 --cache 32
done
contains "the recipe names the decode program's prefix" "--weights-prefix model."
printf '{"split_points": {"model.layers.2": "BEGINNING"}}' >llama.spec.json
printf '{"split_points": {"transformer.h.2": "BEGINNING"}}' >gpt2.spec.json
printf '{"split_points": {"lm.transformer.h.2": "BEGINNING"}}' >wrapped.spec.json
printf '{"split_points": {"model.model.layers.2": "BEGINNING"}}' >decode.spec.json
wrapped_names=(--weights-rename '\.gamma$=.weight' --weights-rename '\.beta$=.bias' --weights-prefix lm.)

# oracle CASE PROGRAM [FORMAT]: the real export's split run here.
oracle() {
  local c=$1 program=$2 format=${3:-torchscript} flags=()
  [[ $format == pt2 ]] && flags=(--inline-grad-regions)
  expect 0 "$c: split the real export" -- "$pipecut" split "fx/$c/$program" --spec "$c.spec.json" -o "$c.real.$format" \
    "${flags[@]}" -q
  expect 0 "$c: run the real export's split" -- "$run" "$c.real.$format" --inputs "fx/$c/inputs.safetensors" \
    --stage-format "$format" --output "$c.ref.$format.safetensors" -q
}
# exact CASE DIR [pipecut-run flags]: DIR's outputs are the oracle's, bit for bit.
exact() {
  local c=$1 dir=$2 format=torchscript
  shift 2
  [[ " $* " == *" pt2 "* ]] && format=pt2
  expect 0 "$c: $dir $*" -- "$run" "$dir" --inputs "fx/$c/inputs.safetensors" --check "$c.ref.$format.safetensors" \
    --exact -q "$@"
  contains "$c: $dir is exact" "check: ok (max abs error 0)"
}
# ranks CASE DIR [flags]: the same over 2 Gloo processes.
ranks() {
  local c=$1 dir=$2 pids=() rc=0
  shift 2
  port=$((port + 1))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 \
      "$run" "$dir" --inputs "fx/$c/inputs.safetensors" --check "$c.ref.torchscript.safetensors" --exact -q \
      --timeout 60 "$@" >"$dir.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  [[ $rc -eq 0 ]] && grep -q "check: ok (max abs error 0)" "$dir.rank0.log" && ok ||
    { bad "$c: $dir on 2 Gloo ranks (exit $rc)"; tail -n 3 "$dir".rank*.log; }
}

# two LOG ARGS...: pipecut-run ARGS on 2 Gloo processes; rank r's output in LOG.rankR.log.
two() {
  local log=$1 pids=() rc=0
  shift
  port=$((port + 1))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 \
      "$run" "$@" --timeout 60 >"$log.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  return $rc
}

# ---- llama: sharded float32; the buffers file holds rotary inv_freq.
llama=(--weights fx/llama/ckpt --weights fx/llama/meta/buffers.safetensors)
oracle llama real.pt2
expect 0 "llama: split binding the checkpoint" -- "$pipecut" split fx/llama/meta/model.pt2 --spec llama.spec.json \
  "${llama[@]}" -o llama.bound -v
contains "llama: the files read" "pipecut:   fx/llama/ckpt/model-00001-of-"
exact llama llama.bound
ranks llama llama.bound
"$python" - llama.bound/manifest.json <<'EOF' && ok || bad "llama: the manifest records the meta export and the files read"
import json, sys
m = json.load(open(sys.argv[1]))
assert m["meta_export"] is True
files = m["weight_sources"]
assert [f["file"] for f in files][-1] == "buffers.safetensors", files
assert sum(f["tensors"] for f in files) == sum(len(s["parameters"]) for s in m["stages"]) - 1, files  # inv_freq twice, one tensor
assert all(len(f["xxh3_128"]) == 32 for f in files)
assert not any(s.get("external") for s in m["stages"])
EOF
# The checkpoint alone lacks inv_freq: refused, naming it, nothing written.
expect 2 "llama: the checkpoint alone" -- "$pipecut" split fx/llama/meta/model.pt2 --spec llama.spec.json \
  --weights fx/llama/ckpt -o llama.lacking
contains "llama: names the missing buffer" "no --weights source holds it: model.rotary_emb.inv_freq"
contains "llama: says a further file supplies it" "give them in a further --weights file"
[[ ! -e llama.lacking ]] && ok || bad "llama: a refused split wrote llama.lacking"
# A weightless split, bound at run time, in one process, on 2 ranks, and as
# NativeRT's .pt2 stages.
expect 0 "llama: weightless split" -- "$pipecut" split fx/llama/meta/model.pt2 --spec llama.spec.json -o llama.weightless
contains "llama: says it is weightless" "a weightless split"
expect 0 "llama: verify a weightless split" -- "$pipecut" verify llama.weightless -q
expect 2 "llama: a weightless split without --weights" -- "$run" llama.weightless --inputs fx/llama/inputs.safetensors -q
contains "llama: says to give --weights" "is a weightless split: its stages hold no bytes for"
expect 2 "llama: run-time binding lacking inv_freq" -- "$run" llama.weightless --weights fx/llama/ckpt \
  --inputs fx/llama/inputs.safetensors -q
contains "llama: names the stage and the tensor" "stage 0: needs 1 tensor no --weights source holds: model.rotary_emb.inv_freq"
exact llama llama.weightless "${llama[@]}"
ranks llama llama.weightless "${llama[@]}"
if nativert; then
  oracle llama real.pt2 pt2
  expect 0 "llama: weightless split for NativeRT" -- "$pipecut" split fx/llama/meta/model.pt2 --spec llama.spec.json \
    --inline-grad-regions --format pt2 -o llama.weightless.pt2 -q
  exact llama llama.weightless.pt2 "${llama[@]}" --stage-format pt2
else
  no_nativert run_weights
fi
# --bind-at run: read and pinned now, bound at run time; other bytes are refused.
expect 0 "llama: --bind-at run" -- "$pipecut" split fx/llama/meta/model.pt2 --spec llama.spec.json "${llama[@]}" \
  --bind-at run -o llama.pinned -q
exact llama llama.pinned "${llama[@]}"
cp -r fx/llama/ckpt llama.other_ckpt
"$python" - llama.other_ckpt <<'EOF'
import glob, json, struct, sys
# One value of model.norm.weight changed in place; the header as it was.
index = json.load(open(sys.argv[1] + "/model.safetensors.index.json"))
path = sys.argv[1] + "/" + index["weight_map"]["model.norm.weight"]
b = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
begin = json.loads(b[8:8 + n])["model.norm.weight"]["data_offsets"][0]
b[8 + n + begin] ^= 1
open(path, "wb").write(b)
EOF
expect 2 "llama: other bytes than the split pinned" -- "$run" llama.pinned --weights llama.other_ckpt \
  --weights fx/llama/meta/buffers.safetensors --inputs fx/llama/inputs.safetensors -q
contains "llama: names the tensor pinned" "model.norm.weight: holds other bytes than the split pinned for 'model.norm.weight'"
# inspect --weights: what binds, what is missing, what is left over.
expect 0 "llama: inspect --weights" -- "$pipecut" inspect fx/llama/meta/model.pt2 --weights fx/llama/ckpt --json
"$python" -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["meta_export"] is True
w = j["weights"]
assert w["missing"] == ["model.rotary_emb.inv_freq"], w["missing"]
assert not w["unused"] and not w["kept"], w
assert len(w["bound"]) == 39 and all(b["file"].startswith("fx/llama/ckpt/model-0") for b in w["bound"])
' <<<"$LAST_LOG" && ok || bad "llama: inspect --weights --json"
# Generation: the recipe's decode step, under the wrapper's `model.`.
expect 0 "llama: split the real decode step" -- "$pipecut" split fx/llama/decode_real.pt2 --spec decode.spec.json \
  -o decode.real -q
expect 0 "llama: generate with the real decode step" -- "$run" decode.real --generate --prompts fx/llama/prompts.jsonl \
  --max-new-tokens 8 --output decode.tokens.jsonl -q
expect 0 "llama: split the meta decode step with weights" -- "$pipecut" split fx/llama/meta/decode.pt2 \
  --spec decode.spec.json "${llama[@]}" --weights-prefix model. -o decode.bound -q
expect 0 "llama: generate, bound at split" -- "$run" decode.bound --generate --prompts fx/llama/prompts.jsonl \
  --max-new-tokens 8 --check-tokens decode.tokens.jsonl -q
contains "llama: the same tokens" "check: ok (every token as the reference)"
expect 2 "llama: the decode step without its prefix" -- "$pipecut" split fx/llama/meta/decode.pt2 --spec decode.spec.json \
  "${llama[@]}" -o decode.noprefix
contains "llama: names the prefix that binds" "without 'model.': the program holds the model under an attribute; give --weights-prefix model."
expect 0 "llama: weightless decode step" -- "$pipecut" split fx/llama/meta/decode.pt2 --spec decode.spec.json \
  -o decode.weightless -q
expect 0 "llama: generate, bound at run" -- "$run" decode.weightless --generate --prompts fx/llama/prompts.jsonl \
  --max-new-tokens 8 --check-tokens decode.tokens.jsonl -q "${llama[@]}" --weights-prefix model.
contains "llama: the same tokens at run time" "check: ok (every token as the reference)"
two decode.weightless decode.weightless --generate --prompts fx/llama/prompts.jsonl --max-new-tokens 8 \
  --check-tokens decode.tokens.jsonl -q "${llama[@]}" --weights-prefix model. &&
  grep -q "check: ok (every token as the reference)" decode.weightless.rank0.log && ok ||
  { bad "llama: generate bound at run on 2 Gloo ranks"; tail -n 3 decode.weightless.rank*.log; }

# ---- gpt2: bfloat16, tied embeddings saved once (the recipe declares the tie).
gpt2=(--weights fx/gpt2/ckpt --weights fx/gpt2/meta/buffers.safetensors)
oracle gpt2 real.pt2
expect 0 "gpt2: split binding the checkpoint" -- "$pipecut" split fx/gpt2/meta/model.pt2 --spec gpt2.spec.json \
  "${gpt2[@]}" -o gpt2.bound -q
exact gpt2 gpt2.bound
expect 0 "gpt2: weightless split" -- "$pipecut" split fx/gpt2/meta/model.pt2 --spec gpt2.spec.json -o gpt2.weightless -q
"$python" - gpt2.weightless/manifest.json <<'EOF' && ok || bad "gpt2: the tie is the external tensor's alias"
import json, sys
m = json.load(open(sys.argv[1]))
ext = {e["name"]: e for s in m["stages"] for e in s.get("external", [])}
assert ext["lm_head.weight"]["aliases"] == ["transformer.wte.weight"], ext["lm_head.weight"]
assert ext["lm_head.weight"]["tensor"]["dtype"] == "bfloat16"
EOF
exact gpt2 gpt2.weightless "${gpt2[@]}"
ranks gpt2 gpt2.weightless "${gpt2[@]}"
# A float32 program of the bfloat16 checkpoint: refused unless cast.
expect 0 "gpt2: float32 recipe" -- "$python" "$src/scripts/export_meta.py" --config fx/gpt2/ckpt -o gpt2.f32 \
  --dtype float32 --batch 2 --seq 8 --no-decode
printf '{"split_points": {"transformer.h.2": "BEGINNING"}}' >gpt2_f32.spec.json
mkdir -p fx/gpt2_f32 && cp fx/gpt2/inputs.safetensors fx/gpt2_f32/ && cp fx/gpt2/real_f32.pt2 fx/gpt2_f32/real.pt2
oracle gpt2_f32 real.pt2
expect 2 "gpt2: a bfloat16 checkpoint for a float32 program" -- "$pipecut" split gpt2.f32/model.pt2 \
  --spec gpt2_f32.spec.json --weights fx/gpt2/ckpt -o gpt2.f32.split
contains "gpt2: names both dtypes and the flag" "is bfloat16 [256, 32] here; the program's 'lm_head.weight' is float32 [256, 32]; --weights-cast converts it"
expect 0 "gpt2: --weights-cast" -- "$pipecut" split gpt2.f32/model.pt2 --spec gpt2_f32.spec.json --weights fx/gpt2/ckpt \
  --weights-cast -o gpt2.f32.split -q
exact gpt2_f32 gpt2.f32.split

# ---- wrapped: every name under `lm.`, LayerNorms named gamma and beta.
oracle wrapped real.pt2
expect 2 "wrapped: without renames" -- "$pipecut" split fx/wrapped/meta.pt2 --spec wrapped.spec.json \
  --weights fx/wrapped/ckpt --weights-prefix lm. -o wrapped.bound
contains "wrapped: lists what is missing" "lm.transformer.h.0.ln_1.bias, lm.transformer.h.0.ln_1.weight"
expect 0 "wrapped: inspect --weights without renames" -- "$pipecut" inspect fx/wrapped/meta.pt2 --weights fx/wrapped/ckpt \
  --weights-prefix lm. --json
"$python" -c '
import json, sys
w = json.loads(sys.stdin.read())["weights"]
assert len(w["missing"]) == 18 and w["missing"][0] == "lm.transformer.h.0.ln_1.bias", w["missing"]
unused = [u["name"] for u in w["unused"]]
assert len(unused) == 18 and "transformer.ln_f.gamma" in unused and all(n.endswith((".gamma", ".beta")) for n in unused), unused
' <<<"$LAST_LOG" && ok || bad "wrapped: inspect reports the legacy names unused and their tensors missing"
expect 0 "wrapped: split with renames and a prefix" -- "$pipecut" split fx/wrapped/meta.pt2 --spec wrapped.spec.json \
  --weights fx/wrapped/ckpt "${wrapped_names[@]}" -o wrapped.bound -q
exact wrapped wrapped.bound
expect 0 "wrapped: weightless split" -- "$pipecut" split fx/wrapped/meta.pt2 --spec wrapped.spec.json -o wrapped.weightless -q
exact wrapped wrapped.weightless --weights fx/wrapped/ckpt "${wrapped_names[@]}"

# ---- gemma (a 0-d buffer: its stand-in and its binding) and Phi-3 with
# longrope (the program writes the inv_freq it was bound: the checkpoint's
# mapping is copy-on-write): the recipe's forward program, both bindings.
for c in gemma phi3_longrope; do
  expect 0 "export_meta $c" -- "$python" "$src/scripts/export_meta.py" --config "fx/$c/ckpt" -o "fx/$c/meta" \
    --batch 2 --seq 8 --no-decode
  printf '{"split_points": {"model.layers.2": "BEGINNING"}}' >"$c.spec.json"
  oracle "$c" real.pt2
  flags=(--weights "fx/$c/ckpt" --weights "fx/$c/meta/buffers.safetensors")
  expect 0 "$c: split binding the checkpoint" -- "$pipecut" split "fx/$c/meta/model.pt2" --spec "$c.spec.json" \
    "${flags[@]}" -o "$c.bound" -q
  exact "$c" "$c.bound"
  expect 0 "$c: weightless split" -- "$pipecut" split "fx/$c/meta/model.pt2" --spec "$c.spec.json" -o "$c.weightless" -q
  exact "$c" "$c.weightless" "${flags[@]}"
done

# ---- train: a program with its weights, bound at run time (--bind-at run):
# training takes copies, and ends where training the ordinary split ends.
train=$src/testdata/train
expect 0 "train: ordinary split" -- "$pipecut" split "$train/llama_loss.pt2" --spec "$train/llama_loss.2.json" \
  --format torchscript -o train.real -q
expect 0 "train: pinned split" -- "$pipecut" split "$train/llama_loss.pt2" --spec "$train/llama_loss.2.json" \
  --format torchscript --weights fx/train/ckpt --bind-at run -o train.pinned -q
for dir in train.real train.pinned; do
  flags=()
  [[ $dir == train.pinned ]] && flags=(--weights fx/train/ckpt)
  expect 0 "train: $dir" -- "$run" "$dir" --train --data "$train/llama_loss.data.safetensors" -m 4 --steps 2 \
    --optimizer adamw --lr 0.01 --save-checkpoint "$dir.ckpt" -q "${flags[@]}"
  expect 0 "train: merge $dir" -- "$pipecut" merge "$dir.ckpt" -o "$dir.state.safetensors" -q
done
cmp -s train.real.state.safetensors train.pinned.state.safetensors && ok || bad "train: bound weights train as the split's own"
two train.ranks train.pinned --train --data "$train/llama_loss.data.safetensors" -m 4 --steps 2 --optimizer adamw \
  --lr 0.01 --save-checkpoint train.ranks.ckpt -q --weights fx/train/ckpt && ok ||
  { bad "train: bound at run on 2 Gloo ranks"; tail -n 3 train.ranks.rank*.log; }
expect 0 "train: merge the 2-rank checkpoint" -- "$pipecut" merge train.ranks.ckpt -o train.ranks.state.safetensors -q
cmp -s train.real.state.safetensors train.ranks.state.safetensors && ok || bad "train: 2 ranks bound at run train as one process"

# ---- bad sources: exit 2, the file and the tensor named, nothing written.
cp -r fx/llama/ckpt bad_ckpt
shard=$(cd bad_ckpt && ls model-0000*.safetensors | head -1)
refused() {  # refused DESCRIPTION NEEDLE -- pipecut split flags...
  local what=$1 needle=$2
  shift 3
  rm -rf refused.split
  expect 2 "$what" -- "$pipecut" split fx/llama/meta/model.pt2 --spec llama.spec.json -o refused.split "$@"
  contains "$what" "$needle"
  [[ ! -e refused.split ]] && ok || bad "$what: wrote refused.split"
}
truncate -s -3 "bad_ckpt/$shard"
refused "a truncated shard" "bad_ckpt/$shard: " -- --weights bad_ckpt
cp "fx/llama/ckpt/$shard" "bad_ckpt/$shard"
printf '\xff\xff\xff\xff\xff\xff\x00\x00{}' >absurd.safetensors
refused "an absurd header" "absurd.safetensors: header: header length" -- --weights absurd.safetensors
"$python" - bad_ckpt <<'EOF'
import json, sys
d = sys.argv[1]
index = json.load(open(d + "/model.safetensors.index.json"))
m = dict(index["weight_map"])
m["model.norm.weight"] = "model-99999-of-99999.safetensors"
json.dump({"weight_map": m}, open(d + "/missing_shard.safetensors.index.json", "w"))
m = dict(index["weight_map"])
m["model.extra.weight"] = m["model.norm.weight"]
json.dump({"weight_map": m}, open(d + "/lacking.safetensors.index.json", "w"))
EOF
refused "an index naming a missing shard" \
  "missing_shard.safetensors.index.json: weight_map.model.norm.weight: is in shard 'model-99999-of-99999.safetensors'" \
  -- --weights bad_ckpt/missing_shard.safetensors.index.json
refused "an index naming a tensor its shard lacks" \
  "lacking.safetensors.index.json: weight_map.model.extra.weight: is in shard" -- --weights bad_ckpt/lacking.safetensors.index.json
refused "the same name in two sources" "each tensor must come from one --weights source" \
  -- --weights fx/llama/ckpt --weights "fx/llama/ckpt/$shard"
mkfifo fifo.safetensors
refused "a FIFO source" "fifo.safetensors: is a FIFO" -- --weights fifo.safetensors
mkdir -p no_ckpt
refused "a directory without a checkpoint" "no_ckpt: is a directory holding neither" -- --weights no_ckpt
# A FIFO in a stage file's place, unverified: refused, not waited on.
cp -r llama.bound fifo.split && rm fifo.split/stage_000.pt && mkfifo fifo.split/stage_000.pt
expect 2 "a FIFO stage file with --no-verify" -- timeout 30 "$run" fifo.split --no-verify \
  --inputs fx/llama/inputs.safetensors -q
contains "a FIFO stage file: named" "fifo.split/stage_000.pt: is a FIFO, expected a stage file"
# --weights for a split that holds its weights.
expect 2 "--weights for a split with weights" -- "$run" llama.bound --weights fx/llama/ckpt \
  --inputs fx/llama/inputs.safetensors -q
contains "--weights for a split with weights: says so" "the split holds its weights"

echo "run_weights: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
