#!/usr/bin/env bash
# Operator-support partitioning (partition/support.h, driver/support_targets.h,
# docs/pipecut.md "Cutting where support ends"). Fixtures are made now
# (scripts/fixtures/support.py): a map nested in a cond (what AOTInductor
# cannot compile), a chain of Linear/GELU/ReLU, and a bfloat16 Linear between
# float32 ones. For each target: inspect's verdicts and reasons (text and
# JSON), the split's runs (each stage's operators read back with
# torch.export.load against its mark: test/support_stages.py), the manifest's
# record, the runs against PyTorch at M=1 and M=4 (both branches of the cond
# taken), one process and 2 Gloo ranks with --stage-format auto and
# --supported-device/--fallback-device; the minimum size; support cuts with a
# spec and with balancing; each built-in rule against its format (a node it
# refuses fails there, what it takes loads and runs); bad dictionaries (exit
# 2 naming the key, nothing written). Compiling the supported stages and
# running them mixed with TorchScript is in test/run_aoti.sh (full tier).
set -uo pipefail
pipecut=$1 run=$2 python=$3 src=$4 out=$5 port=${6:-29865}
source "$src/test/expect.sh"
fail=0 pass=0
rm -rf "$out" && mkdir -p "$out" && cd "$out" || exit 1
"$python" "$src/scripts/fixtures/support.py" fx >fixtures.log 2>&1 || { cat fixtures.log; echo "FAIL: fixtures"; exit 1; }
stages() { "$python" "$src/test/support_stages.py" "$@"; }
# marks DIR: the manifest's supported flags in stage order ("101").
marks() { "$python" -c 'import json,sys; print("".join("1" if s["supported"] else "0" for s in json.load(open(sys.argv[1] + "/manifest.json"))["stages"]))' "$1"; }
# against NAME DIR [ARGS...]: pipecut-run at M=1 and M=4 against PyTorch's outputs.
against() {
  local name=$1 dir=$2; shift 2
  expect 0 "$dir M=1 $*" -- "$run" "$dir" --inputs "fx/$name.ref.safetensors" --check "fx/$name.ref.safetensors" "$@"
  expect 0 "$dir M=4 $*" -- "$run" "$dir" -m 4 --inputs "fx/$name.mb4.ref.safetensors" --check "fx/$name.mb4.ref.safetensors" "$@"
}

# --- aoti: the map nested in the cond -------------------------------------
expect 0 "inspect nested --support aoti" -- "$pipecut" inspect fx/nested.pt2 --support aoti
contains "inspect counts" "support (aoti): 8 of 10 nodes supported"
contains "inspect per operator" "higher_order.map_impl  0 supported, 1 unsupported"
contains "inspect names the map and why" \
  "map_impl (higher_order.map_impl) in (root): AOTInductor (torch $("$python" -c 'import torch; print(torch.__version__.split("+")[0])')) cannot compile a map inside a cond"
contains "inspect names the cond and its body's node" \
  "cond (higher_order.cond) in (root): its body holds node 'map_impl' (higher_order.map_impl): AOTInductor"
"$pipecut" inspect fx/nested.pt2 --support aoti --json >inspect.json 2>&1
"$python" - <<'EOF' && ok || bad "inspect --support --json"
import json
s = json.load(open("inspect.json"))["support"]
assert s["target"] == "aoti" and s["supported_nodes"] == 8 and s["unsupported_nodes"] == 2, s
assert sorted(u["node"] for u in s["unsupported"]) == ["cond", "map_impl"], s["unsupported"]
assert all(set(u) == {"node", "op", "module", "reason"} and u["reason"] for u in s["unsupported"]), s["unsupported"]
assert s["operators"]["aten.linear.default"] == {"supported": 2, "unsupported": 0}, s["operators"]
EOF
expect 0 "split nested --support aoti" -- "$pipecut" split fx/nested.pt2 --support aoti -o nested -q
expect 0 "nested stages against their marks" -- stages nested aoti 101
grep -q '"support_target": "aoti"' nested/manifest.json && grep -q '"min_supported_nodes": 1' nested/manifest.json && ok ||
  bad "the manifest records the target"
against nested nested
against nested nested --stage-format auto
expect 0 "preview shows the runs" -- "$pipecut" split fx/nested.pt2 --support aoti --preview
contains "preview: the unsupported stage and why" \
  "unsupported: node 'cond' (higher_order.cond): its body holds node 'map_impl' (higher_order.map_impl)"
