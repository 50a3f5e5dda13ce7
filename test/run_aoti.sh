#!/usr/bin/env bash
# pipecut compile and pipecut-run --stage-format aoti on the llama_dynamic
# fixture (2 stages; its batch and sequence sizes symbolic): the packages
# compile once (a second compile keeps them, a fresh split of the same model
# takes them from the cache, needing no Python), verify lists them, and the
# pipeline of packages gives the unsplit TorchScript program's outputs within
# float32 tolerance at M=1 and M=4 (sizes it was not exported at), in one
# process and on 2 Gloo ranks; and llama_kv_chunk's packages generate the
# reference tokens (--generate, KV caches passed in as state); control_flow's
# map stage compiles from an unrolled copy, other maps as loops, and a nested
# map is refused before Inductor sees it; a cut after a transpose (strided
# stage inputs) compiles for the contiguous inputs it is given; a weightless
# split's packages take the checkpoint's weights at load. A package's
# library is copied under TMPDIR and unlinked once loaded: nothing stays there,
# even after SIGKILL, or when TMPDIR has no room for it. Refusals exit 2 (6
# for a GPU this machine lacks, or a TMPDIR without room) naming the stage
# or the interpreter, and leave the directory as it was.
#
#   run_aoti.sh PIPECUT PIPECUT_RUN PYTHON SRC OUT PORT MANIFEST_SYNC   (ports PORT+1 .. PORT+3)
set -uo pipefail
pipecut=$1 run=$2 py=$3 src=$4 out=$5 port=$6 sync=$7
models=$src/testdata/models
fail=0 pass=0
source "$(dirname "$0")/expect.sh"
rm -rf "$out" && mkdir -p "$out" && cd "$out" || exit 1
export PIPECUT_CACHE_DIR=$out/cache  # never the user's cache
mb1=$models/llama_dynamic.ref.safetensors mb4=$models/llama_dynamic.mb4.ref.safetensors
echo '{"split_points": {"model.layers.1": "BEGINNING"}}' > two.json
echo '{"split_points": {}}' > whole.json
expect 0 "split" -- "$pipecut" split "$models/llama_dynamic.pt2" --spec two.json -o split -q
expect 0 "split whole" -- "$pipecut" split "$models/llama_dynamic.pt2" --spec whole.json -o whole -q

# --- Refusals before anything compiles -----------------------------------------
expect 2 "run before compile" -- "$run" split --stage-format aoti --inputs "$mb1" -q
contains "run before compile message" "stage 0: has no AOTInductor package for cpu; run pipecut compile DIR --device cpu"
expect 2 "no such python" -- "$pipecut" compile split --python "$out/no-python" -q
contains "no such python message" "no-python: --python: cannot run it: No such file or directory"
printf '#!/bin/sh\necho "{\\"torch\\": \\"2.9.1+cpu\\", \\"cuda\\": false}"\n' > old-python && chmod +x old-python
expect 2 "another torch" -- "$pipecut" compile split --python "$out/old-python" -q
contains "another torch message" "has torch 2.9.1+cpu, pipecut links LibTorch"
printf '#!/bin/sh\necho "error: ModuleNotFoundError: No module named '"'"'torch'"'"'"; exit 1\n' > bare-python && chmod +x bare-python
expect 2 "no torch" -- "$pipecut" compile split --python "$out/bare-python" -q
contains "no torch message" "is not a Python with torch (ModuleNotFoundError: No module named 'torch')"
expect 2 "not a split" -- "$pipecut" compile "$models" -q
contains "not a split message" "manifest.pb: is missing"
cp -r split litter && touch litter/notes.txt
expect 2 "unlisted file" -- "$pipecut" compile litter --python "$py" -q
contains "unlisted file message" "litter: holds 1 entry its manifest does not list: 'notes.txt'; pipecut compile rewrites"
[[ -f litter/notes.txt && ! -e litter/stage_000.aoti-cpu.pt2 ]] && ok || bad "unlisted file: directory untouched"
expect 2 "cache inside the split" -- "$pipecut" compile split --cache split/cache --python "$py" -q
# The options pipecut sends its compile script (a Python that records each
# request and refuses it): weights left in the .pt2 by default; "freezing"
# (prepacked weights no .pt2 holds) keeps them in the package unless the
# user says otherwise.
torch_version=$("$py" -c 'import torch; print(torch.__version__)')
cat > recording-python <<EOF
#!/bin/sh
case "\$2" in
  *'"probe"'*) echo '{"torch": "$torch_version", "cuda": false}' ;;
  *) printf '%s\n' "\$2" >> "$out/requests.jsonl"; echo "error: RuntimeError: recorded"; exit 1 ;;
esac
EOF
chmod +x recording-python
for config in '{}' '{"freezing": true}' '{"freezing": true, "aot_inductor.package_constants_in_so": false}' \
  '{"aot_inductor.use_runtime_constant_folding": true}'; do
  expect 2 "recorded compile $config" -- "$pipecut" compile split --python "$out/recording-python" --no-cache -j 1 \
    --inductor-config "$config" -q
done
contains "recorded compile message" "stage 0: AOTInductor cannot compile it for cpu: RuntimeError: recorded"
[[ ! -e split/stage_000.aoti-cpu.pt2 && -z $(compgen -G 'split.tmp.*') ]] && ok || bad "recorded compile: nothing written"
expect 2 "recorded compile, blas" -- "$pipecut" compile split --python "$out/recording-python" --no-cache -j 1 \
  --cpu-matmul blas -q
