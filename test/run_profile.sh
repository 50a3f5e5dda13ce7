#!/usr/bin/env bash
# pipecut-run --profile: one-stage splits of fixtures are timed node by node;
# the profile names exactly the stage program's top-level nodes (as
# torch.export.load sees them) in order, with their modules, carries the
# source's hash, and its node times add up to about forward()'s time; a
# program with a KV cache too. Plus the
# refusals: a split of several stages (exit 2, naming the directory), options
# that only make sense for a pipeline (exit 1), WORLD_SIZE > 1 (exit 2).
set -uo pipefail
pipecut=$1 run=$2 py=$3 src=$4 out=$5
rm -rf "$out"
mkdir -p "$out"
models=$src/testdata/models
fail=0 pass=0
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

# The profile's checks, in Python: PROFILE SPLIT_DIR MODEL_PT2 THREADS ITERATIONS WARMUP
check_profile() {
  "$py" - "$@" <<'EOF' 2>&1
import hashlib, json, math, operator, sys, warnings
import torch
warnings.filterwarnings("ignore")
path, split, model, threads, iterations, warmup = sys.argv[1:]
p = json.load(open(path))
keys = ["format", "version", "source_model", "source_sha256", "source_directory_sha256", "device", "threads", "iterations", "warmup",
        "total_ms", "forward_ms", "transfer", "nodes"]
assert list(p) == keys, list(p)
t = p["transfer"]
assert t["method"] == "loopback-tcp" and t["message_bytes"] == 16 << 20, t
# Bounds on units, not on speed: the suite runs this beside other tests, on 2
# cores (1 GB/s is ~1 ms per MiB; 1000 would be a unit slip, or a stalled machine).
assert all(0 < t[k] < 1000 and math.isfinite(t[k]) for k in ("send_ms_per_mib", "recv_ms_per_mib")), t
assert p["format"] == "pipecut-profile" and p["version"] == 1, p
manifest = json.load(open(split + "/manifest.json"))
# The split was made without --hash-source: the source is identified by its
# zip directory (every record's name, size and CRC-32) alone.
import zipfile
data = open(model, "rb").read()
assert p["source_sha256"] == manifest["source_sha256"] == "", (p["source_sha256"], manifest["source_sha256"])
assert p["source_directory_sha256"] == manifest["source_directory_sha256"] == \
    hashlib.sha256(data[zipfile.ZipFile(model).start_dir:]).hexdigest(), p["source_directory_sha256"]
assert p["source_model"] == manifest["source_model"], (p["source_model"], manifest["source_model"])
assert p["device"] == "cpu" and p["threads"] == int(threads), (p["device"], p["threads"])
assert p["iterations"] == int(iterations) and p["warmup"] == int(warmup)
# Top-level nodes of the stage program as torch.export.load sees them, less
# what its loader adds: get_attr nodes (a higher-order op's body, which the
# .pt2 holds inline in the node) and operator.getitem nodes (the .pt2 lists a
# node's several outputs in the node itself).
ep = torch.export.load(split + "/stage_000.pt2")
want = []
for n in ep.graph_module.graph.nodes:
    if n.op == "call_function" and n.target is not operator.getitem:
        # torch.export.load marks a node it read without a stack by a stack
        # of one placeholder module.
        stack = [f for f in n.meta.get("nn_module_stack", {}).values()
                 if f[0] != "_empty_nn_module_stack_from_metadata_hook"]
        want.append((n.name, stack[-1][0] if stack else ""))
got = [(n["name"], n["module"]) for n in p["nodes"]]
assert got == want, next((i, g, w) for i, (g, w) in enumerate(zip(got + [None] * len(want), want + [None] * len(got))) if g != w)
ms = [n["ms"] for n in p["nodes"]]
assert all(isinstance(m, float) and math.isfinite(m) and m >= 0 for m in ms), ms
assert abs(sum(ms) - p["total_ms"]) <= 1e-6 * max(1.0, p["total_ms"]), (sum(ms), p["total_ms"])
assert p["forward_ms"] > 0 and p["total_ms"] > 0, p
# Export guards become no jit node: an entry all the same, timing nothing
# (the timer's own cost). Their median, not each: on a loaded machine the
# process can be preempted between any two clock reads.
guards = sorted(n["ms"] for n in p["nodes"] if n["name"].startswith(("_assert_tensor_metadata", "_assert_scalar")))
assert not guards or guards[len(guards) // 2] < 0.05, guards
# The same work as forward(), one node at a time: a few microseconds more per
# node, never a different order of magnitude.
ratio = p["total_ms"] / p["forward_ms"]
assert 0.2 < ratio < 5, ("total_ms / forward_ms", ratio)
print("ok", len(ms), "nodes, total", round(p["total_ms"], 3), "ms, forward", round(p["forward_ms"], 3), "ms")
EOF
}

echo '{"split_points": {}}' >"$out/whole.json"
for model in llama_tiny gpt2_tied; do
  expect 0 "$model: one-stage split" -- "$pipecut" split "$models/$model.pt2" --spec "$out/whole.json" -o "$out/$model.whole" -q
  expect 0 "$model: profile" -- "$run" "$out/$model.whole" --profile "$out/$model.profile.json" \
    --inputs "$models/$model.ref.safetensors" --threads 1 --iterations 3 --warmup 1
  contains "$model: summary" "nodes on cpu, 1 thread, median of 3 iterations after 1 warmup"
  contains "$model: summary" "sum of node times"
  contains "$model: summary" "transfer (loopback-tcp, 16777216-byte messages): send"
  expect 0 "$model: profile contents" -- check_profile "$out/$model.profile.json" "$out/$model.whole" "$models/$model.pt2" 1 3 1
  echo "$model: $LAST_LOG"
done

# Random inputs, the profile defaults (10 iterations after 2 warmup) and --json.
expect 0 "random inputs, --json" -- "$run" "$out/llama_tiny.whole" --profile "$out/random.json" --random-inputs --seed 3 \
  --int-high 50 --threads 1 --json
echo "$LAST_LOG" | "$py" -c '
import json, sys
lines = sys.stdin.read().strip().splitlines()
assert len(lines) == 1, lines
r = json.loads(lines[0])
assert r["profile"].endswith("random.json") and r["iterations"] == 10 and r["warmup"] == 2 and r["threads"] == 1, r
assert 0 < len(r["slowest"]) <= 10 and r["nodes"] >= len(r["slowest"]), r
assert [n["ms"] for n in r["slowest"]] == sorted((n["ms"] for n in r["slowest"]), reverse=True), r["slowest"]
' || { echo "FAIL: --json summary: $LAST_LOG"; fail=$((fail+1)); }
expect 0 "random inputs profile contents" -- check_profile "$out/random.json" "$out/llama_tiny.whole" "$models/llama_tiny.pt2" 1 10 2

# A program with state (the static KV cache a decode step updates in place,
# passed to the stage as trailing arguments): timed on fresh state tensors,
# and the profile balances a split by time whose generation gives the
# reference tokens.
gen=$src/testdata/generate
expect 0 "llama_kv_chunk: one-stage split" -- "$pipecut" split "$gen/llama_kv_chunk.pt2" --spec "$out/whole.json" \
  -o "$out/kv.whole" -q
# --decode-step: what a generated token costs (token ids [B, 1], no inputs file).
expect 0 "llama_kv_chunk: profile" -- "$run" "$out/kv.whole" --profile "$out/kv.profile.json" --decode-step --seed 1 \
  --threads 1 --iterations 3 --warmup 1
expect 0 "llama_kv_chunk: profile contents" -- check_profile "$out/kv.profile.json" "$out/kv.whole" "$gen/llama_kv_chunk.pt2" 1 3 1
"$py" -c '
import json, sys
p = json.load(open(sys.argv[1]))
copies = [n for n in p["nodes"] if n["name"].startswith("index_copy")]
assert len(copies) >= 8 and all(n["ms"] > 0 for n in copies), copies  # the cache writes, two a layer, timed
' "$out/kv.profile.json" && pass=$((pass+1)) || { echo "FAIL: llama_kv_chunk: the cache writes are not in the profile"; fail=$((fail+1)); }
expect 0 "llama_kv_chunk: balanced by time" -- "$pipecut" split "$gen/llama_kv_chunk.pt2" --stages 2 --balance time \
  --cost "$out/kv.profile.json" -o "$out/kv.time" -q
expect 0 "llama_kv_chunk: the time-balanced split generates" -- "$run" "$out/kv.time" --generate \
  --prompts "$gen/prompts.jsonl" --max-new-tokens 12 --check-tokens "$gen/llama_kv_chunk.greedy.jsonl" --threads 1

# A program that is not a decode step: exit 2 naming the manifest part, nothing written.
expect 2 "--decode-step of a program without a KV cache" -- "$run" "$out/llama_tiny.whole" --profile "$out/d.json" --decode-step
contains "--decode-step refusal" "$out/llama_tiny.whole: manifest inputs: the program takes 1 inputs, not 2; --decode-step takes a decode step"
[[ ! -e $out/d.json ]] && pass=$((pass+1)) || { echo "FAIL: a refused --decode-step wrote $out/d.json"; fail=$((fail+1)); }
expect 1 "--decode-step without --profile" -- "$run" "$out/kv.whole" --decode-step
contains "--decode-step alone" "--decode-step: times one decode step: give it with --profile PROFILE.json"
expect 1 "--decode-step with --random-inputs" -- "$run" "$out/kv.whole" --profile "$out/d.json" --decode-step --random-inputs
contains "--decode-step and --random-inputs" "--random-inputs excludes --decode-step"

# Refusals. A split of several stages: exit 2, naming the directory and the way out.
expect 0 "two-stage split" -- "$pipecut" split "$models/llama_tiny.pt2" --spec "$src/testdata/specs/llama_tiny.2.json" \
  -o "$out/llama_tiny.2" -q
expect 2 "profile of 2 stages" -- "$run" "$out/llama_tiny.2" --profile "$out/two.json" --random-inputs
contains "two stages: directory" "$out/llama_tiny.2: manifest: lists 2 stages"
contains "two stages: remedy" "one-stage split"
contains "two stages: spec" 'SPEC holding {"split_points": {}}'
[[ ! -e $out/two.json ]] && pass=$((pass+1)) || { echo "FAIL: a refused profile wrote $out/two.json"; fail=$((fail+1)); }
# Pipeline options make no sense for a profile: usage errors.
expect 1 "--profile with -m" -- "$run" "$out/llama_tiny.whole" --profile "$out/m.json" --random-inputs -m 2
contains "-m message" "--microbatches excludes --profile"
expect 1 "--profile with --stage-ranks" -- "$run" "$out/llama_tiny.whole" --profile "$out/m.json" --random-inputs --stage-ranks 0
contains "--stage-ranks message" "--stage-ranks"
expect 1 "--profile with --iterations 0" -- "$run" "$out/llama_tiny.whole" --profile "$out/m.json" --random-inputs --iterations 0
contains "--iterations message" "--iterations: expected a whole number >= 1, got 0"
[[ ! -e $out/m.json ]] && pass=$((pass+1)) || { echo "FAIL: a usage error wrote $out/m.json"; fail=$((fail+1)); }
# One process only.
expect 2 "--profile under WORLD_SIZE=2" -- env WORLD_SIZE=2 RANK=0 "$run" "$out/llama_tiny.whole" --profile "$out/w.json" --random-inputs
contains "WORLD_SIZE message" "WORLD_SIZE: is 2; --profile runs in one process"
# No inputs: exit 2 as for a pipeline run.
expect 2 "--profile without inputs" -- "$run" "$out/llama_tiny.whole" --profile "$out/w.json"
contains "inputs message" "give --inputs FILE, --random-inputs or (a KV-cache program) --decode-step"

echo "run_profile: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
