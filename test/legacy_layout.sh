#!/usr/bin/env bash
# Older .pt2 layouts (torch <= 2.7: a root-level zip of pickles; torch 2.8:
# pickled weights in the PT2 archive) are read by converting them in memory
# (pt2/legacy_layout.h). Their fixtures split and run in the spec-driven tests;
# here: what is broken in such a file is refused with exit 2, naming the file
# and the record.
set -uo pipefail
pipecut=$1 py=$2 src=$3 out=$4
mkdir -p "$out"
fail=0 pass=0
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"
"$py" - "$out" "$src/testdata/models/gpt2_tied_torch27.pt2" <<'PY'
import io, sys, zipfile
import torch
out, legacy = sys.argv[1:3]
def saved(obj):
    b = io.BytesIO(); torch.save(obj, b); return b.getvalue()
def root_zip(name, records):
    with zipfile.ZipFile(f"{out}/{name}.pt2", "w") as z:
        for k, v in records.items():
            z.writestr(k, v)
program = '{"graph_module": {"graph": {"inputs": [], "outputs": [], "nodes": []}, "signature": {"input_specs": [], "output_specs": []}, "module_call_graph": []}, "schema_version": {"major": 8, "minor": 7}}'
root_zip("garbage_pickle", {"serialized_exported_program.json": program, "serialized_state_dict.pt": b"not a pickle", "version": "8.7"})
root_zip("not_tensors", {"serialized_exported_program.json": program, "serialized_state_dict.pt": saved({"w": 1}), "version": "8.7"})
root_zip("not_a_program", {"README": "hello"})
root_zip("bad_json", {"serialized_exported_program.json": "{", "version": "8.7"})
# A well-formed program whose parameter the state dict lacks.
lacking = program.replace('"input_specs": []', '"input_specs": [{"parameter": {"arg": {"name": "w"}, "parameter_name": "fc.weight"}}]').replace('"inputs": []', '"inputs": [{"as_tensor": {"name": "w"}}]')
root_zip("lacking", {"serialized_exported_program.json": lacking, "serialized_state_dict.pt": saved({}), "version": "8.7"})
# A corrupt memo index (LONG_BINPUT 2^31 - 1) would have LibTorch's unpickler
# grow its memo to 32 GB: refused before it runs.
saved = saved({})
with zipfile.ZipFile(io.BytesIO(saved)) as z, zipfile.ZipFile(f"{out}/huge_memo.pt", "w") as w:
    for n in z.namelist():
        w.writestr(n, b"\x80\x02}r\xff\xff\xff\x7f." if n.endswith("data.pkl") else z.read(n))
root_zip("huge_memo", {"serialized_exported_program.json": program,
                       "serialized_state_dict.pt": open(f"{out}/huge_memo.pt", "rb").read(), "version": "8.7"})
# Python's zipfile may also deflate: the same program, compressed.
with zipfile.ZipFile(legacy) as src, zipfile.ZipFile(f"{out}/deflated.pt2", "w", zipfile.ZIP_DEFLATED) as dst:
    for name in src.namelist():
        dst.writestr(name, src.read(name))
PY
expect 2 "unreadable pickle" -- "$pipecut" inspect "$out/garbage_pickle.pt2"
contains "unreadable pickle message" "garbage_pickle.pt2: serialized_state_dict.pt: unreadable torch.save pickle"
expect 2 "huge memo index" -- "$pipecut" inspect "$out/huge_memo.pt2"
contains "huge memo message" "huge_memo.pt2: serialized_state_dict.pt: unreadable torch.save pickle: memo index 2147483647 at byte 3 exceeds the 2 opcodes before it"
expect 2 "not tensors" -- "$pipecut" inspect "$out/not_tensors.pt2"
contains "not tensors message" "not_tensors.pt2: serialized_state_dict.pt: 'w' is Int; pipecut reads only tensors from older layouts"
expect 2 "not a program" -- "$pipecut" inspect "$out/not_a_program.pt2"
contains "not a program message" "not_a_program.pt2: a zip without a top folder and without serialized_exported_program.json: not a torch.export .pt2 archive"
expect 2 "bad program json" -- "$pipecut" inspect "$out/bad_json.pt2"
contains "bad program json message" "bad_json.pt2: serialized_exported_program.json: invalid JSON"
expect 2 "lacking parameter" -- "$pipecut" inspect "$out/lacking.pt2"
contains "lacking parameter message" "lacking.pt2: serialized_exported_program.json: graph_module.signature: parameter 'fc.weight' has no entry in the weights payload config"
# The deflated copy reads as the stored one does: same stage files, byte for byte.
spec=$src/testdata/specs/gpt2_tied_torch27.2.json
rm -rf "$out/stored" "$out/deflated"
expect 0 "stored split" -- "$pipecut" split "$src/testdata/models/gpt2_tied_torch27.pt2" --spec "$spec" -o "$out/stored" -q
expect 0 "deflated split" -- "$pipecut" split "$out/deflated.pt2" --spec "$spec" -o "$out/deflated" -q
for f in stage_000.pt stage_000.pt2 stage_001.pt stage_001.pt2; do
  if cmp -s "$out/stored/$f" "$out/deflated/$f"; then pass=$((pass+1)); else echo "FAIL: $f differs"; fail=$((fail+1)); fi
done
echo "legacy_layout: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