expect 1 "--cpu-matmul for cuda" -- "$pipecut" compile split --device cuda --cpu-matmul blas --python "$py" -q
contains "--cpu-matmul for cuda message" "--cpu-matmul: chooses the kernels of CPU packages (--device cpu)"
expect 1 "--cpu-matmul value" -- "$pipecut" compile split --cpu-matmul mkl --python "$py" -q
contains "--cpu-matmul value message" "--cpu-matmul: mkl not in {auto,onednn,blas}"
expect 2 "recorded compile, onednn" -- "$pipecut" compile split --python "$out/recording-python" --no-cache -j 1 \
  --cpu-matmul onednn -q
"$py" - requests.jsonl "$auto_matmul" <<'EOF' && ok || bad "compile options sent to the script"
import json, sys
options = [json.loads(line)["options"] for line in open(sys.argv[1])]
auto = {"pipecut.cpu_matmul": sys.argv[2]}  # settled by this CPU
# MKL's route transposes the linear weights, unless freezing packs them.
transposed = {"pipecut.transpose_weights": True}
auto_t = {**auto, **transposed} if sys.argv[2] == "blas" else auto
assert options == [
    {"aot_inductor.package_constants_in_so": False, "cpp.dynamic_threads": True, **auto_t},
    {"cpp.dynamic_threads": True, "freezing": True, **auto},
    {"aot_inductor.package_constants_in_so": False, "cpp.dynamic_threads": True, "freezing": True, **auto},
    {"aot_inductor.use_runtime_constant_folding": True, "cpp.dynamic_threads": True, **auto_t},
    {"aot_inductor.package_constants_in_so": False, "cpp.dynamic_threads": True, "pipecut.cpu_matmul": "blas",
     **transposed},
    {"aot_inductor.package_constants_in_so": False, "cpp.dynamic_threads": True, "pipecut.cpu_matmul": "onednn"},
], options
EOF
if ! "$py" -c 'import torch, sys; sys.exit(torch.cuda.is_available())'; then
  expect 6 "cuda without a GPU" -- "$pipecut" compile split --device cuda --python "$py" -q
  contains "cuda without a GPU message" "(--device cuda): its torch sees no CUDA device"
fi

# --- Compile: two stages at once, then kept, then from the cache --------------
expect 0 "compile" -- "$pipecut" compile split --python "$py" -j 2 --json
"$py" - "$LAST_LOG" split/manifest.json "$auto_matmul" <<'EOF' && ok || bad "compile --json and manifest"
import json, sys
r = json.loads(sys.argv[1])
assert [s["how"] for s in r["stages"]] == ["compiled", "compiled"], r
assert all(s["compile_seconds"] > 0 and s["bytes"] > 0 for s in r["stages"]), r
m = json.load(open(sys.argv[2]))
for i, st in enumerate(m["stages"]):
    (pkg,) = [f for f in st["files"] if f["format"] == "aoti"]
    c = pkg["compiled"]
    assert pkg["path"] == f"stage_{i:03d}.aoti-cpu.pt2", pkg
    assert c["device"] == "cpu" and c["torch_version"].startswith("2.") and c["options"] == '{"aot_inductor.package_constants_in_so":false,"cpp.dynamic_threads":true,"pipecut.cpu_matmul":"%s"%s}' % (
        sys.argv[3], ',"pipecut.transpose_weights":true' if sys.argv[3] == "blas" else ""), c
    assert c["source"] == f"stage_{i:03d}.pt2" and len(c["key"]) == 64 and len(pkg["xxh3_128"]) == 32, c
    assert c["key"] == r["stages"][i]["key"]
EOF
expect 0 "verify" -- "$pipecut" verify split
contains "verify counts the packages" "ok: 6 stage files match"
cp split/manifest.pb compiled.pb
# Unchanged: kept, no Python needed, the manifest byte for byte the same.
expect 0 "compile again" -- "$pipecut" compile split --python "$out/no-python"
contains "kept" "stage 1: stage_001.aoti-cpu.pt2 kept (unchanged)"
cmp -s split/manifest.pb compiled.pb && ok || bad "compile again: manifest unchanged"
# A fresh split of the same model: from the cache, the same bytes.
expect 0 "split again" -- "$pipecut" split "$models/llama_dynamic.pt2" --spec two.json -o again -q
expect 0 "compile from the cache" -- "$pipecut" compile again --python "$py" --json
"$py" -c 'import json, sys; r = json.loads(sys.argv[1]); assert [s["how"] for s in r["stages"]] == ["cached"] * 2, r' \
  "$LAST_LOG" && ok || bad "from the cache"
cmp -s again/stage_001.aoti-cpu.pt2 split/stage_001.aoti-cpu.pt2 && ok || bad "cached package bytes"
cmp -s again/manifest.pb compiled.pb && ok || bad "cached: the same manifest"
expect 0 "compile whole" -- "$pipecut" compile whole --python "$py" -q

