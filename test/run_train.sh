#!/usr/bin/env bash
# pipecut-run --train against eager PyTorch: a tiny Llama and a tied GPT-2,
# each exported with its cross-entropy loss (testdata/train, made by
# scripts/fixtures/train_refs.py), K=4 steps of M=4 micro-batches, SGD and
# AdamW, every schedule, in one process and over 2 and 4 Gloo processes.
# Per-step losses and the merged final parameters must equal the eager
# references within 1e-5 (relative for losses; atol 1e-7 for SGD's state,
# 1e-5 for AdamW's, whose normalised steps turn rounding noise in a zero
# gradient into 1e-6-sized differences). Also: tied copies bitwise equal in
# every checkpoint (pipecut merge refuses otherwise), resume equals an
# uninterrupted run byte for byte, and bad requests exit with the right code.
set -uo pipefail
pipecut=$1 run=$2 python=$3 src=$4 out=$5 port=${6:-29650}
train=$src/testdata/train
source "$src/test/expect.sh"
fail=0 pass=0
rm -rf "$out" && mkdir -p "$out"

for model in llama_loss gpt2_loss; do
  for n in 2 4 8; do
    "$pipecut" split "$train/$model.pt2" --spec "$train/$model.$n.json" --format torchscript -o "$out/$model.$n" -q >/dev/null ||
      { echo "FAIL: split $model into $n"; fail=$((fail+1)); }
  done
done

flags() {  # the optimizer flags the reference was trained with
  "$python" - "$1" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
print(json.loads(b[8:8 + n])["__metadata__"]["optimizer_flags"])
EOF
}

# check NAME REPORT CKPT REF OPT: merges the checkpoint now (merge refuses
# tied copies that differ) and queues the comparison of losses and merged
# state against the eager reference, made in one Python process at the end.
checks=$out/checks.tsv
: >"$checks"
check() {
  local name=$1 report=$2 ckpt=$3 ref=$4 opt=$5 atol=1e-7
  [[ $opt == adamw ]] && atol=1e-5
  if ! "$pipecut" merge "$ckpt" -o "$ckpt.state.safetensors" -q >"$ckpt.merge.log" 2>&1; then
    echo "FAIL ($name): merge"; cat "$ckpt.merge.log"; fail=$((fail+1)); return
  fi
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$report" "$ref" "$ckpt.state.safetensors" "$atol" >>"$checks"
}

one() {  # one MODEL OPT SCHEDULE SPLIT
  local model=$1 opt=$2 schedule=$3 dir=$out/$1.$4 name="$1 $2 $3 one process ($4 stages)"
  local tag=$out/$model.$opt.$schedule.p1
  "$run" "$dir" --train --data "$train/$model.data.safetensors" -m 4 --steps 4 $(flags "$train/$model.$opt.ref.safetensors") \
    --schedule "$schedule" --json --save-checkpoint "$tag.ckpt" >"$tag.json" 2>"$tag.err" ||
    { echo "FAIL ($name): exit $?"; tail -3 "$tag.err"; fail=$((fail+1)); return; }
  check "$name" "$tag.json" "$tag.ckpt" "$train/$model.$opt.ref.safetensors" "$opt"
}

multi() {  # multi WORLD MODEL OPT SCHEDULE SPLIT
  local world=$1 model=$2 opt=$3 schedule=$4 dir=$out/$2.$5 name="$2 $3 $4 over $1 Gloo ranks ($5 stages)"
  local tag=$out/$model.$opt.$schedule.w$world pids=() rc=0
  port=$((port + 1))
  for ((r = 0; r < world; r++)); do
    RANK=$r WORLD_SIZE=$world LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      timeout 120 "$run" "$dir" --train --data "$train/$model.data.safetensors" -m 4 --steps 4 --timeout 60 \
      $(flags "$train/$model.$opt.ref.safetensors") --schedule "$schedule" --json --save-checkpoint "$tag.ckpt" \
      >"$tag.rank$r.json" 2>"$tag.rank$r.err" &
    pids+=($!)
  done
  for ((r = 0; r < world; r++)); do wait "${pids[$r]}" || rc=$?; done
  if [[ $rc -ne 0 ]]; then echo "FAIL ($name): exit $rc"; tail -n 2 "$tag".rank*.err; fail=$((fail+1)); return; fi
  check "$name" "$tag.rank0.json" "$tag.ckpt" "$train/$model.$opt.ref.safetensors" "$opt"
}

