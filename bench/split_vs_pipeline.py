#!/usr/bin/env python3
"""Benchmark: `pipecut split` versus `torch.distributed.pipelining.pipeline()` + saving.

    split_vs_pipeline.py [--size tiny|7b] [--layers N] [--repeat 3] [--pipecut PATH] [--keep DIR]

Both sides cut the same model at the same points (after model.layers.{7,15,23}
for 32 layers, in general after the layers ending each quarter) into 4 stages,
on the same machine, in the same run.

Model: a "deep tiny Llama" -- transformers LlamaForCausalLM with --layers
decoder layers, hidden 64, intermediate 128, 4 heads, 2 kv heads, vocab 256,
random weights, sdpa attention, use_cache False, float32, eval mode, input
ids of shape 2 x 16.  With --size 7b the same Llama has Llama-2-7B's shapes
(hidden 4096, intermediate 11008, 32 heads, 32 kv heads, vocab 32000),
--layers 4 by default and bfloat16 weights (2.1 GB .pt2), where weights, not
node count, dominate both sides.  As in scripts/fixtures/generate.py, a subclass
(`LlamaLogits`) returns the logits tensor only, so every FQN stays the same.
It is exported once with torch.export.export + torch.export.save; that time is
printed but belongs to neither measurement.

A (pipecut): `pipecut split MODEL.pt2 --spec spec.json -o OUT`, timed end to
end as a subprocess (reading the .pt2, normalizing, partitioning, writing the
TorchScript and .pt2 stages and the manifest).  Also timed with
`--format torchscript` and `--format pt2` alone, and `pipecut --version`
alone, which is the fixed cost of starting the process (loading libtorch).

B (PyTorch): `pipeline(model, mb_args=(ids,), split_spec={...: SplitPoint.END})`
(it traces the model with torch.export and splits the graph), then saving
every stage module `pipe.get_stage_module(i)` to disk.  Timed separately:

  split    pipeline() itself (trace + split + unflatten into stage modules)
  capture  one forward pass through pipe.split_gm recording each stage's
           inputs -- needed as example inputs by jit.trace / export below
  sd       torch.save(stage.state_dict())                 (weights only)
  ts       torch.jit.trace(stage, inputs).save(...)       (TorchScript)
  pt2      torch.export.save(torch.export.export(stage, inputs), ...)

Which save is the fair comparison?  pipecut writes, per stage, a
self-contained TorchScript program and a self-contained .pt2 program (code +
weights) that load without Python model code.  A state_dict is only weights:
to use it one needs the transformers source *and* has to run pipeline() again
to rebuild the stage module, so `split + sd` is reported only as a lower bound
for B.  torch.jit.script does not work on the stage modules (they are
GraphModules of unflattened InterpreterModules; scripting fails on their type
annotations), so the TorchScript side uses torch.jit.trace (check_trace=False:
pipecut does not re-run its output either).  The headline ratio therefore is

    (split + capture + ts + pt2) / (pipecut split, both formats)

and per format: (split + capture + ts) / (pipecut --format torchscript),
(split + capture + pt2) / (pipecut --format pt2).

Llama and pipeline(): the stock LlamaRotaryEmbedding.forward is decorated with
@torch.no_grad(), which torch.export records as a wrap_with_set_grad_enabled
higher-order op; pipeline() has been known to trip an assert on it (pytorch
issue 128394).  With torch 2.11.0 / transformers 5.23.0 it still does:
`AssertionError: unexpected placeholder node at index 3`, raised in
torch/export/unflatten.py (run_from) via pipelining/_unflatten.py
(_outline_submodules) -- in stage 0's split graph the get_attr of the no_grad
region's body (`submod_1`) sits between the placeholders.  The script tries
pipeline() on the stock model and reports the outcome (exception type and
first line).  If it fails, the comparison is
also run on the same Llama with the rotary embedding's forward replaced by an
undecorated function doing the same math ("llama-nograd-free"; exported to
its own .pt2, which pipecut splits as well).  Should that also fail, a deep
residual MLP (`layers.N`, similar depth) is tried last.

Validity checks (cheap): stage 0 of each output is loaded with its own
loader (torch.jit.load, torch.export.load, torch.load of the state_dict) and
stage 0 of the loadable programs is run on the example input; pipecut's
stage 0 output is compared with the matching output of pipeline()'s stage 0.

Timings are medians over --repeat rounds (min and max shown as well); the
headline B total is the sum of the per-step medians.  Each round runs A
(3 formats) then B, so both sides see the same machine load; one untimed
warm-up of each comes first.

Fairness notes:
  * Both sides run with --threads intra-op threads (default 1: torch here,
    OMP_NUM_THREADS for pipecut).  The model is tiny, so more threads buy
    nothing, and with 2 threads on a 2-core machine that is also doing other
    work, OpenMP barriers made single steps vary 0.05 s .. 4 s run to run.
  * B runs inside an already warm Python process (torch and transformers
    imported, after a full untimed warm-up round); A pays a fresh process
    each time, including loading libtorch (`pipecut --version` is timed on
    its own and printed so it can be subtracted).  Both favour B; for small
    models the process start dominates A.
  * pipeline() rewrites the forward of the split-point modules in place and
    does not undo it (calling it twice on one module recurses forever), so
    each B round works on a copy.deepcopy of the model, made outside the timer.
  * A starts from the exported .pt2 and B from the eager nn.Module: B's time
    includes its own torch.export trace of the model, A's does not (the export
    is done once, up front, and printed separately).  That is the intended
    comparison -- what each tool needs given its own input -- but a user who
    starts from an nn.Module pays the export for A too.
  * B's stage .pt2 files come from re-exporting each stage module, which
    traces it a second time; there is no cheaper public way to get
    self-contained stage programs from a Pipe.
  * The two sides do not produce identical stages: pipecut recomputes cheap
    values (here the rotary cos/sin and the attention mask) in every stage
    that needs them and sends only the hidden state; pipeline() sends the
    hidden state plus those 3 tensors to every later stage.
  * pipecut additionally writes a manifest (JSON + protobuf, with the
    XXH3-128 of every file); B writes none.
"""