# --- Run: the packages against the unsplit TorchScript program ----------------
expect 0 "torchscript whole M=1" -- "$run" whole --inputs "$mb1" --output ts.mb1.safetensors -q
expect 0 "torchscript whole M=4" -- "$run" whole -m 4 --inputs "$mb4" --output ts.mb4.safetensors -q
for m in 1 4; do
  inputs=$mb1 && [[ $m == 4 ]] && inputs=$mb4
  expect 0 "aoti split M=$m" -- "$run" split --stage-format aoti -m $m --inputs "$inputs" --check ts.mb$m.safetensors \
    --atol 1e-5 --rtol 1.3e-6 --json
  contains "aoti split M=$m checked" '"ok": true'
  expect 0 "aoti whole M=$m" -- "$run" whole --stage-format aoti -m $m --inputs "$inputs" --check ts.mb$m.safetensors \
    --atol 1e-5 --rtol 1.3e-6 -q
done
# The pipeline of packages gives what the unsplit package gives, bit for bit.
expect 0 "aoti whole output" -- "$run" whole --stage-format aoti -m 4 --inputs "$mb4" --output aoti.whole.mb4.safetensors -q
expect 0 "aoti split exact" -- "$run" split --stage-format aoti -m 4 --inputs "$mb4" --check aoti.whole.mb4.safetensors --exact -q
# And within tolerance of PyTorch's own references.
expect 0 "aoti split vs PyTorch" -- "$run" split --stage-format aoti -m 4 --inputs "$mb4" --check "$mb4" -q
# Two Gloo ranks, one stage each.
pids=() rc=0
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 1)) \
    timeout 120 "$run" split --stage-format aoti -m 4 --inputs "$mb4" --check aoti.whole.mb4.safetensors --exact \
    --timeout 60 >rank$r.log 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
[[ $rc -eq 0 ]] && grep -q "check: ok" rank0.log && ok || { bad "2 Gloo ranks (exit $rc)"; tail -n 3 rank*.log; }

# --- A weightless split: packages that take their weights at load ------------
# llama_dynamic's own weights as a checkpoint, and the split pinned to it
# (--bind-at run): no stage file holds a weight. Its packages compile around
# stand-ins (scripts/aoti_compile.py: nothing may read their values) and
# bind the checkpoint's tensors as they load.
"$py" - "$models/llama_dynamic.pt2" ckpt.safetensors <<'EOF2'
import sys, torch
from safetensors.torch import save_file
ep = torch.export.load(sys.argv[1])
save_file({k: v.detach().contiguous() for k, v in {**ep.state_dict, **ep.constants}.items()}, sys.argv[2])
EOF2
expect 0 "weightless split" -- "$pipecut" split "$models/llama_dynamic.pt2" --spec two.json --weights ckpt.safetensors \
  --bind-at run -o weightless -q
expect 1 "weightless: no freezing" -- "$pipecut" compile weightless --python "$py" -q --inductor-config '{"freezing": true}'
contains "weightless: freezing refused" "is a weightless split (its stages hold no weights)"
expect 0 "compile weightless" -- "$pipecut" compile weightless --python "$py" -j 2 -q
expect 2 "weightless packages without --weights" -- "$run" weightless --stage-format aoti -m 4 --inputs "$mb4" -q
contains "weightless packages: says so" "is a weightless split"
expect 0 "weightless packages, bound" -- "$run" weightless --stage-format aoti --weights ckpt.safetensors -m 4 \
  --inputs "$mb4" --check aoti.whole.mb4.safetensors --atol 1e-5 --rtol 1.3e-6 -q

# --- A cut after a transpose ------------------------------------------------
# After layer 0's v_proj the query and key cross the cut transposed: their
# placeholders record strided layouts, pipecut-run hands packages contiguous
# inputs, and a package compiled for the recorded strides read them wrong
# (0.08 off on the bench Llama). Packages compile for contiguous inputs.
echo '{"split_points": {"model.layers.0.self_attn.v_proj": "END"}}' > v_proj.json
expect 0 "split after v_proj" -- "$pipecut" split "$models/llama_dynamic.pt2" --spec v_proj.json -o vproj -q
"$py" - vproj/stage_001.pt2 "$src/scripts" <<'EOF' && ok || bad "after v_proj: strided stage inputs"
import sys, warnings
warnings.filterwarnings("ignore")
import torch
sys.path.insert(0, sys.argv[2])
from aoti_compile import strided_user_inputs
strided = strided_user_inputs(torch.export.load(sys.argv[1]))
assert len(strided) >= 2, strided
EOF
# Compiled with the linear kernels this CPU's auto does not take, so that
# both choices compile and run on every machine.
other_matmul=onednn && [[ $auto_matmul == onednn ]] && other_matmul=blas
expect 0 "compile after v_proj, $other_matmul" -- "$pipecut" compile vproj --python "$py" -j 2 --cpu-matmul "$other_matmul" -q
expect 0 "aoti after v_proj M=4" -- "$run" vproj --stage-format aoti -m 4 --inputs "$mb4" --check ts.mb4.safetensors \
  --atol 1e-5 --rtol 1.3e-6 -q

# --- The library's copy: under TMPDIR, unlinked once loaded ---------------------
# LibTorch's own loader extracts the whole package (weights inside) into
# /tmp, TMPDIR unasked, and a killed run leaves it there.
mkdir tmpdir
expect 0 "aoti under TMPDIR" -- env TMPDIR="$out/tmpdir" "$run" split --stage-format aoti -m 4 --inputs "$mb4" \
  --check aoti.whole.mb4.safetensors --exact -q
