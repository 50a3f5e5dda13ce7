#!/usr/bin/env bash
# pipecut-run --generate on the KV-cache fixtures (testdata/generate, made by
# scripts/fixtures/generation.py): greedy tokens equal to the unsplit program
# looped in PyTorch (and to transformers' generate, which the fixture script
# checked), split into 2 and 3 stages, in one process with 1 to 5 slots, on
# 2 and 3 Gloo ranks, under gloo-strict and torchrun --no-python; top-p
# draws equal across placements and slot counts; every bad input exit 2
# naming the prompt or the program part, --output untouched.
#
#   run_generate.sh PIPECUT PIPECUT_RUN PYTHON SRC OUT PORT MANIFEST_SYNC   (ports PORT+1 .. PORT+19)
set -uo pipefail
pipecut=$1 run=$2 py=$3 src=$4 out=$5 port=$6 sync=$7
gen=$src/testdata/generate
fail=0 pass=0
source "$(dirname "$0")/expect.sh"
rm -rf "$out" && mkdir -p "$out" && cd "$out" || exit 1


# --- Splits: whole, 2 stages (layers 0-1 | 2-3), 3 stages ---------------------
echo '{"split_points": {}}' > whole.json
echo '{"split_points": {"model.model.layers.2": "BEGINNING"}}' > two.json
echo '{"split_points": {"model.model.layers.1": "BEGINNING", "model.model.layers.3": "BEGINNING"}}' > three.json
for model in llama_kv llama_kv_chunk qwen2_kv; do
  for spec in whole two three; do
    expect 0 "split $model $spec" -- "$pipecut" split "$gen/$model.pt2" --spec $spec.json -o $model.$spec -q
  done
done
expect 0 "split mlp whole" -- "$pipecut" split "$src/testdata/models/mlp.pt2" --spec whole.json -o mlp -q
eos() { [[ $1 == qwen2_kv ]] && echo "--eos 2"; }  # its reference stops at token 2

# --- One process: every split, several slot counts ----------------------------
for model in llama_kv llama_kv_chunk qwen2_kv; do
  for spec in whole two three; do
    for slots in 1 3; do
      expect 0 "$model $spec --slots $slots" -- "$run" $model.$spec --generate --prompts "$gen/prompts.jsonl" \
        --max-new-tokens 12 $(eos $model) --slots $slots --check-tokens "$gen/$model.greedy.jsonl"
      contains "$model $spec --slots $slots" "check: ok (every token as the reference)"
    done
  done
done
# Prefill in chunks of 2 (the program takes up to 63).
expect 0 "llama_kv_chunk --prefill-chunk 2" -- "$run" llama_kv_chunk.three --generate --prompts "$gen/prompts.jsonl" \
  --max-new-tokens 12 --prefill-chunk 2 --check-tokens "$gen/llama_kv_chunk.greedy.jsonl" --json
"$py" -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["check"]["ok"] and r["steps"] == (3 + 5 + 2) + 3 * 11, r' \
  "$LAST_LOG" && ok || bad "--prefill-chunk 2: steps"
# 5 slots (more than the prompt groups) and the default (one more than the stages).
expect 0 "llama_kv three --slots 5" -- "$run" llama_kv.three --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 12 \
  --slots 5 --check-tokens "$gen/llama_kv.greedy.jsonl" --output tokens.jsonl
contains "5 slots" "3 stages, 5 slots of 2 rows (greedy), 1 process"
# The tokens written equal the reference, byte for byte.
cmp -s tokens.jsonl "$gen/llama_kv.greedy.jsonl" && ok || bad "--output equals the reference"
expect 0 "llama_kv three, default slots" -- "$run" llama_kv.three --generate --prompts "$gen/prompts.jsonl" \
  --max-new-tokens 12 --check-tokens "$gen/llama_kv.greedy.jsonl" --json
"$py" - "$LAST_LOG" <<'EOF' && ok || bad "--json report"
import json, sys
r = json.loads(sys.argv[1])
assert r["mode"] == "generate" and r["stages"] == 3 and r["slots"] == 4 and r["rows_per_slot"] == 2, r
assert r["sequences"] == 6 and r["generated_tokens"] == 72 and r["prompt_tokens"] == 34, r
assert r["check"] == {"ok": True, "message": ""}, r
assert r["prefill_tokens_per_s"] > 0 and r["decode_tokens_per_s"] > 0, r
assert 0 < r["ttft_ms"]["p50"] <= r["ttft_ms"]["p99"] and 0 < r["inter_token_ms"]["p50"] <= r["inter_token_ms"]["p99"], r
assert [s["stage"] for s in r["stage_stats"]] == [0, 1, 2] and all(s["busy_ms"] > 0 for s in r["stage_stats"]), r
# Each slot holds its own state, used in place: 4 layers x (key, value) x [2, 2, 64, 16] float32,
# and the static cache's 4 int64 counters.
assert r["state"]["bytes_per_slot"] == 8 * 2 * 2 * 64 * 16 * 4 + 4 * 8 and r["state"]["bytes_copied_per_token"] == 0, r
EOF
# --trace: each slot's steps on each stage.
expect 0 "--trace" -- "$run" llama_kv.two --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 4 --trace trace.json -q
"$py" - <<'EOF' && ok || bad "--trace holds every stage's steps, by slot"
import json
t = json.load(open("trace.json"))
assert t["otherData"]["format"] == "pipecut-trace", t["otherData"]
import re
steps = [re.fullmatch(r"stage (\d) slot (\d) (prefill|decode)", e["name"]) for e in t["traceEvents"] if e.get("cat") == "compute"]
assert steps and all(steps), t["traceEvents"][:4]
# 2 stages, the default 3 slots, each taking one of the prompts' 3 groups.
assert {(m[1], m[2]) for m in steps} == {(s, k) for s in "01" for k in "012"}, steps[:4]
assert {m[3] for m in steps} == {"prefill", "decode"}
# The sampling after each step, on the last stage's track.
assert {e["tid"] for e in t["traceEvents"] if e.get("cat") == "sample"} == {1}, t["traceEvents"][:4]
EOF