# Nothing compiled yet: auto runs every stage's .pt, and --json says so.
expect 0 "auto on a split without --support" -- "$run" nested --stage-format auto --inputs fx/nested.ref.safetensors \
  --check fx/nested.ref.safetensors --json
"$python" -c 'import json,sys; j=json.loads(sys.argv[1][sys.argv[1].index("{"):]); assert [s["format"] for s in j["stage_stats"]] == ["torchscript"] * 3, j' \
  "$LAST_LOG" && ok || bad "--json reports each stage's format"

# 2 Gloo ranks, auto, the two kinds of stage placed by kind.
pids=()
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 \
    "$run" nested --stage-format auto --supported-device cpu --fallback-device cpu -m 4 --timeout 60 \
    --inputs fx/nested.mb4.ref.safetensors --check fx/nested.mb4.ref.safetensors >"ranks.$r.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
[[ $rc -eq 0 ]] && grep -q "check: ok" ranks.0.log && ok || { bad "nested on 2 Gloo ranks, auto (exit $rc)"; tail -n 3 ranks.*.log; }
expect 0 "split nested without --support" -- "$pipecut" split fx/nested.pt2 --spec <(echo '{"split_points": {}}') -o plain -q
expect 2 "--supported-device on a split without --support" -- "$run" plain --supported-device cpu \
  --inputs fx/nested.ref.safetensors
contains "names the option" "--supported-device: the split was not cut by a target's support"
expect 2 "--fallback-device: a bad device" -- "$run" nested --fallback-device tpu:0 --inputs fx/nested.ref.safetensors
contains "names the option and the device" "--fallback-device: unknown device 'tpu:0'"

# --- dictionaries ---------------------------------------------------------
echo '{"aten.linear.default": null, "aten.gelu.default": null}' >norelu.json
expect 0 "inspect chain, relu left out" -- "$pipecut" inspect fx/chain.pt2 --support norelu.json
contains "inspect: relu refused" "relu (aten.relu.default) in (root): the dictionary does not name aten.relu.default"
expect 0 "split chain, relu left out" -- "$pipecut" split fx/chain.pt2 --support norelu.json -o chain -q
expect 0 "chain stages against their marks" -- stages chain norelu.json 101
against chain chain
grep -q '"support_target": "dictionary norelu.json"' chain/manifest.json && ok || bad "the manifest names the dictionary"
# The minimum size: the lone supported Linear after the ReLU joins it; then
# nothing stands alone; a size above the program's leaves nothing supported.
expect 0 "min 2" -- "$pipecut" split fx/chain.pt2 --support norelu.json --min-supported-nodes 2 -o chain-min2 -q
[[ $(marks chain-min2) == 10 ]] && ok || bad "min 2: marks $(marks chain-min2), wanted 10"
expect 0 "min 2 stages" -- stages chain-min2 norelu.json 10
against chain chain-min2
expect 0 "min 4" -- "$pipecut" split fx/chain.pt2 --support norelu.json --min-supported-nodes 4 -o chain-min4 -q
[[ $(marks chain-min4) == 0 ]] && ok || bad "min 4: marks $(marks chain-min4), wanted 0 (one stage)"
expect 0 "min 1000 preview" -- "$pipecut" split fx/chain.pt2 --support norelu.json --min-supported-nodes 1000 --preview
contains "min 1000: why" "fewer than --min-supported-nodes 1000"
# With a spec: its cuts and the support cuts together.
echo '{"split_points": {"a": "END"}}' >after_a.json
expect 0 "support with a spec" -- "$pipecut" split fx/chain.pt2 --support norelu.json --spec after_a.json -o chain-spec -q
[[ $(marks chain-spec) == 1101 ]] && ok || bad "support with a spec: marks $(marks chain-spec), wanted 1101"
against chain chain-spec
# With balancing: 4 stages, the support cuts among them; 2 asked for, the 3
# runs stay.
expect 0 "support with --stages 4" -- "$pipecut" split fx/chain.pt2 --support norelu.json --stages 4 --balance params \
  -o chain-bal4 -q
[[ $(marks chain-bal4) == 1101 ]] && ok || bad "--stages 4: marks $(marks chain-bal4), wanted 1101"
against chain chain-bal4
expect 0 "support with --stages 2" -- "$pipecut" split fx/chain.pt2 --support norelu.json --stages 2 --balance params \
  -o chain-bal2 -q