[[ -z $(ls -A tmpdir) ]] && ok || bad "TMPDIR left with: $(ls -A tmpdir)"
# SIGKILL once both stages' libraries are loaded (mapped, their files
# already deleted): nothing left either.
TMPDIR="$out/tmpdir" "$run" split --stage-format aoti -m 4 --inputs "$mb4" --iterations 1000000 -q >/dev/null 2>&1 &
pid=$! loaded=0
for _ in $(seq 600); do
  loaded=$(grep -o "$out/tmpdir/pipecut-aoti-[A-Za-z0-9]*/stage.so (deleted)" /proc/$pid/maps 2>/dev/null | sort -u | wc -l)
  [[ $loaded -ge 2 ]] && break
  sleep 0.1
done
kill -9 $pid; wait $pid 2>/dev/null
[[ $loaded -eq 2 ]] && ok || bad "both libraries mapped from deleted copies under TMPDIR (saw $loaded)"
[[ -z $(ls -A tmpdir) ]] && ok || bad "TMPDIR left after SIGKILL with: $(ls -A tmpdir)"
expect 2 "TMPDIR missing" -- env TMPDIR="$out/no-such-dir" "$run" split --stage-format aoti --inputs "$mb1" -q
contains "TMPDIR missing message" \
  "split/stage_000.aoti-cpu.pt2: cannot make a directory for the package's library in $out/no-such-dir: No such file or directory (set TMPDIR to a directory with room)"
# A TMPDIR that takes the directory but not the library's bytes (a full
# disk, here a 64 KiB file-size limit with SIGXFSZ ignored, which the run
# inherits): the machine refused, exit 6, naming the package and the copy,
# and the half-written copy and its directory are gone.
bytes=$("$py" -c 'import sys, zipfile; print(*[i.file_size for i in zipfile.ZipFile(sys.argv[1]).infolist() if i.filename.endswith(".so")])' \
  split/stage_000.aoti-cpu.pt2)
expect 6 "TMPDIR full" -- bash -c 'trap "" XFSZ; ulimit -f 64; exec env TMPDIR="$0/tmpdir" "$1" split --stage-format aoti --inputs "$2" -q' \
  "$out" "$run" "$mb1"
contains "TMPDIR full message" \
  "split/stage_000.aoti-cpu.pt2: cannot write $bytes bytes to $out/tmpdir/pipecut-aoti-"
contains "TMPDIR full reason" "/stage.so (the package's library, loaded from there): File too large (set TMPDIR to a directory with room)"
[[ -z $(ls -A tmpdir) ]] && ok || bad "TMPDIR left after a failed copy with: $(ls -A tmpdir)"

# --- Refusals at run time -------------------------------------------------------
# A package from another torch, recorded so in the manifest.
cp -r split forged
"$py" - forged/manifest.json <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
for f in m["stages"][1]["files"]:
    if f["format"] == "aoti":
        f["compiled"]["torch_version"] = "2.10.0+cpu"
json.dump(m, open(sys.argv[1], "w"))
EOF
"$sync" forged
expect 2 "another torch's package" -- "$run" forged --stage-format aoti --inputs "$mb1" -q
contains "another torch's package message" \
  "forged/stage_001.aoti-cpu.pt2: stage 1: was compiled by torch 2.10.0+cpu, this pipecut-run links LibTorch"
# Packages that are not ones (hash checks skipped, so they get to the
# loader). The stages load side by side; the lower stage's failure is the
# one reported, whichever fails first.
cp -r split broken && cp broken/stage_000.pt2 broken/stage_000.aoti-cpu.pt2 && cp broken/stage_001.pt2 broken/stage_001.aoti-cpu.pt2
expect 2 "not a package" -- "$run" broken --stage-format aoti --inputs "$mb1" -q --no-verify
contains "not a package message" "broken/stage_000.aoti-cpu.pt2: AOTInductor cannot load it: "
# A missing package: the hash check names it.
cp -r split missing && rm missing/stage_001.aoti-cpu.pt2
expect 2 "missing package" -- "$run" missing --stage-format aoti --inputs "$mb1" -q
contains "missing package message" "stage 1 file 'stage_001.aoti-cpu.pt2': missing"
# A CPU package is its kernels only; its weights are the stage .pt2's, mapped
# where they lie (runtime/aoti_package.h). The library holds none of them:
# zeroing the weights in the .pt2 changes the outputs (rewritten by Python's
# zipfile, the records are no longer 64-byte aligned: those are copied at load).
# (Its sizes are symbolic, so its linears read their weights as they lie;
# cnn_bn's below, static, fold theirs transposed.)
"$py" - split/stage_001.aoti-cpu.pt2 <<'EOF' && ok || bad "the package holds no weights"
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
assert not [n for n in names if "/data/weights/" in n or "/data/constants/" in n or n.endswith(".blob")], names
(meta,) = [n for n in names if n.endswith(".wrapper_metadata.json")]
meta = json.loads(z.read(meta))
assert meta.get("pipecut.weights") == "stage" and "pipecut.folded_constants" not in meta, meta
EOF
cp -r split zeroed
"$py" - split/stage_001.pt2 zeroed/stage_001.pt2 <<'EOF' && ok || bad "zeroed weights written"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as src, zipfile.ZipFile(sys.argv[2], "w") as out:
    for i in src.infolist():
        data = src.read(i)
        payload = "/data/weights/" in i.filename and not i.filename.endswith(".json")
        out.writestr(i, bytes(len(data)) if payload else data)
