"""scripts/aoti_compile.py's widen_masked_grouped_attention on the .pt2
stages pipecut writes: llama_tiny (4 query heads over 2 KV heads, masked)
split in two, whose attention calls the grouped-query-attention pass hands
the narrow key and value with enable_gqa. Widening is what `pipecut compile
--device cuda` does before AOTInductor; on the CPU it must change nothing
but the graph: each masked enable_gqa call gets repeat_interleave on its key
and value, a second pass finds none left, and the outputs are bitwise those
of the narrow graph (enable_gqa is repeat_interleave by definition).

usage: aoti_widen.py PIPECUT SOURCE_DIR OUT_DIR"""
import copy
import os
import shutil
import subprocess
import sys

import torch

pipecut, src, out = sys.argv[1:4]
sys.path.insert(0, os.path.join(src, "scripts"))
from aoti_compile import widen_masked_grouped_attention  # noqa: E402

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
print(f"aoti_widen: {total} masked grouped-query attention calls widened over {len(stages)} stages, outputs bitwise equal")