[[ $(marks chain-bal2) == 101 ]] && ok || bad "--stages 2: marks $(marks chain-bal2), wanted 101 (the runs)"
# A dtype rule: the target takes Linear on bfloat16 only.
echo '{"aten.linear.default": [["bfloat16"]], "aten.to.dtype": null}' >bf16.json
expect 0 "inspect mixed, a dtype rule" -- "$pipecut" inspect fx/mixed.pt2 --support bf16.json
contains "dtype reason" "linear (aten.linear.default) in a: argument 0 is float32, the target takes bfloat16"
expect 0 "split mixed, a dtype rule" -- "$pipecut" split fx/mixed.pt2 --support bf16.json -o mixed -q
expect 0 "mixed stages against their marks" -- stages mixed bf16.json 010
against mixed mixed --stage-format auto
echo '{"aten.linear.default": [["bfloat16", "float32"], null, null], "aten.to.dtype": null}' >both.json
expect 0 "a dtype list of two, null for the rest" -- "$pipecut" split fx/mixed.pt2 --support both.json -o mixed-both -q
[[ $(marks mixed-both) == 1 ]] && ok || bad "both dtypes: marks $(marks mixed-both), wanted 1"

# Values that are not tensors: in a dynamic Llama, the symbolic sizes read
# at the start feed reshapes in every layer; a dictionary without SiLU
# refuses a node between them, so that span stays one unsupported stage and
# no stage receives a symbolic size from another.
llama=$src/testdata/models/llama_dynamic.pt2
"$pipecut" inspect "$llama" --json | "$python" -c '
import json, sys
ops = json.load(sys.stdin)["operators"]
json.dump({k: None for k in ops if k != "aten.silu.default"}, open("nosilu.json", "w"))' && ok || bad "nosilu.json"
expect 0 "split llama_dynamic without SiLU" -- "$pipecut" split "$llama" --support nosilu.json -o llama -q
[[ $(marks llama) == 0101 ]] && ok || bad "llama_dynamic marks $(marks llama), wanted 0101"
"$python" - <<'EOF2' && ok || bad "no symbolic size crosses a support cut"
import json
m = json.load(open("llama/manifest.json"))
for st in m["stages"]:
    for i in st["inputs"]:
        if "stage_output" in i["source"]:
            assert i["tensor"]["dtype"][0].islower() and not i["tensor"]["dtype"].startswith("sym"), (st["index"], i)
assert "lies between nodes 'sym_size_int" in m["stages"][0]["unsupported_reason"], m["stages"][0]["unsupported_reason"]
EOF2
expect 0 "llama_dynamic stages against their marks" -- stages llama nosilu.json 0101
expect 0 "llama_dynamic M=1" -- "$run" llama --inputs "${llama%.pt2}.ref.safetensors" --check "${llama%.pt2}.ref.safetensors"
expect 0 "llama_dynamic M=4" -- "$run" llama -m 4 --inputs "${llama%.pt2}.mb4.ref.safetensors" \
  --check "${llama%.pt2}.mb4.ref.safetensors"