import argparse
import copy
import gc
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import traceback
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

BATCH, SEQ = 2, 16
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))
from tiny_llama import llama_config, logits_model  # noqa: E402
CHILD_ENV = dict(os.environ)  # environment of the pipecut processes (thread count set in main)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------

def _rotary_without_no_grad(self, x, position_ids):
    """LlamaRotaryEmbedding's default-rope math, with no @torch.no_grad()."""
    inv = self.inv_freq.to(device=x.device, dtype=torch.float32)
    angles = position_ids.float().unsqueeze(-1) * inv
    both = torch.cat([angles, angles], dim=-1)
    scale = self.attention_scaling
    return (both.cos() * scale).to(x.dtype), (both.sin() * scale).to(x.dtype)


SIZES = {
    # name: (llama_config keyword arguments, dtype, default layers)
    "tiny": ({}, torch.float32, 32),
    "7b": (dict(hidden=4096, intermediate=11008, heads=32, kv_heads=32, vocab=32000, max_positions=4096),
           torch.bfloat16, 4),
}
SIZE = "tiny"  # set by main


def random_model(cfg, dtype):
    """The model with N(0, 0.02) weights, made on the meta device first: a
    7B-shaped model's default initialisation takes minutes on 2 cores."""
    with torch.device("meta"):
        model = logits_model(cfg)
    model = model.to_empty(device="cpu").to(dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.02)
    model.model.rotary_emb.__init__(cfg)  # its inv_freq buffer, recomputed on the CPU
    return model