EOF
# Unverified, a .pt2 of the same layout but other values is refused by the
# identity pipecut compile recorded (its zip directory's SHA-256); with a
# manifest from before that was recorded, the zeroed weights reach the
# kernels.
expect 2 "weights' .pt2 replaced, unverified" -- "$run" zeroed --stage-format aoti --inputs "$mb1" -q --no-verify
contains "weights' .pt2 replaced, unverified message" \
  "zeroed/stage_001.pt2: is not the file stage_001.aoti-cpu.pt2 was compiled from (its records' CRC-32s differ), and the package takes its weights from it; compile it again (pipecut compile)"
cp -r zeroed zeroed.old
"$py" - zeroed.old/manifest.json <<'EOF' && "$sync" zeroed.old && ok || bad "zeroed.old: identity dropped"
import json, sys
m = json.load(open(sys.argv[1]))
for st in m["stages"]:
    for f in st["files"]:
        if f["format"] == "aoti":
            del f["compiled"]["source_directory_sha256"]
json.dump(m, open(sys.argv[1], "w"))
EOF
expect 4 "weights read from the .pt2" -- "$run" zeroed.old --stage-format aoti -m 4 --inputs "$mb4" --check aoti.whole.mb4.safetensors \
  --exact -q --no-verify
expect 2 "weights' .pt2 changed" -- "$run" zeroed --stage-format aoti --inputs "$mb1" -q
contains "weights' .pt2 changed message" "stage 1 file 'stage_001.pt2': "
cp -r split nosource && rm nosource/stage_001.pt2
expect 2 "weights' .pt2 missing" -- "$run" nosource --stage-format aoti --inputs "$mb1" -q
contains "weights' .pt2 missing message" "stage 1 file 'stage_001.pt2': missing"
expect 2 "weights' .pt2 missing, unverified" -- "$run" nosource --stage-format aoti --inputs "$mb1" -q --no-verify
contains "weights' .pt2 missing, unverified message" "nosource/stage_001.pt2: "
# A manifest whose package names another source, or the same name with
# other bytes than the ones it was compiled from.
for forge in source xxh3 options; do
  cp -r split forged.$forge
  "$py" - forged.$forge/manifest.json $forge <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
for f in m["stages"][1]["files"]:
    if f["format"] == "aoti":
        if sys.argv[2] == "source":
            f["compiled"]["source"] = "elsewhere.pt2"
        elif sys.argv[2] == "options":
            f["compiled"]["options"] = '{"cpp.dynamic_threads":true}'
        else:
            f["compiled"]["source_xxh3_128"] = "0" * 32
json.dump(m, open(sys.argv[1], "w"))
EOF
  "$sync" forged.$forge
done
expect 2 "weights' source not listed" -- "$run" forged.source --stage-format aoti --inputs "$mb1" -q
contains "weights' source not listed message" \
  "forged.source/manifest.json: stages[1].files[2].compiled.source: 'elsewhere.pt2' is not a .pt2 file of this stage"
expect 2 "weights' source of other bytes" -- "$run" forged.xxh3 --stage-format aoti --inputs "$mb1" -q
contains "weights' source of other bytes message" \
  "stage 1: its package stage_001.aoti-cpu.pt2 was compiled from another stage_001.pt2 than the one here, whose weights it would take; compile it again (pipecut compile)"

# A record whose options say the package holds its weights, for a package
# that holds none: the package's own word wins, and it names no .pt2.
expect 2 "weightless package, no source named" -- "$run" forged.options --stage-format aoti --inputs "$mb1" -q
contains "weightless package, no source named message" \
  "forged.options/stage_001.aoti-cpu.pt2: holds no weights, and its manifest record names no .pt2 to take them from; compile it again"
# cnn_bn cut after its last convolution: the second stage reads a lifted
# tensor constant (`offset`), which Inductor would rename had pipecut not
# compiled it as the buffer it acts as: both packages take their weights from
# the .pt2. Runtime constant folding makes constants of Inductor's own
# (`_FOLDED_CONST_*`), which no .pt2 holds: those packages are compiled with
# their weights inside from the start (no `pipecut.weights` in their
# metadata, which a second compile after finding them would have written).
# Both give PyTorch's outputs.
cnn=$models/cnn_bn.mb4.ref.safetensors
expect 0 "split cnn_bn" -- "$pipecut" split "$models/cnn_bn.pt2" --spec <(echo '{"split_points": {"layers.3": "END"}}') -o cnn -q
cp -r cnn cnn.folded
expect 0 "compile cnn_bn" -- "$pipecut" compile cnn --python "$py" -j 2 -q --cpu-matmul blas
expect 0 "compile cnn_bn, runtime folding" -- "$pipecut" compile cnn.folded --python "$py" -j 2 -q \
  --inductor-config '{"aot_inductor.use_runtime_constant_folding": true}'
# On MKL's route (blas, asked for so that every CPU takes it) a static
# stage's linears multiply by their weights transposed, folded from the
# .pt2's when the package first runs (scripts/aoti_compile.py): still no
# weights of its own (cnn_bn's classifier is in stage 1). The refusals below
# run on these packages, so they take the folding path too.
AUTO_MATMUL=$auto_matmul "$py" - cnn cnn.folded <<'EOF' && ok || bad "cnn_bn: weights from the .pt2, or in the package with runtime folding"
import json, os, sys, zipfile
def metadata(path):
    z = zipfile.ZipFile(path)
    (meta,) = [n for n in z.namelist() if n.endswith(".wrapper_metadata.json")]
    return json.loads(z.read(meta))
