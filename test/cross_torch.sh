#!/usr/bin/env bash
# Exports across torch versions, both ways: programs exported by one torch
# (a transformers Llama, a cond, a dynamic batch: scripts/fixtures/generate.py
# run with that torch's Python) are split and run by pipecut built against
# the other, within tolerance of the exporting torch's own outputs; and the
# stage files that build writes load and chain in the exporting torch's
# Python (torch.jit.load, torch.export.load: scripts/check_stages.py). Run by
# scripts/test.sh --full once both builds exist (the default torch and the
# newest, cmake/torch_versions.cmake).
#
#   cross_torch.sh SRC OUT BUILD_A PYTHON_A BUILD_B PYTHON_B
set -uo pipefail
src=$1 out=$2
builds=("$3" "$5") pythons=("$4" "$6")
source "$src/test/expect.sh"
fail=0 pass=0
rm -rf "$out" && mkdir -p "$out" || exit 1
specs=(llama_tiny.4 control_flow.4 dynamic_batch.4)
version() { "$1" -c 'import torch; print(torch.__version__)'; }
for x in 0 1; do
  y=$((1 - x))
  exporter=$(version "${pythons[$x]}")
  pipecut=${builds[$y]}/tools/pipecut run=${builds[$y]}/tools/pipecut-run
  reader=$("$pipecut" --version)
  linked=$(sed 's/.*LibTorch \([0-9.]*\).*/\1/' <<<"$reader")
  fx=$out/exported-by-${exporter%%+*}
  if [[ ! -d $fx ]]; then
    expect 0 "torch $exporter exports the fixtures" -- "${pythons[$x]}" "$src/scripts/fixtures/generate.py" --out "$fx" \
      --only llama_tiny control_flow dynamic_batch
  fi
  for name in "${specs[@]}"; do
    model=${name%.*} dir=$out/$name.exported-by-${exporter%%+*}.split-by-$linked
    expect 0 "$reader inspects $model from torch $exporter" -- "$pipecut" inspect "$fx/$model.pt2"
    contains "$model: the exporter's torch named" "torch $exporter"
    expect 0 "$reader splits $model from torch $exporter" -- "$pipecut" split "$fx/$model.pt2" \
      --spec "$src/testdata/specs/$name.json" -o "$dir" -q
    expect 0 "$reader runs $model from torch $exporter" -- "$run" "$dir" --inputs "$fx/$model.ref.safetensors" \
      --check "$fx/$model.ref.safetensors" -q
    contains "$model: the exporter's outputs" "check: ok"
    expect 0 "torch $exporter loads $reader's stages of $model" -- "${pythons[$x]}" "$src/scripts/check_stages.py" \
      "$dir" - "$fx/$model.ref.safetensors" --format both
  done
done
echo "cross_torch: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