# The tiers' parts (test/test_part.sh): "quick" runs half of the (model,
# optimizer, schedule) matrix, every schedule at every world, chosen so that
# each pair of model, optimizer and schedule still runs: llama_loss with SGD
# under gpipe and interleaved-1f1b and AdamW under 1f1b and zb1p, gpt2_loss
# the other way round; "rest" the other half; "all" both.
source "$src/test/test_part.sh"
quick_half() {  # quick_half MODEL OPT SCHEDULE
  local opt=sgd
  [[ $3 == 1f1b || $3 == zb1p ]] && opt=adamw
  if [[ $1 == gpt2_loss ]]; then [[ $opt == sgd ]] && opt=adamw || opt=sgd; fi
  [[ $2 == "$opt" ]]
}
for model in llama_loss gpt2_loss; do
  for opt in sgd adamw; do
    for schedule in gpipe 1f1b interleaved-1f1b zb1p; do
      case $part in
        quick) quick_half "$model" "$opt" "$schedule" || continue ;;
        rest) quick_half "$model" "$opt" "$schedule" && continue ;;
      esac
      one "$model" "$opt" "$schedule" 4
      # Interleaved runs two stages per rank, round robin.
      if [[ $schedule == interleaved-1f1b ]]; then
        multi 2 "$model" "$opt" "$schedule" 4
        multi 4 "$model" "$opt" "$schedule" 8
      else
        multi 2 "$model" "$opt" "$schedule" 2
        multi 4 "$model" "$opt" "$schedule" 4
      fi
    done
  done
done

"$python" "$src/scripts/check_train.py" --batch "$checks" >"$out/checks.log" 2>&1
passed=$(grep -c '^PASS ' "$out/checks.log") failed=$(grep -c '^FAIL ' "$out/checks.log")
pass=$((pass + passed)) fail=$((fail + failed))
if [[ $failed -gt 0 || $passed -ne $(wc -l <"$checks") ]]; then
  echo "FAIL: $failed of $(wc -l <"$checks") runs differ from eager PyTorch:"; grep -B6 '^FAIL ' "$out/checks.log" | head -60
fi
if [[ $part == rest ]]; then
  echo "run_train (the other half of the matrix): $pass passed, $fail failed"
  [[ $fail -eq 0 ]]
  exit
fi