got = [[metadata(f"{d}/stage_00{k}.aoti-cpu.pt2").get("pipecut.weights") for k in (0, 1)] for d in sys.argv[1:]]
assert got == [["stage", "stage"], [None, None]], got
folded = [metadata(f"cnn/stage_00{k}.aoti-cpu.pt2").get("pipecut.folded_constants") for k in (0, 1)]
assert folded == [None, "runtime"], folded
options = [f["compiled"]["options"] for st in json.load(open("cnn.folded/manifest.json"))["stages"]
           for f in st["files"] if f["format"] == "aoti"]
auto = os.environ["AUTO_MATMUL"]
assert options == ['{"aot_inductor.use_runtime_constant_folding":true,"cpp.dynamic_threads":true,"pipecut.cpu_matmul":"%s"%s}' % (
    auto, ',"pipecut.transpose_weights":true' if auto == "blas" else "")] * 2, options
EOF
for d in cnn cnn.folded; do
  expect 0 "$d packages vs PyTorch" -- "$run" $d --stage-format aoti -m 4 --inputs "$cnn" --check "$cnn" -q
done
# A .pt2 that does not hold what the package was compiled against, taken
# unverified, with a manifest from before pipecut compile recorded the
# .pt2's identity (which would refuse each, as above): another stage's (no
# `offset`), a weight of another dtype, and one saved as requiring gradients
# that its dtype cannot. Each exits 2 naming the file and the weight.
"$py" - cnn/stage_001.pt2 <<'EOF' && ok || bad "forged weights written"
import json, os, shutil, sys, zipfile
for how in ("dtype", "grad"):
    shutil.copytree("cnn", f"cnn.{how}")
    with zipfile.ZipFile(sys.argv[1]) as z, zipfile.ZipFile(f"cnn.{how}/stage_001.pt2", "w") as out:
        for i in z.infolist():
            data = z.read(i)
            if i.filename.endswith("weights/model_weights_config.json"):
                c = json.loads(data)
                meta = c["config"]["head.weight"]["tensor_meta"]
                meta["dtype"], meta["requires_grad"] = 4, how == "grad"  # int32: float32's size
                data = json.dumps(c).encode()
            out.writestr(i, data)
shutil.copytree("cnn", "cnn.other")
shutil.copy("cnn/stage_000.pt2", "cnn.other/stage_001.pt2")
for how in ("dtype", "grad", "other"):
    m = json.load(open(f"cnn.{how}/manifest.json"))
    for f in m["stages"][1]["files"]:
        if f["format"] == "aoti":
            del f["compiled"]["source_directory_sha256"]
    json.dump(m, open(f"cnn.{how}/manifest.json", "w"))
EOF
for how in dtype grad other; do "$sync" cnn.$how; done
expect 2 "weights of another stage" -- "$run" cnn.other --stage-format aoti --inputs "$cnn" -q --no-verify
contains "weights of another stage message" \
  "cnn.other/stage_001.aoti-cpu.pt2: constant 'offset': is not in cnn.other/stage_001.pt2, the stage's .pt2 the package takes its weights from; compile it again"
expect 2 "weight of another dtype" -- "$run" cnn.dtype --stage-format aoti --inputs "$cnn" -q --no-verify
contains "weight of another dtype message" \
  "cnn.dtype/stage_001.aoti-cpu.pt2: constant 'head.weight': is Int in cnn.dtype/stage_001.pt2, not the dtype the package was compiled for; compile it again"
expect 2 "integer weight requiring gradients" -- "$run" cnn.grad --stage-format aoti --inputs "$cnn" -q --no-verify
contains "integer weight requiring gradients message" \
  "cnn.grad/stage_001.pt2: head.weight: is saved as requiring gradients, which a tensor of Int cannot"

# --- Generation: state as inputs the package updates in place -----------------
# llama_kv_chunk (prompt chunks of symbolic length, KV caches per stage): the
# packages' greedy tokens equal the references, with chunks of 2 and whole
# prompts, 1 and 3 slots, and on 2 Gloo ranks.
gen=$src/testdata/generate
expect 0 "split llama_kv_chunk" -- "$pipecut" split "$gen/llama_kv_chunk.pt2" --spec <(echo '{"split_points": {"model.model.layers.2": "BEGINNING"}}') -o kv -q
expect 0 "compile llama_kv_chunk" -- "$pipecut" compile kv --python "$py" -j 2 -q
for args in "--slots 1 --prefill-chunk 2" "--slots 3"; do
  expect 0 "generate aoti $args" -- "$run" kv --generate --stage-format aoti --prompts "$gen/prompts.jsonl" --max-new-tokens 12 \
    $args --check-tokens "$gen/llama_kv_chunk.greedy.jsonl"
  contains "generate aoti $args tokens" "check: ok (every token as the reference)"
done
pids=() rc=0
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 2)) \
    timeout 120 "$run" kv --generate --stage-format aoti --prompts "$gen/prompts.jsonl" --max-new-tokens 12 \
    --check-tokens "$gen/llama_kv_chunk.greedy.jsonl" --timeout 60 >gen.rank$r.log 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
