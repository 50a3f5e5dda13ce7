#!/usr/bin/env bash
# The installed package (cmake/install.cmake, docs/embedding.md): `cmake
# --install` into a fresh prefix; the public headers there are self-contained
# and torch-free; libpipecut.so exports only pipecut's API and finds LibTorch
# through its RUNPATH; examples/run_split builds against the prefix alone
# (find_package(pipecut), pipecut::runtime, no torch on any command line) and
# runs: a split made by the installed `pipecut` checked against PyTorch's
# outputs, one training step whose loss is the eager reference's, and the
# refusals (no such directory, a stage file that does not match its digest).
set -uo pipefail
cmake=$1 build=$2 src=$3 out=$4 python=$5
source "$src/test/expect.sh"
fail=0 pass=0
start=$SECONDS
rm -rf "$out" && mkdir -p "$out"
prefix=$out/prefix models=$src/testdata/models train=$src/testdata/train

"$cmake" --install "$build" --prefix "$prefix" >"$out/install.log" 2>&1 ||
  { echo "FAIL: cmake --install"; cat "$out/install.log"; exit 1; }
echo "[$((SECONDS - start))s] installed into $prefix: $(find "$prefix" -type f | wc -l) files"
for f in bin/pipecut bin/pipecut-run lib/libpipecut.so include/pipecut/pipecut.h include/pipecut/support/error.h \
         lib/cmake/pipecut/pipecutConfig.cmake lib/cmake/pipecut/pipecutConfigVersion.cmake \
         lib/cmake/pipecut/pipecutTargets.cmake; do
  [[ -e $prefix/$f ]] && ok || bad "$f is not installed"
done