def build_llama(layers, patched):
    torch.manual_seed(0)
    kwargs, dtype, _ = SIZES[SIZE]
    cfg = llama_config(layers=layers, **kwargs)
    model = logits_model(cfg) if SIZE == "tiny" else random_model(cfg, dtype)
    if patched:
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

        rot = model.model.rotary_emb
        assert isinstance(rot, LlamaRotaryEmbedding)
        assert rot.rope_type == "default", rot.rope_type
        # Only this instance: a subclass whose forward is the undecorated function.
        rot.__class__ = type("LlamaRotaryEmbeddingNoGradFree", (LlamaRotaryEmbedding,),
                             {"forward": _rotary_without_no_grad})
    ids = torch.randint(0, cfg.vocab_size, (BATCH, SEQ), dtype=torch.int64)
    return model.eval().to(dtype), ids


class ResBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class DeepMLP(nn.Module):
    def __init__(self, layers, width=64, vocab=256):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(ResBlock(width) for _ in range(layers))
        self.head = nn.Linear(width, vocab)

    def forward(self, input_ids):
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def build_mlp(layers):
    torch.manual_seed(0)
    return DeepMLP(layers).eval(), torch.randint(0, 256, (BATCH, SEQ), dtype=torch.int64)


VARIANTS = {
    # name: (description, builder(layers) -> (model, ids), layer-module prefix)
    "llama": ("stock transformers LlamaForCausalLM (rotary forward under @torch.no_grad)",
              lambda n: build_llama(n, patched=False), "model.layers"),
    "llama-nograd-free": ("same Llama, rotary forward replaced by an undecorated copy of its math",
                          lambda n: build_llama(n, patched=True), "model.layers"),
    "deep-mlp": ("deep residual MLP (embed, N x LayerNorm/Linear/GELU/Linear, head)",
                 build_mlp, "layers"),
}