[[ $rc -eq 0 ]] && grep -q "check: ok" gen.rank0.log && ok || { bad "generate aoti, 2 Gloo ranks (exit $rc)"; tail -n 3 gen.rank*.log; }
expect 2 "generate with NativeRT stages" -- "$run" kv --generate --stage-format pt2 --prompts "$gen/prompts.jsonl" --max-new-tokens 2
contains "generate with NativeRT stages message" "--generate runs TorchScript stages or AOTInductor packages"

# --- map: compiled from a copy with the map unrolled -----------------------------
# AOTInductor (torch 2.11) fails on map_impl; pipecut compile hands Inductor
# a copy of the stage's .pt2 with each static map unrolled (the pass that
# --inline-grad-regions runs), in a scratch directory it removes. The script
# (a Python that keeps what it is sent) gets the copy for the stage with the
# map and the stage's own .pt2 for the other; the copy has no map, the same
# weights; then the real packages match PyTorch's references.
cf=$models/control_flow
expect 0 "split control_flow" -- "$pipecut" split "$cf.pt2" --spec "$src/testdata/specs/control_flow.2.json" -o cf -q
cat > keep-source.py <<'EOF2'
import json, shutil, sys
req = json.loads(sys.argv[1])
if req["mode"] == "probe":
    import torch
    print(json.dumps({"torch": torch.__version__, "cuda": False}))
    sys.exit(0)
n = sum(1 for _ in open("sent.jsonl")) if __import__("os").path.exists("sent.jsonl") else 0
shutil.copy(req["source"], f"sent{n}.pt2")
open("sent.jsonl", "a").write(json.dumps(req["source"]) + "\n")
print("error: RuntimeError: kept")
sys.exit(1)
EOF2
printf '#!/bin/sh\nexec "%s" "%s/keep-source.py" "$2"\n' "$py" "$out" > keep-python && chmod +x keep-python
expect 2 "compile control_flow, sources kept" -- "$pipecut" compile cf --python "$out/keep-python" --no-cache -j 1 -q
"$py" - cf <<'EOF2' && ok || bad "control_flow: the sources sent to the compile script"
import json, os, sys, torch
sent = [json.loads(line) for line in open("sent.jsonl")]
assert len(sent) == 1, sent  # -j 1: stage 0 fails first
assert os.path.basename(sent[0]) == "stage_000.pt2" and os.path.dirname(sent[0]) != os.path.abspath("cf"), sent
assert not os.path.exists(os.path.dirname(sent[0])), "scratch directory left: " + sent[0]
copy, own = torch.export.load("sent0.pt2"), torch.export.load("cf/stage_000.pt2")
targets = lambda ep: [str(n.target) for n in ep.graph.nodes]
assert any("map_impl" in t for t in targets(own)) and not any("map_impl" in t for t in targets(copy)), targets(copy)
assert "aten.stack.default" in targets(copy)
assert set(copy.state_dict) == set(own.state_dict) and all(torch.equal(copy.state_dict[k], own.state_dict[k]) for k in own.state_dict)
EOF2
expect 0 "compile control_flow" -- "$pipecut" compile cf --python "$py" -j 2 -q
for m in 1 4; do
  ref=$cf.ref.safetensors && [[ $m == 4 ]] && ref=$cf.mb4.ref.safetensors
  expect 0 "control_flow aoti M=$m" -- "$run" cf --stage-format aoti -m $m --inputs "$ref" --check "$ref" -q
done
# A map pipecut does not unroll (over a symbolic length, or longer than 64
# slices) is compiled as a while_loop (passes/map_as_loop.h): a model with
# one of each, exported at batch 3, runs at batch 8 and 40 (M=1 and M=4)
# within float32 rounding of PyTorch, as packages and as NativeRT stages
# (split --inline-grad-regions). A map nested in a cond body is refused
# before Inductor sees it: exit 2 naming the stage's .pt2 and the node,
# nothing written, no scratch directory left.
PYTHONPATH=$src/scripts "$py" - <<'EOF2' || bad "export the maps pipecut rewrites as loops"
import torch, refio
from torch._higher_order_ops.map import map as map_rows
class Maps(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))
        self.register_buffer("table", torch.randn(65, 4))
    def forward(self, x):
        rows = map_rows(lambda row, w: torch.tanh(row @ w), x, self.w)
        table = map_rows(lambda row, w: torch.relu(row @ w).sum(0, keepdim=True), self.table, self.w)
        return rows + table.sum()
class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4, 4))
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: map_rows(lambda r, w: r @ w, x, self.w), lambda x: x * 2, (x,))
torch.manual_seed(0)
b = torch.export.Dim("b", min=2, max=1024)
ep = torch.export.export(Maps(), (torch.randn(3, 4),), dynamic_shapes=({0: b},))
torch.export.save(ep, "maps.pt2")
for n in (8, 40):
    x = torch.randn(n, 4)
    refio.write_ref(f"maps{n}.ref.safetensors", [x], [ep.module()(x)], {"model": "maps"})
torch.export.save(torch.export.export(Nested(), (torch.randn(3, 4),)), "nested.pt2")
EOF2
expect 0 "split maps" -- "$pipecut" split maps.pt2 --spec whole.json -o maps -q
expect 0 "split maps for NativeRT" -- "$pipecut" split maps.pt2 --spec whole.json -o maps-nrt --inline-grad-regions -q
expect 0 "compile maps" -- "$pipecut" compile maps --python "$py" -q
for n in 8 40; do
  for m in 1 4; do
    expect 0 "maps aoti batch $n M=$m" -- "$run" maps --stage-format aoti -m $m --inputs maps$n.ref.safetensors \
      --check maps$n.ref.safetensors -q
    expect 0 "maps NativeRT batch $n M=$m" -- "$run" maps-nrt --stage-format pt2 -m $m --inputs maps$n.ref.safetensors \
      --check maps$n.ref.safetensors -q
  done
