#!/usr/bin/env bash
# The README's demo command: set up, build, and run pipecut's main job on the
# bundled tiny Llama (transformers' LlamaForCausalLM, exported with its
# @torch.no_grad() rotary embedding): inspect it, cut it into 4 stages, verify
# the output, and run the stages as a pipeline of 4 micro-batches against
# PyTorch's reference outputs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
source "$root/scripts/torch_env.sh"
pipecut_torch_env
"$root/scripts/build.sh" --target pipecut pipecut-run >/dev/null
build=$PIPECUT_BUILD
pipecut=$build/tools/pipecut run=$build/tools/pipecut-run
models=$root/testdata/models
out=${PIPECUT_DEMO_OUT:-$build/demo}
mkdir -p "$out"
spec=$out/llama_4_stages.json
cat >"$spec" <<'JSON'
{"stages": [["model.embed_tokens", "model.layers.0"], ["model.layers.1"], ["model.layers.2"],
            ["model.layers.3", "model.norm", "lm_head"]]}
JSON

echo "== pipecut inspect llama_tiny.pt2"
"$pipecut" inspect "$models/llama_tiny.pt2" | sed -n '1,8p;/higher-order/,/model.layers.0 /p'
echo
echo "== pipecut split --preview (torchtitan-style stage lists)"
"$pipecut" split "$models/llama_tiny.pt2" --spec "$spec" --preview
echo
echo "== pipecut split -> $out/llama_4"
"$pipecut" split "$models/llama_tiny.pt2" --spec "$spec" -o "$out/llama_4"
ls -l "$out/llama_4"
"$pipecut" verify "$out/llama_4"
echo
echo "== pipecut-run: 4 stages, 4 micro-batches, checked against PyTorch's outputs"
"$run" "$out/llama_4" -m 4 --inputs "$models/llama_tiny.mb4.ref.safetensors" \
  --check "$models/llama_tiny.mb4.ref.safetensors" --warmup 1 --iterations 10 --trace "$out/llama_4.trace.json"
echo "(Chrome trace for Perfetto: $out/llama_4.trace.json)"
