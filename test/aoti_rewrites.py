"""scripts/aoti_compile.py's graph rewrites, on the .pt2 stages pipecut
writes, without compiling (run_aoti compiles):

- widen_masked_grouped_attention: llama_tiny (4 query heads over 2 KV
  heads, masked) split in two, whose attention calls the
  grouped-query-attention pass hands the narrow key and value with
  enable_gqa. Widening is what `pipecut compile --device cuda` does before
  AOTInductor; on the CPU it must change nothing but the graph: each masked
  enable_gqa call gets repeat_interleave on its key and value, a second pass
  finds none left, and the outputs are bitwise those of the narrow graph
  (enable_gqa is repeat_interleave by definition).
- with_contiguous_inputs: llama_dynamic (batch and sequence symbolic) cut
  after layer 0's v_proj, so that the query and key cross the cut after
  their transposes. strided_user_inputs finds them without specializing the
  sizes; traced again from the contiguous example inputs pipecut compile
  sends, every stage input records a contiguous layout (what pipecut-run
  passes a package), the sizes stay symbolic, and the outputs at other
  sizes are bitwise the same.
- route_linears_to_onednn: llama_tiny's stages again (every projection a
  float32 linear with a parameter weight) and a program whose linears
  take a computed weight, a float64 one and an empty one, which stay
  ATen's, and that program in core ATen (mm and addmm of a transposed
  weight), routed alike. What pipecut compile does on the CPU by default; the rewritten
  graph traces again (the state wrapper and the re-export trace it) and
  gives ATen's outputs within float32 rounding, its own bit for bit run to
  run.
- transpose_linear_weights (MKL's route, static sizes): the same linears
  as matmuls by their weights transposed, within rounding of ATen's; a
  second pass finds none; llama_dynamic's stage counts as symbolic.

usage: aoti_rewrites.py PIPECUT SOURCE_DIR OUT_DIR"""
import copy
import json
import os
import shutil
import subprocess
import sys

import torch

pipecut, src, out = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "scripts"))
from aoti_compile import (route_linears_to_onednn, strided_user_inputs, symbolic_sizes, transpose_linear_weights,  # noqa: E402
                          widen_masked_grouped_attention, with_contiguous_inputs)

shutil.rmtree(out, ignore_errors=True)
subprocess.run([pipecut, "split", "-q", os.path.join(src, "testdata", "models", "llama_tiny.pt2"),
                "--spec", os.path.join(src, "testdata", "specs", "llama_tiny.2.json"),
                "--format", "pt2", "-o", out], check=True)

SDPA = torch.ops.aten.scaled_dot_product_attention.default
REPEAT = torch.ops.aten.repeat_interleave.self_int


def census(ep):
    """(attention calls with enable_gqa, repeat_interleave calls)."""
    calls = [n for n in ep.graph.nodes if n.op == "call_function"]
    return (sum(n.target is SDPA and bool(n.kwargs.get("enable_gqa")) for n in calls),
            sum(n.target is REPEAT for n in calls))


def example(ep):
    """Inputs shaped as the stage's placeholders recorded: token ids below
    the vocabulary, normal floats elsewhere. Seeded: the test is the same
    on every run."""
    g = torch.Generator().manual_seed(0)
    args = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind != torch.export.graph_signature.InputKind.USER_INPUT:
            continue
        val = next(n for n in ep.graph.nodes if n.op == "placeholder" and n.name == spec.arg.name).meta["val"]
        shape = [int(s) for s in val.shape]
        if val.dtype.is_floating_point:
            args.append(torch.randn(shape, generator=g, dtype=val.dtype))
        else:
            args.append(torch.randint(0, 64, shape, generator=g, dtype=val.dtype))
    return args