done
mkdir -p map-tmp
expect 0 "split nested" -- "$pipecut" split nested.pt2 --spec whole.json -o nested -q
TMPDIR=$out/map-tmp expect 2 "compile nested map" -- "$pipecut" compile nested --python "$py" --no-cache -q
contains "compile nested map message" "nested/stage_000.pt2: node 'map_impl': AOTInductor (torch 2.11"
contains "compile nested map reason" \
  ") cannot compile a map, and pipecut rewrites only a top-level one whose body's results have static sizes"
[[ ! -e nested/stage_000.aoti-cpu.pt2 && -z $(ls -A map-tmp) && -z $(compgen -G "nested.tmp.*") ]] && ok ||
  bad "compile nested map: nothing written, no scratch left"

# --- Operator support: compile what --support aoti takes, run the rest ---
# scripts/fixtures/support.py's nested: a map inside a cond between two
# Linears. split --support aoti cuts around the cond; pipecut compile
# compiles the two supported stages and leaves the other without an error;
# --stage-format auto runs packages and the cond's TorchScript together,
# both branches taken, M=1 and M=4, one process and 2 Gloo ranks.
"$py" "$src/scripts/fixtures/support.py" support-fx >support-fx.log 2>&1 || { bad "support fixtures"; cat support-fx.log; }
expect 0 "split nested --support aoti" -- "$pipecut" split support-fx/nested.pt2 --support aoti -o snested -q
expect 0 "compile the supported stages" -- "$pipecut" compile snested --python "$py" --json
"$py" -c 'import json,sys; j=json.loads(sys.argv[1].strip().splitlines()[-1]); assert [s["how"] for s in j["stages"]] == ["compiled", "skipped", "compiled"], j' \
  "$LAST_LOG" && ok || bad "compile: stages 0 and 2 compiled, 1 skipped: $LAST_LOG"
expect 2 "aoti: the unsupported stage has no package" -- "$run" snested --stage-format aoti \
  --inputs support-fx/nested.ref.safetensors
contains "aoti: says it was marked unsupported" \
  "stage 1: has no AOTInductor package for cpu: split --support marked it unsupported (node 'cond' (higher_order.cond)"
for m in 1 4; do
  ref=support-fx/nested.ref.safetensors
  ((m == 4)) && ref=support-fx/nested.mb4.ref.safetensors
  expect 0 "mixed formats M=$m" -- "$run" snested --stage-format auto -m $m --inputs $ref --check $ref --json
  "$py" -c 'import json,sys; j=json.loads(sys.argv[1][sys.argv[1].index("{"):]); assert [s["format"] for s in j["stage_stats"]] == ["aoti", "torchscript", "aoti"] and j["check"]["ok"], j' \
    "$LAST_LOG" && ok || bad "mixed formats M=$m: --json's formats"
done
pids=() rc=0
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((port + 3)) \
    timeout 120 "$run" snested --stage-format auto --supported-device cpu --fallback-device cpu -m 4 \
    --inputs support-fx/nested.mb4.ref.safetensors --check support-fx/nested.mb4.ref.safetensors --timeout 60 \
    >snested.rank$r.log 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
[[ $rc -eq 0 ]] && grep -q "check: ok" snested.rank0.log && ok ||
  { bad "mixed formats, 2 Gloo ranks (exit $rc)"; tail -n 3 snested.rank*.log; }
# Generation over mixed formats: llama_kv_chunk's split with stage 1's
# package taken out runs stage 0's package and stage 1's TorchScript, and
# gives the reference tokens.
rm -rf kv-mixed && cp -r kv kv-mixed
"$py" - kv-mixed/manifest.json <<'EOF' && "$sync" kv-mixed && ok || bad "kv-mixed: stage 1's package taken out"
import json, os, sys
path = sys.argv[1]
m = json.load(open(path))
files = m["stages"][1]["files"]
package = [f for f in files if f["format"] == "aoti"][0]
m["stages"][1]["files"] = [f for f in files if f is not package]
os.remove(os.path.join(os.path.dirname(path), package["path"]))
json.dump(m, open(path, "w"), indent=1)
EOF
expect 0 "generate over mixed formats" -- "$run" kv-mixed --generate --stage-format auto --prompts "$gen/prompts.jsonl" \
  --max-new-tokens 12 --check-tokens "$gen/llama_kv_chunk.greedy.jsonl" --json
"$py" -c 'import json,sys; t=sys.argv[1]; j=json.loads(t[t.index("{"):]); assert [s["format"] for s in j["stage_stats"]] == ["aoti", "torchscript"], j' \
  "$LAST_LOG" && ok || bad "generate over mixed formats: --json's formats"

# Compiled training runs pipecut compile --train's programs (run_train_compiled);
# inference packages of a program without a loss are refused, naming why.
expect 2 "train with aoti" -- "$run" split --train --stage-format aoti --data "$mb4" -q
contains "names the loss" "--train needs a program whose single output is a scalar loss"
echo "run_aoti: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
