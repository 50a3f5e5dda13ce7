#!/usr/bin/env bash
# The README's demo command: set up, build, and run pipecut's main job on the
# bundled tiny Llama (exported from transformers' LlamaForCausalLM).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$("$root/scripts/setup.sh")
build=${PIPECUT_BUILD_DIR:-$root/build}
mkdir -p "$build"
# torch's CMake config is chatty (CUDA arch and kineto warnings); show it only on failure.
cmake -S "$root" -B "$build" -G Ninja -DPIPECUT_PYTHON="$venv/bin/python" >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j2 --target pipecut
pipecut="$build/tools/pipecut"
model="$root/testdata/models/llama_tiny.pt2"
out=${PIPECUT_DEMO_OUT:-$build/demo}
mkdir -p "$out"

echo "== pipecut inspect $model"
"$pipecut" inspect "$model" | sed -n '1,12p;/higher-order/,/modules/p'
echo "== pipecut normalize (module-contiguous) -> $out/llama_tiny.norm.pt2"
"$pipecut" normalize "$model" -o "$out/llama_tiny.norm.pt2" --module-contiguous
echo "== torch.export.load of the rewritten program against the reference outputs"
"$venv/bin/python" "$root/scripts/check_pt2.py" "$out/llama_tiny.norm.pt2" \
  "$root/testdata/models/llama_tiny.ref.safetensors" 2>/dev/null
