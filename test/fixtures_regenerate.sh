#!/usr/bin/env bash
# CI proof that the fixture generator still runs with the pinned torch, and that
# what it makes checks out against its own references.
set -euo pipefail
py=$1 src=$2 out=$3
rm -rf "$out"
"$py" "$src/scripts/fixtures/generate.py" --out "$out"
args=()
for f in "$out"/*.pt2; do
  name=$(basename "$f" .pt2)
  [[ $name == *shuffled* ]] && continue
  args+=("$f" "$out/$name.ref.safetensors")
done
# Generated here, checked here: bit for bit.
"$py" "$src/scripts/check_pt2.py" --exact "${args[@]}"
# The generation fixtures: the exported decode programs looped in PyTorch give
# transformers' generate's greedy tokens (checked by the script), and the
# tokens the committed files hold.
"$py" "$src/scripts/fixtures/generation.py" --out "$out/generate"
for f in "$src"/testdata/generate/*.greedy.jsonl; do
  cmp "$f" "$out/generate/$(basename "$f")" || { echo "$(basename "$f"): regenerated tokens differ from the committed ones"; exit 1; }
done
