#!/usr/bin/env bash
# Every program pipecut wrote (plain rewrite, normalized, module-contiguous)
# loads with torch.export.load, gives bit for bit what the original fixture
# gives when run here, and is within tolerance of the committed reference
# (computed by PyTorch, perhaps on a CPU that rounds differently).
set -euo pipefail
pipecut=$1 py=$2 src=$3 out=$4
models=$src/testdata/models
args=()
for dir in rewrite normalized normalized_mc; do
  for f in "$out/$dir"/*.pt2; do
    name=$(basename "$f" .pt2)
    # The shuffled fixture does not load (below); its program is nograd_seed's.
    twin=$models/${name%_shuffled}.pt2
    args+=("$f" "$twin" "$models/$name.ref.safetensors")
  done
done
[[ ${#args[@]} -ge 87 ]] || { echo "expected the C++ tests to have written the fixtures, found ${#args[@]}/3 files"; exit 1; }
"$py" "$src/scripts/check_pt2.py" --twins "${args[@]}"

# The shuffled fixture itself must not load: otherwise normalizing it proves nothing.
set +e
"$py" "$src/scripts/check_pt2.py" "$models/nograd_seed_shuffled.pt2" \
  "$models/nograd_seed_shuffled.ref.safetensors" >/dev/null 2>&1
rc=$?
set -e
[[ $rc -eq 2 ]] || { echo "nograd_seed_shuffled.pt2 unexpectedly loaded (rc=$rc)"; exit 1; }
echo "torch_roundtrip: $(( ${#args[@]} / 3 )) programs match the originals bitwise and their references; shuffled original refused"
