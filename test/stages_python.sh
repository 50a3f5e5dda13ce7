#!/usr/bin/env bash
# Every split of the fixture zoo, loaded from Python both ways (torch.jit.load,
# torch.export.load), is bitwise equal to the unsplit program chained the same
# way here, and within tolerance of the committed reference.
set -euo pipefail
py=$1 src=$2 splits=$3
args=()
for spec in "$src"/testdata/specs/*.json; do
  name=$(basename "$spec" .json)
  model=${name%.*}
  for d in "$splits/$name" "$splits/$model.whole"; do
    [[ -f $d/manifest.json ]] || { echo "missing split $d (run the C++ split tests first)"; exit 1; }
  done
  args+=("$splits/$name" "$splits/$model.whole" "$src/testdata/models/$model.ref.safetensors")
done
"$py" "$src/scripts/check_stages.py" "${args[@]}"
# The enabled-autocast program exists only as .pt2 stages.
"$py" "$src/scripts/check_stages.py" "$splits/autocast_bf16.pt2only" "$splits/autocast_bf16.whole.pt2only" \
  "$src/testdata/models/autocast_bf16.ref.safetensors" --format pt2
# .pt2 stages with their no_grad regions inlined (split --inline-grad-regions) load and chain too.
"$py" "$src/scripts/check_stages.py" "$splits/llama_tiny.4.inlined" "$splits/llama_tiny.whole" \
  "$src/testdata/models/llama_tiny.ref.safetensors" --format pt2
# A map unrolled for NativeRT (split --inline-grad-regions) is still a program torch loads and runs.
"$py" "$src/scripts/check_stages.py" "$splits/control_flow.4.inlined" "$splits/control_flow.whole" \
  "$src/testdata/models/control_flow.ref.safetensors" --format pt2