# Every installed header includes only the standard library (<name>, no
# directory, no .h) and other installed headers, and none names a dependency.
inc=$prefix/include/pipecut
while IFS= read -r h; do
  while IFS= read -r line; do
    if [[ $line =~ ^#include\ \"([^\"]+)\" ]]; then
      [[ -f $inc/${BASH_REMATCH[1]} ]] || bad "${h#$inc/} includes ${BASH_REMATCH[1]}, which is not installed"
    elif [[ $line =~ ^#include\ \<([^\>]+)\> ]]; then
      [[ ${BASH_REMATCH[1]} != */* && ${BASH_REMATCH[1]} != *.* ]] || bad "${h#$inc/} includes <${BASH_REMATCH[1]}>"
    fi
  done < <(grep '^#include' "$h")
done < <(find "$inc" -name '*.h')
grep -rE '^#include.*(torch|c10|absl|protobuf|simdjson|nlohmann)' "$inc" && bad "an installed header includes a dependency" || ok

# The package's targets say nothing of torch: it is libpipecut.so's private dependency.
# (The paths of this test's own directories may say torch: a build directory
# named for its torch, build-torch-2.15.0.)
grep -hv '^ *#' "$prefix"/lib/cmake/pipecut/*.cmake | sed "s|$out||g" | grep -i torch &&
  bad "the CMake package mentions torch" || ok

# Exports: pipecut's API only (lib/libpipecut.map).
lib=$(readlink -f "$prefix/lib/libpipecut.so")
nm -DC --defined-only "$lib" >"$out/exports.txt"
echo "[$((SECONDS - start))s] libpipecut.so exports $(wc -l <"$out/exports.txt") symbols"
others=$(grep -v ' pipecut::runtime::\| typeinfo for pipecut::Error$\| typeinfo name for pipecut::Error$' "$out/exports.txt")
[[ -z $others ]] && ok || bad "libpipecut.so exports more than the API: $(echo "$others" | head -5)"
grep -q ' pipecut::runtime::runInference(' "$out/exports.txt" && grep -q ' pipecut::runtime::openSplit(' "$out/exports.txt" &&
  ok || bad "runInference or openSplit is not exported"
runpath=$(readelf -d "$lib" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[[ -n $runpath && -e ${runpath%%:*}/libtorch_cpu.so ]] && ok || bad "libpipecut.so's RUNPATH ($runpath) does not lead to libtorch_cpu.so"
echo "libpipecut.so RUNPATH: $runpath"

# The consumer: configured and built against the prefix only.
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
if ! "$cmake" -S "$src/examples/run_split" -B "$out/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
     -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >"$out/configure.log" 2>&1 ||
   ! "$cmake" --build "$out/build" >"$out/build.log" 2>&1; then
  echo "FAIL: examples/run_split does not build against $prefix"; cat "$out/configure.log" "$out/build.log" | tail -30; exit 1
fi
echo "[$((SECONDS - start))s] built examples/run_split against the installed package"
sed "s|$out||g; s|$src||g" "$out/build/build.ninja" | grep -i torch && bad "the consumer's build mentions torch" || ok
example=$out/build/run_split

# A split made by the installed compiler, run and checked by the example:
# 2 stages, 4 micro-batches, against PyTorch's outputs.
"$prefix/bin/pipecut" split "$models/llama_tiny.pt2" --spec "$src/testdata/specs/llama_tiny.2.json" -o "$out/llama2" -q \
  >"$out/split.log" 2>&1 || { echo "FAIL: the installed pipecut cannot split"; cat "$out/split.log"; exit 1; }
expect 0 "inference checked" -- env -u LD_LIBRARY_PATH "$example" "$out/llama2" -m 4 \
  --inputs "$models/llama_tiny.mb4.ref.safetensors" --check "$models/llama_tiny.mb4.ref.safetensors"
echo "$LAST_LOG"
contains "split opened" "split $out/llama2: 2 stages, manifest sha256 "
contains "files verified" "4 files verified (xxh3_128"
contains "report" "inference: 2 stages, 4 micro-batches, "
contains "stage timings" "  stage 1 on cpu: busy "
contains "check" "check: ok, max abs error "

# One training step (4 micro-batches, SGD): its loss is the first of the
# eager reference's (a step's loss is its forward, before the update).
"$prefix/bin/pipecut" split "$train/llama_loss.pt2" --spec "$train/llama_loss.2.json" --format torchscript \
  -o "$out/loss2" -q >"$out/split_loss.log" 2>&1 || { echo "FAIL: cannot split llama_loss"; cat "$out/split_loss.log"; }
expect 0 "training step" -- env -u LD_LIBRARY_PATH "$example" "$out/loss2" --train "$train/llama_loss.data.safetensors" \
  --steps 1 -m 4
echo "$LAST_LOG" | grep -v '^  stage [0-9]*:'
loss=$(sed -n 's/^  step 1: loss //p' <<<"$LAST_LOG")
"$python" - "$train/llama_loss.sgd.ref.safetensors" "${loss:-nan}" <<'PY' && ok || bad "the training step's loss is not the reference's"
import json, math, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
start, _ = json.loads(b[8:8 + n])["losses"]["data_offsets"]
ref = struct.unpack("<d", b[8 + n + start:8 + n + start + 8])[0]
got = float(sys.argv[2])
print(f"step 1 loss {got}, eager reference {ref}")
sys.exit(0 if math.isclose(got, ref, rel_tol=1e-5) else 1)
PY

# Generation: greedy tokens of the KV-cache Llama cut in 2, as the CPU
# reference (testdata/generate, made by transformers' generate).
echo '{"split_points": {"model.model.layers.2": "BEGINNING"}}' >"$out/gen.json"
"$prefix/bin/pipecut" split "$src/testdata/generate/llama_kv.pt2" --spec "$out/gen.json" -o "$out/gen2" -q \
  >"$out/split_gen.log" 2>&1 || { echo "FAIL: cannot split llama_kv"; cat "$out/split_gen.log"; }
expect 0 "generation" -- env -u LD_LIBRARY_PATH "$example" "$out/gen2" --generate "$src/testdata/generate/prompts.jsonl" \
  --max-new-tokens 12 --check-tokens "$src/testdata/generate/llama_kv.greedy.jsonl"
echo "$LAST_LOG" | grep -v '^  stage [0-9]*:'
contains "generation report" "generate: 2 stages, "
contains "tokens as the reference" "check tokens: ok"

# Refusals: exit 2, naming what is at fault.
expect 2 "no such directory" -- "$example" "$out/no_such_split"
contains "names the path" "run_split: error: $out/no_such_split: is not a split directory"
cp -r "$out/llama2" "$out/tampered"
printf 'x' >>"$out/tampered/stage_001.pt"
expect 2 "tampered stage file" -- "$example" "$out/tampered"
contains "names the file" "stage_001.pt"
expect 1 "usage" -- "$example"

echo "install_consumer: $pass checks passed, $fail failed in $((SECONDS - start)) s"
[[ $fail -eq 0 ]]