# --- bad dictionaries: exit 2 naming the file and the key, nothing written --
printf '{"aten.linear.default": nul' >notjson.json
echo '{"aten.linear.default": [["float33"]]}' >dtype.json
echo '{"aten.linear.default": [null, null, null, ["float32"]]}' >long.json
echo '{"aten.to.dtype": [null, ["float32"]], "aten.linear.default": null}' >notensor.json
echo '{"aten.linear.default": 3}' >shape.json
echo '["aten.linear.default"]' >list.json
for c in "notjson|notjson.json: not JSON" \
         "dtype|dtype.json: key 'aten.linear.default': argument 0: unknown dtype \"float33\"" \
         "long|long.json: key 'aten.linear.default': lists 4 arguments, but aten.linear.default takes 3 positional (input, weight, bias)" \
         "notensor|notensor.json: key 'aten.to.dtype': lists dtypes for argument 1 ('dtype'), which is not a tensor" \
         "shape|shape.json: key 'aten.linear.default': expected null (any dtypes) or a list" \
         "list|list.json: a support dictionary is a JSON object"; do
  name=${c%%|*} msg=${c#*|}
  expect 2 "bad dictionary $name" -- "$pipecut" split fx/chain.pt2 --support "$name.json" -o "bad-$name" -q
  contains "bad dictionary $name message" "$msg"
  [[ ! -e bad-$name && -z $(compgen -G "bad-$name.tmp.*") ]] && ok || bad "bad dictionary $name: something was written"
  expect 2 "inspect, bad dictionary $name" -- "$pipecut" inspect fx/chain.pt2 --support "$name.json"
done
# A FIFO nobody writes to reads as empty instead of holding the split.
rm -f fifo.json && mkfifo fifo.json
expect 2 "a dictionary that is a FIFO" -- timeout 20 "$pipecut" split fx/chain.pt2 --support fifo.json -o bad-fifo -q
contains "a FIFO: named, not JSON" "fifo.json: not JSON"
expect 2 "a dictionary that is missing" -- "$pipecut" split fx/chain.pt2 --support missing.json -o bad-missing -q
contains "missing dictionary" "missing.json"
expect 2 "inline JSON, not JSON" -- "$pipecut" inspect fx/chain.pt2 --support '{"aten.linear.default": ['
contains "inline names --support" "--support: not JSON"

# --- each built-in rule against its format --------------------------------
# torchscript: an enabled autocast region is refused, and the emitter indeed
# writes no .pt for it; what the rule takes is emitted and runs.
expect 0 "inspect autocast --support torchscript" -- "$pipecut" inspect "$src/testdata/models/autocast_bf16.pt2" \
  --support torchscript
contains "torchscript refuses enabled autocast" "(higher_order.wrap_with_autocast) in head: an enabled autocast region cannot be expressed in TorchScript"
expect 0 "split autocast --support torchscript" -- "$pipecut" split "$src/testdata/models/autocast_bf16.pt2" \
  --support torchscript -o autocast -q
contains "the refused stage has no .pt" "has no torchscript file, the format cannot express it"
"$python" - <<'EOF' && ok || bad "torchscript: supported stages have .pt files, unsupported ones do not"
import json
m = json.load(open("autocast/manifest.json"))
for s in m["stages"]:
    has_pt = any(f["format"] == "torchscript" for f in s["files"])
    assert has_pt == s["supported"], (s["index"], s["supported"], has_pt)
assert any(not s["supported"] for s in m["stages"]) and any(s["supported"] for s in m["stages"]), m["stages"]
EOF
expect 0 "split chain --support torchscript" -- "$pipecut" split fx/chain.pt2 --support torchscript -o chain-ts -q
[[ $(marks chain-ts) == 1 ]] && ok || bad "torchscript takes the chain"
against chain chain-ts --stage-format torchscript
# nativert: the nested map is refused, and NativeRT indeed cannot load it;
# the stages it takes load and run.
if nativert; then
  expect 0 "split nested --support nativert" -- "$pipecut" split fx/nested.pt2 --support nativert --inline-grad-regions \
    -o nested-nrt -q
  [[ $(marks nested-nrt) == 101 ]] && ok || bad "nativert marks $(marks nested-nrt), wanted 101"
  expect 2 "NativeRT refuses the unsupported stage" -- "$run" nested-nrt --stage-format pt2 --inputs fx/nested.ref.safetensors
  contains "NativeRT's own refusal" "nested-nrt/stage_001.pt2: NativeRT cannot load it: Unknown higher order op: map_impl"
  expect 0 "the supported stages through NativeRT (chain)" -- "$pipecut" split fx/chain.pt2 --support nativert \
    --inline-grad-regions -o chain-nrt -q
  [[ $(marks chain-nrt) == 1 ]] && ok || bad "nativert takes the chain"
  against chain chain-nrt --stage-format pt2
  # A grad region without --inline-grad-regions: refused, and NativeRT
  # indeed does not know it.
  expect 0 "split llama_dynamic --support nativert" -- "$pipecut" split "$llama" --support nativert -o llama-nrt -q
  [[ $(marks llama-nrt) == 01 ]] && ok || bad "llama_dynamic nativert marks $(marks llama-nrt), wanted 01"
  expect 0 "inspect: the grad region's reason" -- "$pipecut" inspect "$llama" --support nativert
  contains "nativert grad region reason" \
    "knows no higher-order op wrap_with_set_grad_enabled (pipecut split --inline-grad-regions inlines it)"
  expect 2 "NativeRT refuses the grad region" -- "$run" llama-nrt --stage-format pt2 --inputs "${llama%.pt2}.ref.safetensors"
  contains "NativeRT's own refusal of the grad region" "Unknown higher order op: wrap_with_set_grad_enabled"
else
  expect 0 "inspect --support nativert without NativeRT" -- "$pipecut" inspect fx/chain.pt2 --support nativert
  contains "says why" "which has no NativeRT"
  no_nativert run_support.sh
fi
# aoti: what the rule takes compiles and runs, what it refuses does not
# compile (test/run_aoti.sh, full tier).

echo "run_support: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