# Resume: 2 steps, then 2 more from the checkpoint, equals 4 steps at once:
# the same losses and the same checkpoint bytes (one process, this machine).
for world in 1 2; do
  model=gpt2_loss opt=adamw dir=$out/gpt2_loss.4 tag=$out/resume.w$world
  args=(--train --data "$train/$model.data.safetensors" -m 4 $(flags "$train/$model.$opt.ref.safetensors") --json)
  launch() {  # launch NAME ARGS...: on $world ranks
    local name=$1 pids=() rc=0; shift
    port=$((port + 1))
    for ((r = 0; r < world; r++)); do
      RANK=$r WORLD_SIZE=$world LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 120 "$run" "$dir" "${args[@]}" --timeout 60 "$@" >"$tag.$name.rank$r.json" 2>"$tag.$name.rank$r.err" &
      pids+=($!)
    done
    for ((r = 0; r < world; r++)); do wait "${pids[$r]}" || rc=$?; done
    [[ $rc -eq 0 ]] || { echo "FAIL (resume $name, world $world): exit $rc"; tail -n 2 "$tag.$name".rank*.err; fail=$((fail+1)); }
  }
  launch full --steps 4 --save-checkpoint "$tag.full.ckpt"
  launch first --steps 2 --save-checkpoint "$tag.first.ckpt"
  launch rest --steps 2 --load-checkpoint "$tag.first.ckpt" --save-checkpoint "$tag.rest.ckpt"
  losses() { "$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["losses"])' "$1"; }
  full=$(losses "$tag.full.rank0.json") first=$(losses "$tag.first.rank0.json") rest=$(losses "$tag.rest.rank0.json")
  if [[ "${first%]}, ${rest#[}" == "$full" ]]; then pass=$((pass+1)); else
    echo "FAIL (resume, world $world): $first + $rest != $full"; fail=$((fail+1)); fi
  if cmp -s "$tag.full.ckpt/checkpoint.json" "$tag.rest.ckpt/checkpoint.json" &&
    cmp -s "$tag.full.ckpt/stage_000.safetensors" "$tag.rest.ckpt/stage_000.safetensors" &&
    cmp -s "$tag.full.ckpt/stage_003.safetensors" "$tag.rest.ckpt/stage_003.safetensors"; then pass=$((pass+1)); else
    echo "FAIL (resume, world $world): the resumed checkpoint differs from the uninterrupted one"; fail=$((fail+1)); fi
done

# The trace shows each worker's action order: its name lists the plan, its
# spans are the actions ("1B0": stage 1, backward, micro-batch 0).
"$run" "$out/llama_loss.4" --train --data "$train/llama_loss.data.safetensors" -m 4 --steps 1 --schedule zb1p \
  --trace "$out/zb1p.trace.json" -q >/dev/null 2>&1
if "$python" - "$out/zb1p.trace.json" <<'EOF'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
spans = [e["name"] for e in events if e.get("ph") == "X" and e["name"] != "wait"]
assert any(n.startswith("rank 3: 3F0 3I0 3W0 3F1") for n in names), names
assert {"0F0", "3I0", "3W0", "1I3", "0W3"} <= set(spans), spans
assert len(spans) == 4 * 4 * 3, len(spans)  # F, I and W of 4 stages x 4 micro-batches
EOF
then pass=$((pass+1)); else echo "FAIL: the zb1p trace"; fail=$((fail+1)); fi

# 1F1B's cool-down (the backwards after a rank's last forward) runs as I then
# W, sending its input gradients as I ends (traced as 1I3 and 1W3); the other
# backwards run whole. Two ranks, 2 stages, M=4: rank 1's cool-down is 1B3.
# Span names and their order on the worker's own clock, not the send span's
# start, which the transport thread records when it gets to it.
port=$((port + 1)) pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$run" "$out/llama_loss.2" \
    --train --data "$train/llama_loss.data.safetensors" -m 4 --steps 1 --timeout 60 --schedule 1f1b \
    --trace "$out/cool.trace.json" -q >"$out/cool.rank$r.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
if [[ $rc -eq 0 ]] && "$python" - "$out/cool.trace.rank1.json" <<'EOF'
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
span = {e["name"]: e for e in events if e.get("cat") == "compute"}
sends = {e["name"] for e in events if e["name"].startswith("send mb ")}
assert {"1B0", "1B1", "1B2", "1I3", "1W3"} <= set(span) and not {"1B3", "1I0", "1W0"} & set(span), sorted(span)
assert span["1I3"]["ts"] + span["1I3"]["dur"] <= span["1W3"]["ts"], (span["1I3"], span["1W3"])
assert {f"send mb {mb} to rank 0" for mb in range(4)} <= sends, sends
EOF
then pass=$((pass+1)); else echo "FAIL: 1F1B's cool-down backward does not run as I then W (exit $rc)"; fail=$((fail+1)); fi

# Messages matched by order alone, as under NCCL (gloo-strict: one tag).
multi_strict() {
  local pids=() rc=0 tag=$out/strict
  port=$((port + 1))
  for r in 0 1; do
    RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$run" "$out/gpt2_loss.4" \
      --train --data "$train/gpt2_loss.data.safetensors" -m 4 --steps 4 --timeout 60 --backend gloo-strict \
      $(flags "$train/gpt2_loss.sgd.ref.safetensors") --schedule zb1p --json >"$tag.rank$r.json" 2>"$tag.rank$r.err" &
    pids+=($!)
  done
  for r in 0 1; do wait "${pids[$r]}" || rc=$?; done
  if [[ $rc -eq 0 ]] && "$python" "$src/scripts/check_train.py" "$tag.rank0.json" "$train/gpt2_loss.sgd.ref.safetensors" \
    >"$tag.check" 2>&1; then pass=$((pass+1)); else echo "FAIL: gloo-strict (exit $rc)"; tail -n 3 "$tag".*; fail=$((fail+1)); fi
}
multi_strict

# A rank killed mid-training ends the other with exit 5, naming it.
"$python" - "$train/gpt2_loss.data.safetensors" "$out/long.data.safetensors" "$src/scripts" <<'EOF'
import sys
sys.path.insert(0, sys.argv[3])
from refio import read_tensors, write_tensors
t, meta = read_tensors(sys.argv[1])
write_tensors(sys.argv[2], {k: v.repeat(500, 1) for k, v in t.items()}, meta)
EOF
port=$((port + 1)) pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$run" "$out/gpt2_loss.2" --train \
    --data "$out/long.data.safetensors" -m 4 --timeout 30 -q >"$out/kill.rank$r.log" 2>&1 &
  pids+=($!)
done
sleep 3
kill -KILL "${pids[1]}"
t0=$SECONDS
while kill -0 "${pids[0]}" 2>/dev/null && ((SECONDS - t0 < 40)); do sleep 0.2; done
kill -9 "${pids[0]}" 2>/dev/null
wait "${pids[0]}"; rc=$?
{ wait "${pids[1]}"; } 2>/dev/null
if [[ $rc -eq 5 ]] && ((SECONDS - t0 <= 15)) && grep -q "rank 1" "$out/kill.rank0.log" && ! grep -q "did not unwind" "$out/kill.rank0.log"; then pass=$((pass+1)); else
  echo "FAIL: rank 0 after rank 1 was killed: exit $rc after $((SECONDS - t0)) s:"; cat "$out/kill.rank0.log"; fail=$((fail+1)); fi

# Bad requests.
d=$out/llama_loss.4 data=$train/llama_loss.data.safetensors
"$pipecut" split "$src/testdata/models/mlp.pt2" --spec "$src/testdata/specs/mlp.2.json" --format torchscript -o "$out/mlp.2" -q >/dev/null
expect 2 "not a loss" -- "$run" "$out/mlp.2" --train --data "$data"
contains "not a loss" "single output is a scalar loss"
expect 1 "no data" -- "$run" "$d" --train
contains "no data" "--data"
expect 1 "train option without --train" -- "$run" "$d" --optimizer adamw --inputs "$data"
expect 1 "unknown schedule" -- "$run" "$d" --train --data "$data" --schedule looped-bfs
expect 2 "too many steps" -- "$run" "$d" --train --data "$data" -m 4 --steps 5
contains "too many steps" "holds 4 steps of 8 rows"
expect 2 "rows do not split" -- "$run" "$d" --train --data "$data" -m 3
contains "rows do not split" "llama_loss.data.safetensors"
expect 2 "interleaved with one stage per rank" -- env RANK=0 WORLD_SIZE=2 "$run" "$out/llama_loss.2" --train --data "$data" -m 4 --schedule interleaved-1f1b
contains "interleaved with one stage per rank" "--schedule"
expect 2 "checkpoint of another split" -- "$run" "$out/llama_loss.2" --train --data "$data" -m 4 --steps 1 \
  --optimizer sgd --load-checkpoint "$out/llama_loss.sgd.gpipe.p1.ckpt"
contains "checkpoint of another split" "split_spec"
expect 2 "checkpoint of another optimizer" -- "$run" "$d" --train --data "$data" -m 4 --steps 1 --optimizer adamw \
  --load-checkpoint "$out/llama_loss.sgd.gpipe.p1.ckpt"
contains "checkpoint of another optimizer" "--optimizer adamw"
cp -r "$out/llama_loss.sgd.gpipe.p1.ckpt" "$out/damaged.ckpt"
printf 'x' | dd of="$out/damaged.ckpt/stage_001.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
expect 2 "damaged checkpoint" -- "$run" "$d" --train --data "$data" -m 4 --steps 1 --optimizer sgd \
  --load-checkpoint "$out/damaged.ckpt"
contains "damaged checkpoint" "stage_001.safetensors"
expect 2 "merge of a damaged checkpoint" -- "$pipecut" merge "$out/damaged.ckpt" -o "$out/damaged.safetensors"
[[ ! -e $out/damaged.safetensors ]] && pass=$((pass+1)) || { echo "FAIL: merge left an output"; fail=$((fail+1)); }

# Schedules as data: --dump-schedule writes the plan run as
# torch.distributed.pipelining's action CSV, and --schedule-file runs such a
# file: the same checkpoint bytes as the built-in schedule, in one process and
# on 2 Gloo ranks (zb1p: split backwards, and gpt2's tied gradients). Bad
# files: exit 2 naming the action, before anything trains.
d4=$out/gpt2_loss.4 sargs=(--train --data "$train/gpt2_loss.data.safetensors" -m 4 --steps 2
                           $(flags "$train/gpt2_loss.adamw.ref.safetensors"))
for world in 1 2; do
  for how in builtin file; do
    extra=(--schedule zb1p --dump-schedule "$out/sched.w$world.csv")
    [[ $how == file ]] && extra=(--schedule-file "$out/sched.w$world.csv")
    pids=() rc=0 port=$((port + 1))
    for ((r = 0; r < world; r++)); do
      RANK=$r WORLD_SIZE=$world LOCAL_WORLD_SIZE=$world MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 120 "$run" "$d4" "${sargs[@]}" "${extra[@]}" --timeout 60 --json --save-checkpoint "$out/sched.$how.w$world.ckpt" \
        >"$out/sched.$how.w$world.rank$r.json" 2>"$out/sched.$how.w$world.rank$r.err" &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    [[ $rc -eq 0 ]] && pass=$((pass+1)) || { echo "FAIL (schedule $how on $world ranks): exit $rc"; tail -n 2 "$out"/sched.$how.w$world.rank*.err; fail=$((fail+1)); }
  done
  grep -q '^0F0,' "$out/sched.w$world.csv" && [[ $(wc -l <"$out/sched.w$world.csv") -eq $((world == 1 ? 4 : 2)) ]] &&
    pass=$((pass+1)) || { echo "FAIL: --dump-schedule on $world ranks wrote: $(head -c 300 "$out/sched.w$world.csv")"; fail=$((fail+1)); }
  "$pipecut" merge "$out/sched.builtin.w$world.ckpt" -o "$out/sched.builtin.w$world.safetensors" -q &&
    "$pipecut" merge "$out/sched.file.w$world.ckpt" -o "$out/sched.file.w$world.safetensors" -q &&
    cmp -s "$out/sched.builtin.w$world.safetensors" "$out/sched.file.w$world.safetensors" && pass=$((pass+1)) ||
    { echo "FAIL: the schedule file on $world ranks trained other parameters than zb1p"; fail=$((fail+1)); }
done
# torch.distributed.pipelining reads what --dump-schedule wrote (_Action.from_str,
# as _load_csv does), each cell back to the same text; and pipecut runs what
# torch's csv writer makes of a schedule (CRLF, an empty cell for an idle step).
"$python" - "$out/sched.w1.csv" "$out/sched.w2.csv" "$out/torch.w1.csv" <<'EOF' && pass=$((pass+1)) || { echo "FAIL: torch reads the dumped schedules"; fail=$((fail+1)); }
import csv, sys
from torch.distributed.pipelining.schedules import _Action
for f in sys.argv[1:3]:
    rows = list(csv.reader(open(f, newline="")))
    assert rows and all(str(_Action.from_str(c)) == c for row in rows for c in row), f
rows = list(csv.reader(open(sys.argv[1], newline="")))
with open(sys.argv[3], "w", newline="") as out:
    w = csv.writer(out)
    for row in rows:
        w.writerow([_Action.from_str(row[0])] + [None] + [_Action.from_str(c) for c in row[1:]])
EOF
expect 0 "torch's writer, run" -- "$run" "$d4" "${sargs[@]}" --schedule-file "$out/torch.w1.csv" --save-checkpoint "$out/sched.torch.w1.ckpt"
"$pipecut" merge "$out/sched.torch.w1.ckpt" -o "$out/sched.torch.w1.safetensors" -q &&
  cmp -s "$out/sched.builtin.w1.safetensors" "$out/sched.torch.w1.safetensors" && pass=$((pass+1)) ||
  { echo "FAIL: torch's spelling of the schedule trained other parameters"; fail=$((fail+1)); }
grep -q '"schedule": "file ' "$out/sched.file.w1.rank0.json" && pass=$((pass+1)) || { echo "FAIL: --json names the file"; fail=$((fail+1)); }
# A backward before its forward; a micro-batch twice; a deadlock across ranks
# (rank 1 runs 1B1 before 1F0, which rank 2 needs before its 2B1).
printf '0B0,0F0,0F1,0F2,0F3,0B1,0B2,0B3\n1F0,1F1,1F2,1F3,1B0,1B1,1B2,1B3\n2F0,2F1,2F2,2F3,2B0,2B1,2B2,2B3\n3F0,3F1,3F2,3F3,3B0,3B1,3B2,3B3\n' >"$out/early.csv"
printf '0F0,0F0,0F1,0F2,0F3,0B0,0B1,0B2,0B3\n1F0,1F1,1F2,1F3,1B0,1B1,1B2,1B3\n2F0,2F1,2F2,2F3,2B0,2B1,2B2,2B3\n3F0,3F1,3F2,3F3,3B0,3B1,3B2,3B3\n' >"$out/twice.csv"
printf '0F0,0F1,0F2,0F3,0B0,0B1,0B2,0B3\n1F1,1B1,1F0,1B0,1F2,1F3,1B2,1B3\n2F0,2F1,2F2,2F3,2B0,2B1,2B2,2B3\n3F0,3F1,3F2,3F3,3B0,3B1,3B2,3B3\n' >"$out/deadlock.csv"
expect 2 "a backward before its forward" -- "$run" "$d4" "${sargs[@]}" --schedule-file "$out/early.csv"
contains "a backward before its forward: named" "early.csv: not a schedule this pipeline can run: rank 0 stalls at 0B0"
expect 2 "a micro-batch twice" -- "$run" "$d4" "${sargs[@]}" --schedule-file "$out/twice.csv"
contains "a micro-batch twice: named" "rank 0 runs 0F0 twice"
expect 2 "a deadlock across ranks" -- "$run" "$d4" "${sargs[@]}" --schedule-file "$out/deadlock.csv"
contains "a deadlock across ranks: named" "rank 1 stalls at 1B1: it waits for 2B1, which rank 2 runs after 2F0"
expect 2 "a file for 2 ranks on 4" -- env RANK=0 WORLD_SIZE=4 "$run" "$d4" "${sargs[@]}" --schedule-file "$out/sched.w2.csv"
contains "ranks named" "lists actions for 2 ranks (rows), but the run has 4"
rm -f "$out/fifo.csv" && mkfifo "$out/fifo.csv"
expect 2 "a schedule that is a FIFO" -- timeout 20 "$run" "$d4" "${sargs[@]}" --schedule-file "$out/fifo.csv"
contains "a FIFO: named, no actions" "fifo.csv: no actions: one row of actions per rank"
expect 1 "--schedule with --schedule-file" -- "$run" "$d4" "${sargs[@]}" --schedule 1f1b --schedule-file "$out/sched.w1.csv"
echo "not a schedule" >"$out/notes.csv"
expect 2 "--dump-schedule over a file pipecut did not write" -- "$run" "$d4" "${sargs[@]}" --dump-schedule "$out/notes.csv"
[[ $(cat "$out/notes.csv") == "not a schedule" ]] && pass=$((pass+1)) || { echo "FAIL: notes.csv was replaced"; fail=$((fail+1)); }

echo "run_train: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
