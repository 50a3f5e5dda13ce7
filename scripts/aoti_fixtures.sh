#!/usr/bin/env bash
# Every fixture of testdata/models with a split spec, compiled by `pipecut
# compile` and run with `pipecut-run --stage-format aoti` (M=1 and M=4)
# against PyTorch's references (--check, float32 tolerance by dtype): one line
# per fixture, and AOTInductor's reason for any it refuses. Minutes per
# fixture on 2 cores (each stage compiles for 20-40 s); not part of ctest
# (test/run_aoti.sh is, on one fixture).
#
#   bash scripts/aoti_fixtures.sh [OUT] [--device cpu|cuda] [--cpu-matmul auto|onednn|blas]
#   (default OUT: build/aoti-fixtures; --cpu-matmul is pipecut compile's, for CPU packages)
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/build/aoti-fixtures} device=cpu matmul=()
shift $(($# ? 1 : 0))
while (($#)); do
  case $1 in
    --device) device=$2; shift 2 ;;
    --cpu-matmul) matmul=(--cpu-matmul "$2"); shift 2 ;;
    *) echo "aoti_fixtures.sh: unknown argument $1" >&2; exit 1 ;;
  esac
done
pipecut=${PIPECUT:-$root/build/tools/pipecut} run=${PIPECUT_RUN:-$root/build/tools/pipecut-run}
models=$root/testdata/models
export PIPECUT_CACHE_DIR=${PIPECUT_CACHE_DIR:-$out/cache}
mkdir -p "$out"
ok=0 bad=0
declare -A seen=()
for spec in "$root"/testdata/specs/*.json; do
  name=$(basename "$spec" .json) model=${name%.*}
  # The split with the most stages of each fixture.
  [[ -n ${seen[$model]:-} ]] && continue
  seen[$model]=1
  [[ -f $root/testdata/specs/$model.4.json ]] && spec=$root/testdata/specs/$model.4.json name=$model.4
  dir=$out/$name
  rm -rf "$dir"
  start=$SECONDS
  if ! msg=$("$pipecut" split "$models/$model.pt2" --spec "$spec" -o "$dir" -q 2>&1); then
    echo "$name: split failed: $msg"; bad=$((bad+1)); continue
  fi
  if ! msg=$("$pipecut" compile "$dir" --device "$device" "${matmul[@]}" -q 2>&1); then
    echo "$name: REFUSED by pipecut compile: ${msg#pipecut: error: }"; bad=$((bad+1)); continue
  fi
  result=ok
  for m in 1 4; do
    ref=$models/$model.ref.safetensors && [[ $m == 4 ]] && ref=$models/$model.mb4.ref.safetensors
    if ! msg=$("$run" "$dir" --stage-format aoti --devices "$device" -m $m --inputs "$ref" --check "$ref" -q 2>&1); then
      result="M=$m FAILED: ${msg#pipecut-run: error: }"
      break
    fi
  done
  stages=$(grep -c '"format": "aoti"' "$dir/manifest.json")
  if [[ $result == ok ]]; then
    echo "$name: ok ($stages packages, M=1 and M=4 within tolerance of PyTorch, $((SECONDS - start)) s)"; ok=$((ok+1))
  else
    echo "$name: $result"; bad=$((bad+1))
  fi
done
echo "aoti_fixtures ($device): $ok ok, $bad not"
[[ $bad -eq 0 ]]
