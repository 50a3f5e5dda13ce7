#!/usr/bin/env bash
# The torch <= 2.7 layout (a plain zip with serialized_exported_program.json at
# its root) is refused with a message that names the layout.
set -uo pipefail
pipecut=$1 out=$2
mkdir -p "$out"
python3 - "$out/legacy.pt2" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("serialized_exported_program.json", "{}")
    z.writestr("serialized_state_dict.pt", b"")
    z.writestr("version", "8.7")
PY
msg=$("$pipecut" inspect "$out/legacy.pt2" 2>&1); rc=$?
echo "$msg"
[[ $rc -eq 2 ]] || { echo "expected exit 2, got $rc"; exit 1; }
[[ $msg == *"legacy.pt2: zip archive without a top folder: this is the torch <= 2.7 layout"* ]] || { echo "wrong message"; exit 1; }