# --- Across processes: 2 and 3 Gloo ranks, gloo-strict, torchrun ---------------
launch() {  # launch WORLD DIR MODEL BACKEND [OPTION...]: ranks on loopback, tokens checked on rank 0
  local world=$1 dir=$2 model=$3 backend=$4 pids=() rc=0 log=$2.$4.w$1
  shift 4
  port=$((port + 1))
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 120 "$run" "$dir" --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 12 $(eos "$model") \
      --check-tokens "$gen/$model.greedy.jsonl" --timeout 60 --backend "$backend" "$@" >"$log.rank$r.log" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < world; r++)); do wait "${pids[$r]}" || rc=$?; done
  if [[ $rc -ne 0 ]] || ! grep -q "check: ok" "$log.rank0.log" || ! grep -q "$world processes" "$log.rank0.log"; then
    bad "$dir on $world ranks, $backend $* (exit $rc)"; tail -n 3 "$log".rank*.log
  else
    ok
  fi
}
for model in llama_kv llama_kv_chunk qwen2_kv; do launch 2 $model.two $model gloo; done
launch 3 llama_kv_chunk.three llama_kv_chunk gloo --slots 4
launch 2 llama_kv.three llama_kv gloo                 # a rank runs two stages
launch 2 llama_kv.two llama_kv gloo-strict
launch 3 qwen2_kv.three qwen2_kv gloo-strict
torchrun=$(dirname "$py")/torchrun
port=$((port + 1))
log=$(timeout 180 "$torchrun" --no-python --nproc-per-node 2 --master-addr 127.0.0.1 --master-port $port \
  "$run" llama_kv_chunk.two --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 12 \
  --check-tokens "$gen/llama_kv_chunk.greedy.jsonl" --timeout 60 2>&1)
grep -q "2 processes" <<<"$log" && grep -q "check: ok" <<<"$log" && ok || { bad "torchrun --no-python"; echo "$log" | tail -5; }

# --- Top-p: the same draws whatever the placement and the slot count -----------
sampling=(--generate --prompts "$gen/prompts.jsonl" --max-new-tokens 12 --sampling top-p --temperature 0.8 --top-p 0.9)
topp=("${sampling[@]}" --seed 7)
expect 0 "top-p unsplit, 1 slot" -- "$run" llama_kv.whole "${topp[@]}" --slots 1 --output topp.whole.jsonl -q
expect 0 "top-p unsplit again" -- "$run" llama_kv.whole "${topp[@]}" --slots 1 --output topp.again.jsonl -q
expect 0 "top-p 3 stages, 4 slots" -- "$run" llama_kv.three "${topp[@]}" --slots 4 --output topp.three.jsonl -q
cmp -s topp.whole.jsonl topp.again.jsonl && ok || bad "top-p run to run"
cmp -s topp.whole.jsonl topp.three.jsonl && ok || bad "top-p across splits and slot counts"
cmp -s topp.whole.jsonl "$gen/llama_kv.greedy.jsonl" && bad "top-p differs from greedy" || ok
port=$((port + 1))
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 \
    "$run" llama_kv.two "${topp[@]}" --timeout 60 -q $([[ $r == 0 ]] && echo "--output topp.ranks.jsonl") >topp.rank$r.log 2>&1 &
done
wait
cmp -s topp.whole.jsonl topp.ranks.jsonl && ok || { bad "top-p on 2 ranks"; tail -n 3 topp.rank*.log; }
expect 0 "another seed" -- "$run" llama_kv.whole "${sampling[@]}" --seed 8 --output topp.seed8.jsonl -q
cmp -s topp.whole.jsonl topp.seed8.jsonl && bad "another seed draws differently" || ok

# --- --check-tokens: exit 4 at the first differing token ------------------------
"$py" - "$gen/llama_kv.greedy.jsonl" changed.jsonl <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
lines[1]["tokens"][3] += 1
open(sys.argv[2], "w").write("".join(json.dumps(l) + "\n" for l in lines))
EOF
want=$(sed -n 2p "$gen/llama_kv.greedy.jsonl" | "$py" -c 'import json,sys; print(json.loads(sys.stdin.read())["tokens"][3])')
expect 4 "--check-tokens against a changed reference" -- "$run" llama_kv.two --generate --prompts "$gen/prompts.jsonl" \
  --max-new-tokens 12 --check-tokens changed.jsonl
