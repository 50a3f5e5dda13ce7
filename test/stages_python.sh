#!/usr/bin/env bash
# Every split of the fixture zoo, loaded from Python both ways, reproduces the
# reference outputs.
set -euo pipefail
py=$1 src=$2 splits=$3
args=()
for spec in "$src"/testdata/specs/*.json; do
  name=$(basename "$spec" .json)
  model=${name%.*}
  [[ -f $splits/$name/manifest.json ]] || { echo "missing split $name (run the C++ split tests first)"; exit 1; }
  args+=("$splits/$name" "$src/testdata/models/$model.ref.safetensors")
done
"$py" "$src/scripts/check_stages.py" "${args[@]}"
# The enabled-autocast program exists only as .pt2 stages.
"$py" "$src/scripts/check_stages.py" "$splits/autocast_bf16.pt2only" \
  "$src/testdata/models/autocast_bf16.ref.safetensors" --format pt2