def cut_layers(layers):
    """Last layer index of each of the first 3 quarters: 7, 15, 23 for 32 layers."""
    if layers < 4:
        raise SystemExit("--layers must be at least 4 (4 stages)")
    return [(layers * k) // 4 - 1 for k in (1, 2, 3)]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------

def close(a, b):
    """Equal within torch.testing's default tolerances for the dtype."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    tol = {torch.bfloat16: (1.6e-2, 1e-5), torch.float16: (1e-3, 1e-5)}.get(a.dtype, (1.3e-6, 1e-5))
    return torch.allclose(a.float(), b.float(), rtol=tol[0], atol=tol[1])


def first_line(exc):
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


def dir_bytes(path):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


class Timings:
    def __init__(self):
        self.runs = {}  # key -> [seconds]

    def add(self, key, seconds):
        self.runs.setdefault(key, []).append(seconds)

    def median(self, key):
        return statistics.median(self.runs[key]) if self.runs.get(key) else None

    def maximum(self, key):
        return max(self.runs[key]) if self.runs.get(key) else None

    def minimum(self, key):
        return min(self.runs[key]) if self.runs.get(key) else None


def graph_nodes(ep):
    return sum(1 for n in ep.graph.nodes if n.op == "call_function")


# ---------------------------------------------------------------------------
# A: pipecut
# ---------------------------------------------------------------------------

def run_pipecut(pipecut, model_pt2, spec, out, fmt=None):
    cmd = [pipecut, "split", model_pt2, "--spec", spec, "-o", out]
    if fmt:
        cmd += ["--format", fmt]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=CHILD_ENV)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"pipecut failed (rc {proc.returncode}): {' '.join(cmd)}\n{proc.stdout}")
    return elapsed


def pipecut_round(args, model_pt2, spec, work, rep, tm):
    """One timed run per format; returns {key: output dir}."""
    outs = {}
    for key, fmt in (("A.both", None), ("A.ts", "torchscript"), ("A.pt2", "pt2")):
        out = os.path.join(work, f"pipecut_{key[2:]}_{rep}")
        gc.collect()
        tm.add(key, run_pipecut(args.pipecut, model_pt2, spec, out, fmt))
        outs[key] = out
    return outs


def check_pipecut_stage0(out, ids):
    with open(os.path.join(out, "manifest.json")) as f:
        manifest = json.load(f)
    stage = manifest["stages"][0]
    files = {f["format"]: os.path.join(out, f["path"]) for f in stage["files"]}
    user_only = all("user_input" in i["source"] for i in stage.get("inputs", []))
    results = {}
    ts = torch.jit.load(files["torchscript"]).eval()
    ep = torch.export.load(files["pt2"]).module()
    if user_only:
        stage_args = [ids for _ in stage["inputs"]]
        with torch.no_grad():
            for name, mod in (("torchscript", ts), ("pt2", ep)):
                out_ = mod(*stage_args)
                results[name] = list(out_) if isinstance(out_, (tuple, list)) else [out_]
        a, b = results["torchscript"], results["pt2"]
        same = len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
        if not same:
            raise AssertionError("pipecut stage 0: TorchScript and .pt2 outputs differ")
    return len(manifest["stages"]), results.get("pt2")


# ---------------------------------------------------------------------------
# B: torch.distributed.pipelining
# ---------------------------------------------------------------------------

def make_pipe(model, ids, prefix, cuts):
    """pipeline() on `model`.  It rewrites the forward of every split-point
    module in place and never restores it (a second pipeline() on the same
    module recurses forever), so callers pass a fresh copy each time."""
    from torch.distributed.pipelining import SplitPoint, pipeline

    spec = {f"{prefix}.{i}": SplitPoint.END for i in cuts}
    return pipeline(model, mb_args=(ids,), split_spec=spec)


def capture_stage_inputs(pipe, ids):
    """Run pipe.split_gm once; return each stage module's positional args."""
    seen = {}

    class Recorder(torch.fx.Interpreter):
        def call_module(self, target, args, kwargs):
            seen[id(self.fetch_attr(target))] = (tuple(args), dict(kwargs))
            return super().call_module(target, args, kwargs)

    with torch.no_grad():
        final = Recorder(pipe.split_gm).run(ids)
    stage_inputs = []
    for i in range(pipe.num_stages):
        a, kw = seen[id(pipe.get_stage_module(i))]
        if kw:
            raise RuntimeError(f"stage {i} takes keyword inputs {sorted(kw)}")
        stage_inputs.append(a)
    return stage_inputs, final


def save_stages(pipe, stage_inputs, out, kind):
    os.makedirs(out, exist_ok=True)
    for i in range(pipe.num_stages):
        stage = pipe.get_stage_module(i)
        base = os.path.join(out, f"stage_{i:03d}")
        if kind == "sd":
            torch.save(stage.state_dict(), base + ".state_dict.pt")
        elif kind == "ts":
            with torch.no_grad():
                traced = torch.jit.trace(stage, stage_inputs[i], check_trace=False)
            traced.save(base + ".pt")
        elif kind == "pt2":
            ep = torch.export.export(stage, stage_inputs[i])
            torch.export.save(ep, base + ".pt2")
        else:
            raise ValueError(kind)


def pipeline_round(model, ids, prefix, cuts, out, tag, tm):
    """pipeline() on a fresh copy, capture, the three saves; times under tag.*.
    Returns (pipe, stage_inputs)."""
    fresh = copy.deepcopy(model)  # not timed; see make_pipe
    gc.collect()
    t0 = time.perf_counter()
    pipe = make_pipe(fresh, ids, prefix, cuts)
    tm.add(f"{tag}.split", time.perf_counter() - t0)

    gc.collect()
    t0 = time.perf_counter()
    stage_inputs, _ = capture_stage_inputs(pipe, ids)
    tm.add(f"{tag}.capture", time.perf_counter() - t0)

    for kind in ("sd", "ts", "pt2"):
        gc.collect()
        t0 = time.perf_counter()
        save_stages(pipe, stage_inputs, out, kind)
        tm.add(f"{tag}.{kind}", time.perf_counter() - t0)
    return pipe, stage_inputs


def check_pipeline_stage0(pipe, stage_inputs, out):
    sd = torch.load(os.path.join(out, "stage_000.state_dict.pt"))
    want = set(pipe.get_stage_module(0).state_dict())
    if set(sd) != want:
        raise AssertionError("pipeline stage 0: state_dict keys differ after reload")
    ts = torch.jit.load(os.path.join(out, "stage_000.pt")).eval()
    ep = torch.export.load(os.path.join(out, "stage_000.pt2")).module()
    with torch.no_grad():
        ref = pipe.get_stage_module(0)(*stage_inputs[0])
        got_ts = ts(*stage_inputs[0])
        got_ep = ep(*stage_inputs[0])
    flat = lambda o: list(o) if isinstance(o, (tuple, list)) else [o]  # noqa: E731
    ref, got_ts, got_ep = flat(ref), flat(got_ts), flat(got_ep)
    for name, got in (("TorchScript", got_ts), (".pt2", got_ep)):
        if len(got) != len(ref) or not all(close(g, r) for g, r in zip(got, ref)):
            raise AssertionError(f"pipeline stage 0: reloaded {name} output differs from the stage module")
    return ref


# ---------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------

def fmt_s(x):
    return "      -" if x is None else f"{x:7.3f}"


def print_table(name, tm, a_bytes, b_bytes):
    a = {k: tm.median(k) for k in ("A.both", "A.ts", "A.pt2")}
    b = {k: tm.median(k) for k in ("B.split", "B.capture", "B.sd", "B.ts", "B.pt2")}
    b_ok = b["B.split"] is not None
    rows = [
        ("A pipecut split (torchscript+pt2)", "A.both"),
        ("A pipecut split --format torchscript", "A.ts"),
        ("A pipecut split --format pt2", "A.pt2"),
    ]
    if b_ok:
        rows += [
            ("B pipeline() trace+split", "B.split"),
            ("B capture stage inputs (1 fwd)", "B.capture"),
            ("B save state_dict x4", "B.sd"),
            ("B save jit.trace .pt x4", "B.ts"),
            ("B save export .pt2 x4", "B.pt2"),
        ]
    print(f"\n[{name}] wall seconds over {len(tm.runs['A.both'])} runs")
    print(f"  {'measurement':<40} {'median':>7} {'min':>7} {'max':>7}")
    for label, key in rows:
        print(f"  {label:<40} {fmt_s(tm.median(key))} {fmt_s(tm.minimum(key))} {fmt_s(tm.maximum(key))}")
    if not b_ok:
        return
    totals = {
        "both": b["B.split"] + b["B.capture"] + b["B.ts"] + b["B.pt2"],
        "ts": b["B.split"] + b["B.capture"] + b["B.ts"],
        "pt2": b["B.split"] + b["B.capture"] + b["B.pt2"],
        "sd": b["B.split"] + b["B.sd"],
    }
    print(f"  {'B total split+capture+ts+pt2':<40} {fmt_s(totals['both'])}   (sum of medians)")
    print(f"  {'B save only (capture+ts+pt2)':<40} {fmt_s(totals['both'] - b['B.split'])}")
    print(f"  output bytes: pipecut {a_bytes:,} (both formats + manifest); "
          f"pipeline {b_bytes:,} (state_dict + .pt + .pt2)")
    print(f"  ratio (pipeline+save) / (pipecut split) = {totals['both'] / a['A.both']:.2f}"
          f"   [{name}; .pt+.pt2 vs pipecut both formats]")
    best = sum(tm.minimum(k) for k in ("B.split", "B.capture", "B.ts", "B.pt2"))
    print(f"  ratio of minimums (least-disturbed runs) = {best / tm.minimum('A.both'):.2f}")
    print(f"  ratio torchscript only  = {totals['ts'] / a['A.ts']:.2f}"
          f"   (split+capture+jit.trace vs --format torchscript)")
    print(f"  ratio pt2 only          = {totals['pt2'] / a['A.pt2']:.2f}"
          f"   (split+capture+export vs --format pt2)")
    print(f"  ratio weights-only bound = {totals['sd'] / a['A.both']:.2f}"
          f"   (split+state_dict vs pipecut both; B output not self-contained)")


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------

def run_variant(name, args, work, cuts, startup):
    desc, build, prefix = VARIANTS[name]
    print(f"\n=== model {name}: {desc}")
    vdir = os.path.join(work, name)
    os.makedirs(vdir, exist_ok=True)
    model, ids = build(args.layers)
    nparams = sum(p.numel() for p in model.parameters())

    t0 = time.perf_counter()
    ep = torch.export.export(model, (ids,))
    t_export = time.perf_counter() - t0
    model_pt2 = os.path.join(vdir, "model.pt2")
    t0 = time.perf_counter()
    torch.export.save(ep, model_pt2)
    t_save = time.perf_counter() - t0
    print(f"  {args.layers} layers, {nparams:,} parameters, {graph_nodes(ep)} call_function nodes, "
          f"{os.path.getsize(model_pt2):,} bytes .pt2")
    print(f"  (not measured) torch.export.export {t_export:.2f} s, torch.export.save {t_save:.2f} s")

    spec = os.path.join(vdir, "spec.json")
    with open(spec, "w") as f:
        json.dump({"split_points": {f"{prefix}.{i}": "END" for i in cuts}}, f)
    print(f"  cuts: END of {', '.join(f'{prefix}.{i}' for i in cuts)}")

    tm = Timings()
    # Warm-up (untimed): one pipecut split, one B round -- which also tells
    # whether pipeline() works at all.
    run_pipecut(args.pipecut, model_pt2, spec, os.path.join(vdir, "pipecut_warmup"))
    shutil.rmtree(os.path.join(vdir, "pipecut_warmup"))
    b_ok = True
    try:
        pipeline_round(model, ids, prefix, cuts, os.path.join(vdir, "pipeline_warmup"), "W", tm)
    except Exception as exc:  # noqa: BLE001 - report whatever pipeline() raises
        b_ok = False
        frames = traceback.extract_tb(exc.__traceback__)
        where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
        print(f"  B FAILED: pipeline() raised {first_line(exc)}")
        print(f"           (raised at {where}; first call, not timed)")
    shutil.rmtree(os.path.join(vdir, "pipeline_warmup"), ignore_errors=True)
    if b_ok:
        warm = sum(tm.runs[f"W.{k}"][0] for k in ("split", "capture", "ts", "pt2"))
        print(f"  B ok: pipeline() works; untimed warm-up round split+capture+ts+pt2 = {warm:.2f} s "
              f"(pipeline() alone {tm.runs['W.split'][0]:.2f} s)")

    # Measured rounds, A and B interleaved so both see the same machine load.
    a_outs = b_out = None
    pipe = stage_inputs = None
    for rep in range(args.repeat):
        if a_outs:
            for d in a_outs.values():
                shutil.rmtree(d)
        a_outs = pipecut_round(args, model_pt2, spec, vdir, rep, tm)
        if b_ok:
            if b_out:
                shutil.rmtree(b_out)
            b_out = os.path.join(vdir, f"pipeline_{rep}")
            pipe, stage_inputs = pipeline_round(model, ids, prefix, cuts, b_out, "B", tm)
    a_out = a_outs["A.both"]

    n_stages, a_stage0 = check_pipecut_stage0(a_out, ids)
    print(f"  A ok: {n_stages} stages; stage 0 loads via torch.jit.load and torch.export.load"
          + (", runs, formats agree" if a_stage0 is not None else ""))
    if not b_ok:
        print_table(name, tm, dir_bytes(a_out), 0)
        print(f"  ratio (pipeline+save) / (pipecut split) = n/a   [{name}; pipeline() fails]")
        return False

    b_stage0 = check_pipeline_stage0(pipe, stage_inputs, b_out)
    print(f"  B ok: {pipe.num_stages} stages; stage 0 reloads via torch.load (state_dict), "
          "torch.jit.load and torch.export.load, and matches the stage module")
    if a_stage0 is not None:
        matched = any(close(a, b) for a in a_stage0 for b in b_stage0)
        print(f"  cross-check: pipecut stage 0 output {'matches' if matched else 'DOES NOT match'} "
              f"an output of pipeline() stage 0 ({len(a_stage0)} vs {len(b_stage0)} stage-0 outputs)")
    print_table(name, tm, dir_bytes(a_out), dir_bytes(b_out))
    a_both = tm.median("A.both")
    print(f"  note: pipecut process start alone (`pipecut --version`, loads libtorch) = {startup:.3f} s; "
          f"without it A.both ~ {max(a_both - startup, 0):.3f} s")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="tiny",
                    help="tiny: hidden 64, fp32; 7b: Llama-2-7B shapes, bf16 (default --layers 4)")
    ap.add_argument("--layers", type=int, default=None, help="decoder layers (default: 32 tiny, 4 for 7b)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pipecut", default=os.path.join(HERE, "..", "build", "tools", "pipecut"))
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads for torch here and OMP_NUM_THREADS for pipecut (default 1)")
    ap.add_argument("--keep", metavar="DIR", help="keep artifacts in DIR (default: a temp dir, removed)")
    ap.add_argument("--variant", choices=sorted(VARIANTS),
                    help="run only this model (default: the stock Llama, then fallbacks if pipeline() fails)")
    ap.add_argument("--also-fallbacks", action="store_true",
                    help="run the fallback models even when pipeline() works on the stock Llama")
    args = ap.parse_args()
    global SIZE
    SIZE = args.size
    if args.layers is None:
        args.layers = SIZES[args.size][2]
    args.pipecut = os.path.abspath(args.pipecut)
    if not os.access(args.pipecut, os.X_OK):
        raise SystemExit(f"pipecut binary not found: {args.pipecut} (build it or pass --pipecut)")
    if args.repeat < 1:
        raise SystemExit("--repeat must be >= 1")

    torch.set_num_threads(args.threads)
    CHILD_ENV["OMP_NUM_THREADS"] = str(args.threads)
    CHILD_ENV["MKL_NUM_THREADS"] = str(args.threads)

    import transformers

    cuts = cut_layers(args.layers)
    print(f"size {args.size}, {args.layers} layers; torch {torch.__version__}, transformers {transformers.__version__}, "
          f"{os.cpu_count()} CPUs, torch threads {torch.get_num_threads()}, repeat {args.repeat} (median)")
    print(f"pipecut {args.pipecut}")

    startups = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        subprocess.run([args.pipecut, "--version"], stdout=subprocess.DEVNULL, check=True, env=CHILD_ENV)
        startups.append(time.perf_counter() - t0)
    startup = statistics.median(startups)

    if args.keep:
        work = os.path.abspath(args.keep)
        os.makedirs(work, exist_ok=True)
    else:
        work = tempfile.mkdtemp(prefix="pipecut_bench_")
    load0 = os.getloadavg()
    t_all = time.perf_counter()
    try:
        if args.variant:
            run_variant(args.variant, args, work, cuts, startup)
            ok = True
        else:
            ok = run_variant("llama", args, work, cuts, startup)
        if not args.variant and (not ok or args.also_fallbacks):
            why = "pipeline() failed on the stock Llama" if not ok else "--also-fallbacks"
            for fallback in ("llama-nograd-free", "deep-mlp"):
                print(f"\n({why}: running the comparison on '{fallback}')")
                if run_variant(fallback, args, work, cuts, startup) and not args.also_fallbacks:
                    break
    finally:
        if args.keep:
            print(f"\nartifacts kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\ntotal benchmark wall time {time.perf_counter() - t_all:.1f} s; "
          f"load average before {load0[0]:.2f}, after {os.getloadavg()[0]:.2f} (1 min; "
          f"other work on the machine shows up as run-to-run spread)")


if __name__ == "__main__":
    main()