contains "names prompt and position" "check: FAILED: prompt \"b\": position 3: token $want, the reference has $((want + 1))"

# --- Bad input: exit 2 naming the prompt or the program part, --output untouched --
prompts_run() {  # prompts_run FILE OUTPUT [OPTION...]
  local f=$1 o=$2; shift 2
  "$run" llama_kv.two --generate --prompts "$f" --max-new-tokens 12 --output "$o" -q "$@"
}
row() {  # row CODE DESCRIPTION NEEDLE -- command...: exit code, message, no out.jsonl
  local code=$1 what=$2 needle=$3; shift 3
  rm -f out.jsonl
  expect "$code" "$what" "$@"
  contains "$what" "$needle"
  [[ ! -e out.jsonl ]] && ok || bad "$what: wrote out.jsonl"
}
"$py" -c 'print("{\"id\": \"long\", \"prompt\": [" + ", ".join(["5"] * 60) + "]}")' > long.jsonl
row 2 "a prompt longer than the cache" 'long.jsonl: prompt "long"' -- prompts_run long.jsonl out.jsonl
contains "the cache" "60 tokens and --max-new-tokens 12 need 71 cache positions; the cache holds 64"
printf '{"id": 1, "prompt": [5, 6]}\n{"id": 9, "prompt": [3, 256]}\n' > vocab.jsonl
row 2 "a token outside the vocabulary" "vocab.jsonl: prompt 9: prompt[1]" -- prompts_run vocab.jsonl out.jsonl
contains "the vocabulary" "token 256 is outside the vocabulary of 256"
printf '{"id": 1, "prompt": [5, 6]}\n{"id": 2, "prompt": []}\n' > empty.jsonl
row 2 "an empty prompt" "empty.jsonl: line 2: prompt" -- prompts_run empty.jsonl out.jsonl
printf '{"id": 1, "prompt": [5, 6]}\n{"id": 2, "prompt": [5' > cut.jsonl
row 2 "a cut-off line" "cut.jsonl: line 2" -- prompts_run cut.jsonl out.jsonl
: > none.jsonl
row 2 "no prompts" "none.jsonl: holds no prompts" -- prompts_run none.jsonl out.jsonl
row 2 "a missing prompts file" "missing.jsonl" -- prompts_run missing.jsonl out.jsonl
row 2 "a program that is not a decode step" "takes 1 inputs, not 2" -- \
  "$run" mlp --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 2 --output out.jsonl
# Hand-edited manifests: no state; logits not [B, T, vocab].
edit() {  # edit DIR PYTHON-EXPR-ON-m: a copy of llama_kv.two with its manifest changed
  rm -rf "$1" && cp -r llama_kv.two "$1"
  "$py" - "$1/manifest.json" "$2" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
exec(sys.argv[2])
json.dump(m, open(sys.argv[1], "w"), indent=1)
EOF
  "$sync" "$1" >/dev/null
}
edit nostate 'for s in m["stages"]: s.pop("state", None)'
row 2 "a program with no state" "no stage holds state (a KV cache)" -- \
  "$run" nostate --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 2 --output out.jsonl
edit nologits 'm["outputs"][0]["tensor"]["shape"] = m["outputs"][0]["tensor"]["shape"][:2]'
row 2 "a program without logits" "is not logits [B, T, vocab]" -- \
  "$run" nologits --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 2 --output out.jsonl
row 2 "--stage-format pt2" "--generate runs TorchScript stages or AOTInductor packages" -- \
  "$run" llama_kv.two --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 2 --stage-format pt2 --output out.jsonl
row 1 "--max-new-tokens 0" "--max-new-tokens" -- \
  "$run" llama_kv.two --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 0 --output out.jsonl
row 1 "--top-p 0" "--top-p" -- "$run" llama_kv.two --generate --prompts "$gen/prompts.jsonl" --max-new-tokens 2 \
  --sampling top-p --top-p 0 --output out.jsonl
# --output replaces only a tokens file pipecut-run wrote; a failing run leaves it whole.
echo "my notes" > notes.jsonl
expect 2 "--output over a file pipecut did not write" -- prompts_run "$gen/prompts.jsonl" notes.jsonl
contains "--output notes" "notes.jsonl: is a file pipecut did not write"
[[ $(cat notes.jsonl) == "my notes" ]] && ok || bad "notes.jsonl changed"
expect 2 "--output over the prompts" -- prompts_run "$gen/prompts.jsonl" "$gen/prompts.jsonl" --force
contains "--output over the prompts" "is this command's input"
cp tokens.jsonl kept.jsonl
before=$(sha256sum kept.jsonl)
expect 2 "a failing run keeps a previous --output" -- prompts_run vocab.jsonl kept.jsonl
[[ $(sha256sum kept.jsonl) == "$before" ]] && ok || bad "kept.jsonl changed"
expect 0 "--output over its own previous output" -- prompts_run "$gen/prompts.jsonl" kept.jsonl

echo "run_generate: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
