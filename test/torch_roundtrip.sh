#!/usr/bin/env bash
# Every program pipecut wrote (plain rewrite, normalized, module-contiguous)
# must load with torch.export.load and reproduce the reference outputs exactly.
set -euo pipefail
pipecut=$1 py=$2 src=$3 out=$4
args=()
for dir in rewrite normalized normalized_mc; do
  for f in "$out/$dir"/*.pt2; do
    name=$(basename "$f" .pt2)
    args+=("$f" "$src/testdata/models/$name.ref.safetensors")
  done
done
[[ ${#args[@]} -ge 58 ]] || { echo "expected the C++ tests to have written the fixtures, found ${#args[@]}/2 files"; exit 1; }
"$py" "$src/scripts/check_pt2.py" "${args[@]}"

# The shuffled fixture itself must not load: otherwise normalizing it proves nothing.
set +e
"$py" "$src/scripts/check_pt2.py" "$src/testdata/models/nograd_seed_shuffled.pt2" \
  "$src/testdata/models/nograd_seed_shuffled.ref.safetensors" >/dev/null 2>&1
rc=$?
set -e
[[ $rc -eq 2 ]] || { echo "nograd_seed_shuffled.pt2 unexpectedly loaded (rc=$rc)"; exit 1; }
echo "torch_roundtrip: $(( ${#args[@]} / 2 )) programs match their references; shuffled original refused"