stages = sorted(f for f in os.listdir(out) if f.endswith(".pt2"))
assert len(stages) == 2, stages
total = 0
for name in stages:
    narrow = torch.export.load(os.path.join(out, name))
    wide = copy.deepcopy(narrow)
    layers, repeats = census(narrow)
    assert layers == 2 and repeats == 0, (name, layers, repeats)  # two of the four layers a stage
    assert widen_masked_grouped_attention(wide) == layers, name
    assert widen_masked_grouped_attention(wide) == 0, name  # nothing left to widen
    assert census(wide) == (0, 2 * layers), (name, census(wide))  # key and value of each
    with torch.inference_mode():
        args = example(narrow)
        a = narrow.module()(*args)
        b = wide.module()(*args)
    a = a if isinstance(a, (tuple, list)) else (a,)
    b = b if isinstance(b, (tuple, list)) else (b,)
    assert len(a) == len(b), name
    for x, y in zip(a, b):
        assert torch.equal(x, y), (name, (x - y).abs().max())
    total += layers
widened = total


def run(ep, args):
    with torch.inference_mode():
        out = ep.module()(*args)
    return out if isinstance(out, (tuple, list)) else (out,)


def request(manifest, stage):
    """The request pipecut compile sends (driver/compile.cpp): each symbolic
    size at 8, where its range allows, and the symbols' ranges."""
    ranges = {r["symbol"]: (int(r["min"]), int(r["max"]) if "max" in r else None) for r in manifest["symbols"]}
    value = {k: min(max(lo, 8), hi) if hi is not None else max(lo, 8) for k, (lo, hi) in ranges.items()}
    inputs = []
    for inp in stage["inputs"]:
        dims = [d.get("symbol") for d in inp["tensor"]["shape"]]
        shape = [value[d["symbol"]] if "symbol" in d else int(d["size"]) for d in inp["tensor"]["shape"]]
        inputs.append({"dtype": inp["tensor"]["dtype"], "shape": shape, "dims": dims})
    used = {d for i in inputs for d in i["dims"] if d}
    return {"inputs": inputs, "symbols": {k: list(v) for k, v in ranges.items() if k in used}}


def tensors(req, sizes, seed):
    """Contiguous inputs for `req` with each symbol at sizes[symbol]."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for inp in req["inputs"]:
        shape = [sizes[d] if d else n for d, n in zip(inp["dims"], inp["shape"])]
        dtype = getattr(torch, inp["dtype"])
        if dtype.is_floating_point:
            out.append(torch.randn(shape, generator=g, dtype=dtype))
        elif dtype == torch.bool:
            out.append(torch.randint(0, 2, shape, generator=g).bool())
        else:
            out.append(torch.randint(0, 32, shape, generator=g, dtype=dtype))
    return out


cut = os.path.join(out, "v_proj")
with open(cut + ".json", "w") as f:
    f.write('{"split_points": {"model.layers.0.self_attn.v_proj": "END"}}')
subprocess.run([pipecut, "split", "-q", os.path.join(src, "testdata", "models", "llama_dynamic.pt2"), "--spec",
                cut + ".json", "--format", "pt2", "-o", cut], check=True)
with open(os.path.join(cut, "manifest.json")) as f:
    manifest = json.load(f)
req = request(manifest, manifest["stages"][1])
symbols = sorted(req["symbols"])
assert symbols, req  # batch and sequence
before = torch.export.load(os.path.join(cut, "stage_001.pt2"))
strided = strided_user_inputs(before)
assert len(strided) >= 2, strided  # the query and the key, transposed
after = with_contiguous_inputs(before, req, tuple(tensors(req, {k: 8 for k in symbols}, 0)))
assert strided_user_inputs(after) == [], strided_user_inputs(after)
# Other sizes than the example's: nothing was specialized, on either side.
for seed, size in enumerate((3, 5, 11)):
    args = tensors(req, {k: size + i for i, k in enumerate(symbols)}, seed)
    for x, y in zip(run(before, args), run(after, args)):
        assert torch.equal(x, y), (size, (x - y).abs().max())

LINEAR, ONEDNN = torch.ops.aten.linear.default, torch.ops.mkldnn._linear_pointwise.default


def calls(ep, target):
    return sum(n.op == "call_function" and n.target is target for n in ep.graph.nodes)


routed = 0
for name in stages:
    blas = torch.export.load(os.path.join(out, name))
    onednn = copy.deepcopy(blas)
    linears = calls(blas, LINEAR)
    assert linears >= 2 * 7, (name, linears)  # two layers' projections (and the head)
    assert route_linears_to_onednn(onednn) == linears, name
    assert route_linears_to_onednn(onednn) == 0 and calls(onednn, LINEAR) == 0, name
    args = example(blas)
    retraced = torch.export.export(onednn.module(), tuple(args), strict=False)
    assert calls(retraced, ONEDNN) == linears, name
    for x, y, z in zip(run(blas, args), run(onednn, args), run(retraced, args)):
        assert torch.allclose(x, y, rtol=1e-5, atol=1e-5), (name, (x - y).abs().max())
        assert torch.equal(y, z), name
    routed += linears


class Kept(torch.nn.Module):
    """Linears the rewrite must leave: a computed weight, float64, an empty reduction."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(5, 3))
        self.wd = torch.nn.Parameter(torch.randn(5, 3, dtype=torch.float64))
        self.empty = torch.nn.Parameter(torch.randn(5, 0))

    def forward(self, x, xd, e):
        return (torch.nn.functional.linear(x, self.w * 2), torch.nn.functional.linear(xd, self.wd),
                torch.nn.functional.linear(e, self.empty), torch.nn.functional.linear(x, self.w))


kept = torch.export.export(Kept(), (torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 0)))
assert route_linears_to_onednn(kept) == 1 and calls(kept, LINEAR) == 3, kept.graph
# Core ATen: the same four as mm and addmm of a transposed weight, routed as
# linear was (one), within rounding of ATen's.
args = (torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 0))
core = torch.export.export(Kept(), args).run_decompositions()
assert calls(core, LINEAR) == 0, core.graph
want = run(core, args)
assert route_linears_to_onednn(core) == 1 and calls(core, ONEDNN) == 1, core.graph
for x, y in zip(run(core, args), want):
    assert torch.allclose(x, y, rtol=1e-5, atol=1e-6), (x - y).abs().max()
# transpose_linear_weights: the same linears, each a matmul by its weight
# transposed into [in, out] (a permute and a contiguous clone of the
# parameter, which runtime constant folding makes once); within rounding of
# ATen's linear, a second pass finds none. Only for static sizes: llama_tiny
# has none symbolic, llama_dynamic's stage does.
MATMUL = torch.ops.aten.matmul.default
transposed = 0
for name in stages:
    blas = torch.export.load(os.path.join(out, name))
    kn = copy.deepcopy(blas)
    linears = calls(blas, LINEAR)
    assert not symbolic_sizes(blas), name
    assert transpose_linear_weights(kn) == linears, name
    assert transpose_linear_weights(kn) == 0 and calls(kn, LINEAR) == 0 and calls(kn, MATMUL) == linears, name
    args = example(blas)
    for x, y in zip(run(blas, args), run(kn, args)):
        assert torch.allclose(x, y, rtol=1e-5, atol=1e-5), (name, (x - y).abs().max())
    transposed += linears
assert symbolic_sizes(before)
kept = torch.export.export(Kept(), (torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64), torch.randn(2, 0)))
assert transpose_linear_weights(kept) == 1 and calls(kept, LINEAR) == 3, kept.graph
print(f"aoti_rewrites: {widened} masked grouped-query attention calls widened over {len(stages)} stages; "
      f"{len(strided)} strided stage inputs ({', '.join(strided)}) traced again contiguous, symbols "
      f"{', '.join(symbols)} kept; outputs bitwise equal; {routed} linears routed to oneDNN, 3 of 4 kept; {transposed} transposed")
