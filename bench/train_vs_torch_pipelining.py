#!/usr/bin/env python3
"""Benchmark: `pipecut-run --train` against torch.distributed.pipelining
training (Schedule1F1B, and ScheduleInterleavedZeroBubble against pipecut's
zb1p), same weights, same data, same SGD, same process count, Gloo on
loopback, one intra-op thread per process.

    train_vs_torch_pipelining.py [--stages 2] [--schedules 1f1b,zb]
                                 [--formats torchscript,aoti]
                                 [--recompute-check 1f1b|all|none]
                                 [--cache DIR] [--compile-jobs N]
                                 [--zb-procs 2] [-m 8] [--steps 8]
                                 [--warmup 2] [--repeats 3] [--threads 1]
                                 [--layers 8] [--hidden 128] [--vocab 4000]
                                 [--seq 64] [--mb-size 2] [--pin]
                                 [--torch-stages script|eager]
                                 [--torch-jit-optimize] [--keep DIR]

pipecut-run trains in up to three ways per schedule pair, each a side of its
own, alternating with torch's: --formats torchscript (autograd over the
TorchScript stages, `--stage-format torchscript`, the default of --train),
aoti (`pipecut compile --train` programs, `--stage-format aoti`: F, I, W or
F, B per stage, no autograd) and, for the pairs named by --recompute-check,
aoti-rc (the same split compiled a second time, into a copy of the
directory, with `--recompute all`: F saves only the stage's inputs).
Compiles go through a package cache (--cache, default KEEP/compile_cache),
so a second run with the same --keep does not compile again.

Model: the tiny Llama of scripts/tiny_llama.py (LlamaForCausalLM from a
config, random weights from --seed, float32, no dropout), --layers decoder
layers.  It is exported twice with torch.export, both times with one
micro-batch (--mb-size x --seq int64 ids) as the static batch:
  loss program    WithLoss(model): forward(input_ids, labels) returns
                  F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))
                  (as scripts/fixtures/train_refs.py does); for pipecut-run.
  logits program  model: forward(input_ids) returns the logits; for torch,
                  whose schedule computes the loss itself (loss_fn).
Both are cut by `pipecut split --format torchscript` at the same layer
boundaries (split_points "m.model.layers.K" / "model.layers.K": BEGINNING, K
= i*layers/stages), so stage i of one split holds exactly the parameters of
stage i of the other (checked: same names after the "m." prefix, bitwise
equal values); the loss split's last stage also takes the labels and ends in
the same cross entropy, inside its TorchScript.

Data: one file (input.0 ids, input.1 labels, int64 [(W+N) x M x mb, seq]),
sequences walking a fixed random cycle over 64 token ids from random starts,
labels = next tokens (learnable: the loss falls).  Step k takes rows
[k*B, (k+1)*B), B = M x mb, in M consecutive micro-batches, on both sides.

A (pipecut-run), per pair:
    torchrun --no-python --nproc-per-node P --master-addr 127.0.0.1
             --master-port PORT pipecut-run LOSS_SPLIT --train --data DATA
             --steps W+N -m M --schedule 1f1b|zb1p|interleaved-1f1b
             --optimizer sgd --lr LR --momentum MOM --threads T --json -q
             --trace TRACE.json
B (torch), this file in --worker mode under
    torchrun --nproc-per-node P --master-addr 127.0.0.1 --master-port PORT
  every rank: torch.set_num_threads(T); dist.init_process_group("gloo");
  TorchScript graph executor optimization off (pipecut-run's workers run the
  plain interpreter too; --torch-jit-optimize turns it on); for each local
  stage i: torch.jit.load(LOGITS_SPLIT/stage_<i>.pt) (its parameters require
  grad: checked), wrapped in an nn.Module returning the single tensor of the
  stage's 1-tuple, PipelineStage(wrapper, i, S, cpu) (runtime shape
  inference, which copes with the int64 ids); Schedule1F1B(stage, M, loss_fn)
  or ScheduleInterleavedZeroBubble(stages, M, loss_fn) (or
  ScheduleInterleaved1F1B), loss_fn = F.cross_entropy(logits.reshape(-1, V),
  labels.reshape(-1)), scale_grads=True (the default: gradients of the mean
  micro-batch loss, as pipecut-run's 1/M seed); torch.optim.SGD(local
  parameters, lr, momentum).  Per step: opt.zero_grad();
  schedule.step(ids on the first stage's rank, target=labels and losses=[] on
  the last stage's rank, return_outputs=False); opt.step().
  --torch-stages eager (or automatically, when the TorchScript stages fail)
  uses eager stage modules cut from the eager model instead (embedding +
  rotary + the stage's decoder layers + norm + lm_head; same weights).

Stage placement: 1f1b: S stages, S processes, one stage each.  zb: 2P stages
on P processes (--zb-procs); torch's interleaved schedules need stage i on
rank i mod P ("loop" placement), pipecut-run's zb1p places contiguously
(stages 0,1 on rank 0, 2,3 on rank 1).  interleaved (optional): 2P stages
round robin on both sides.

Timing, the same on both sides: W warm-up steps, then N measured steps, in
one run of W+N steps.  The number is the time from the start of step W on
rank 0 to the end of the last step (after its optimizer step) on rank 0.
torch: time.perf_counter() before opt.zero_grad() of each step and after the
last opt.step(), on rank 0.  pipecut-run: the sum of the report's step_ms
(rank 0's wall time of each step, optimizer step included) from step W on.
samples/s = N x B / that time; "all steps"
(W+N steps, first included) is printed too.  The pipeline drains at every
step on both sides (an optimizer step needs all M gradients).  Medians over
--repeats runs; sides alternate and the order rotates every repeat.

Loss check: the per-step mean micro-batch losses of every side (pipecut's
report `losses`; torch's last stage's `losses` list, averaged), from the
first repeat, side by side, with the max relative difference: TorchScript
against torch (expected identical), compiled against TorchScript (within
1e-5 relative: Inductor's kernels round otherwise), recompute all against
none (within 1e-6 relative).

Bubble: pipecut-run's report "bubble": {"measured": ...} (1 - the stages'
busy time / (workers x the run's wall time), all W+N steps, optimizer steps
and step flushes included) and, from the traces, the same over the measured
steps only; against the ideal of the schedule with p = the pipeline's ranks
(workers: the bubble is idle time of a worker, and pipecut-run's zb1p runs a
rank's contiguous stages back to back, as one pipeline stage) and m = M:
zb1p (p-1)/(3m), 1f1b (p-1)/(m+p-1); and against the floor the uneven ranks
set by themselves, 1 - mean/max of the ranks' busy time.

Memory: the peak RSS of every process: pipecut-run's under /usr/bin/time -f
%M (each torchrun child), torch's workers' ru_maxrss; and, for compiled
stages, the report's per-stage saved_activation_bytes (the most bytes held
for one micro-batch from its F to its backward: what --recompute trades) and
held_for_weights_bytes (from I to W: what W reads).

Also printed: per rank, the time spent per measured step in compute:
torch: forward_one_chunk + loss_fn + backward_one_chunk +
backward_weight_one_chunk (wrapped timers); pipecut-run: its trace's compute
spans (from the last value an action receives to the first it sends).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PAIRS = {
    # name: (pipecut --schedule, torch schedule class, stages per process)
    "1f1b": ("1f1b", "Schedule1F1B", 1),
    "zb": ("zb1p", "ScheduleInterleavedZeroBubble", 2),
    "interleaved": ("interleaved-1f1b", "ScheduleInterleaved1F1B", 2),
}
DATA_TOKENS = 64  # the data walks a cycle over this many token ids


def names(text):
    out = [x.strip() for x in text.split(",") if x.strip()]
    for x in out:
        if x not in PAIRS:
            raise argparse.ArgumentTypeError(f"unknown schedule pair {x!r} (choose from {', '.join(PAIRS)})")
    return out


def cut_layers(layers, stages):
    """First layer of each stage after the first (BEGINNING cuts)."""
    if stages > layers:
        raise SystemExit(f"--layers {layers} is fewer than {stages} stages")
    return [round(i * layers / stages) for i in range(1, stages)]


def spec_for(prefix, layers, stages):
    return {"split_points": {f"{prefix}.{k}": "BEGINNING" for k in cut_layers(layers, stages)}}


# ---------------------------------------------------------------------------
# Worker: one rank of the torch.distributed.pipelining side (run by torchrun)
# ---------------------------------------------------------------------------

def eager_stages(a, n_stages, indices):
    """Eager stage modules cut from the model (same weights as the exports):
    stage i = [embedding] + rotary + its decoder layers + [norm + lm_head]."""
    import torch
    import torch.nn as nn

    import pipeline_bench_util as U

    model = U.build_llama(a).train()
    model.load_state_dict(torch.load(a.state, weights_only=True))
    bounds = [0] + cut_layers(a.layers, n_stages) + [a.layers]

    class EagerStage(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.first, self.last = i == 0, i == n_stages - 1
            if self.first:
                self.embed_tokens = model.model.embed_tokens
            self.layers = nn.ModuleList(model.model.layers[bounds[i]:bounds[i + 1]])
            self.rotary_emb = model.model.rotary_emb
            if self.last:
                self.norm = model.model.norm
                self.lm_head = model.lm_head

        def forward(self, x):
            h = self.embed_tokens(x) if self.first else x
            pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
            pe = self.rotary_emb(h, pos)
            for layer in self.layers:
                h = layer(h, attention_mask=None, position_ids=pos, position_embeddings=pe)
            return self.lm_head(self.norm(h)) if self.last else h

    return [EagerStage(i) for i in indices]


def worker(a):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed import pipelining as pp

    from refio import read_ref

    if a.pin:
        os.sched_setaffinity(0, {int(os.environ.get("LOCAL_RANK", "0")) % os.cpu_count()})
    torch.set_num_threads(a.threads)
    torch._C._set_graph_executor_optimize(bool(a.torch_jit_optimize))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(os.path.join(a.dir, "manifest.json")) as f:
        manifest = json.load(f)
    n_stages = len(manifest["stages"])
    per_rank = PAIRS[a.pair][2]
    if n_stages != per_rank * world:
        raise SystemExit(f"{n_stages} stages for {world} ranks x {per_rank} stages")
    local = [rank + k * world for k in range(per_rank)]  # loop placement (torch's interleaved schedules)
    notes = []

    class Unwrap(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[0]

    if a.torch_stages == "script":
        mods = []
        for i in local:
            st = manifest["stages"][i]
            if len(st["inputs"]) != 1 or len(st["outputs"]) != 1:
                raise SystemExit(f"stage {i}: expected 1 input and 1 output")
            pt = [f["path"] for f in st["files"] if f["format"] == "torchscript"][0]
            m = torch.jit.load(os.path.join(a.dir, pt), map_location="cpu")
            frozen = [n for n, p in m.named_parameters() if not p.requires_grad]
            if frozen:
                notes.append(f"stage {i}: {len(frozen)} loaded parameters did not require grad; set")
                for p in m.parameters():
                    p.requires_grad_(True)
            mods.append(Unwrap(m))
    else:
        mods = eager_stages(a, n_stages, local)

    busy = {i: 0.0 for i in local}
    counting = [False]

    def timed(fn, i):
        def call(*args, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                if counting[0]:
                    busy[i] += time.perf_counter() - t0
        return call

    stages = []
    for i, mod in zip(local, mods):
        s = pp.PipelineStage(mod, i, n_stages, torch.device("cpu"))
        for meth in ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk"):
            if hasattr(s, meth):
                setattr(s, meth, timed(getattr(s, meth), i))
        stages.append(s)
    V = a.vocab
    loss_fn = timed(lambda logits, labels: F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1)), n_stages - 1)
    cls = getattr(pp, PAIRS[a.pair][1])
    sched = cls(stages[0] if per_rank == 1 else stages, n_microbatches=a.microbatches, loss_fn=loss_fn,
                scale_grads=True)
    params = [p for m in mods for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum)

    ids, labels = read_ref(a.data)[0]
    B = a.microbatches * a.mb_size
    K = a.warmup + a.steps
    if ids.shape[0] < K * B:
        raise SystemExit(f"{a.data}: {ids.shape[0]} rows < {K} steps x {B}")
    has_first, has_last = 0 in local, n_stages - 1 in local
    losses, starts = [], []
    for k in range(K):
        if k == a.warmup:
            counting[0] = True
        starts.append(time.perf_counter())
        opt.zero_grad()
        args = (ids[k * B:(k + 1) * B],) if has_first else ()
        kw = {}
        if has_last:
            kw = {"target": labels[k * B:(k + 1) * B], "losses": []}
        sched.step(*args, return_outputs=False, **kw)
        opt.step()
        if has_last:
            losses.append(sum(float(x.detach()) for x in kw["losses"]) / len(kw["losses"]))
    t_end = time.perf_counter()
    import resource

    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # Collect (outside the timed region): the losses from the last stage's rank, busy times from all.
    got = [None] * world
    dist.all_gather_object(got, {"losses": losses if has_last else None, "busy": busy, "notes": notes,
                                 "rss_kb": rss_kb})
    if rank == 0:
        loss_list = [g["losses"] for g in got if g["losses"] is not None][0]
        busy_all = {}
        for r, g in enumerate(got):
            busy_all[r] = sum(g["busy"].values()) * 1e3
        steady = (t_end - starts[a.warmup]) * 1e3
        print(json.dumps({
            "losses": loss_list, "steady_ms": steady, "all_ms": (t_end - starts[0]) * 1e3,
            "step_ms": [(b - s) * 1e3 for s, b in zip(starts, starts[1:] + [t_end])],
            "busy_ms_per_rank": [busy_all[r] for r in range(world)],
            "rss_kb_per_rank": [g["rss_kb"] for g in got],
            "notes": sum((g["notes"] for g in got), []), "world_size": world, "stages": n_stages,
        }), flush=True)
    dist.barrier()
    dist.destroy_process_group()


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def failure_reason(text):
    """The first '[rankN]: SomeError: ...' line of a failed torchrun (else the last error-looking line)."""
    import re

    m = re.search(r"^\[rank\d+\]: ([\w.]*(?:Error|Exception)\b.*)$", text, re.M)
    if m:
        return m.group(1).strip()[:300]
    err = [ln for ln in text.splitlines() if "Error" in ln and "ChildFailedError" not in ln]
    return (err[-1] if err else text.splitlines()[0]).strip()[:300]


def pipecut_failure(text):
    """A failed pipecut-run launch: its error lines (distinct, at most 4) and the command."""
    lines = text.splitlines()
    errs = []
    for ln in lines[1:]:
        ln = ln.strip()
        if ("error" in ln.lower() or "failed" in ln.lower()) and "ChildFailedError" not in ln and ln not in errs:
            errs.append(ln[:300])
    return "; ".join(errs[:4] or [ln.strip()[:300] for ln in lines[-3:]]) + f"\n    ({lines[0][:1500]})"


def pipecut_trace_times(trace_base, world, steps, warmup):
    """From pipecut-run's per-rank traces: (start of step `warmup` on rank 0 in ms,
    per-rank span ms over the measured steps)."""
    root, ext = os.path.splitext(trace_base)
    start_w, spans = None, []
    for r in range(world):
        path = f"{root}.rank{r}{ext}" if world > 1 else trace_base
        with open(path) as f:
            t = json.load(f)
        ev = t["traceEvents"] if isinstance(t, dict) else t
        ev = sorted((e for e in ev if e.get("ph") == "X" and e.get("cat") == "compute"), key=lambda e: e["ts"])
        if len(ev) % steps:
            raise RuntimeError(f"{path}: {len(ev)} compute spans are not {steps} equal steps")
        n = len(ev) // steps
        if r == 0:
            start_w = ev[warmup * n]["ts"] / 1e3
        spans.append(sum(e["dur"] for e in ev[warmup * n:]) / 1e3)
    return start_w, spans


FORMATS = ("torchscript", "aoti")
# side: how its rows and summary lines name it
SIDE_NAME = {"torchscript": "pipecut TorchScript", "aoti": "pipecut compiled", "aoti-rc": "compiled, recompute all",
             "torch": "torch"}
# the loss checks: (side, against, relative tolerance)
LOSS_CHECKS = (("torchscript", "torch", 1e-5), ("aoti", "torchscript", 1e-5), ("aoti", "torch", 1e-5),
               ("aoti-rc", "aoti", 1e-6))
GOAL_VS_TORCH, GOAL_VS_SCRIPT = 1.5, 1.3
# pipecut-run's peak RSS: each torchrun child runs under this, writing to FILE.$RANK (KiB)
PY_MAXRSS = ("import os, resource, subprocess, sys\n"
             "rc = subprocess.call(sys.argv[2:])\n"
             "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
             "sys.exit(rc)\n")


def format_list(text):
    out = [x.strip() for x in text.split(",") if x.strip()]
    for x in out:
        if x not in FORMATS:
            raise argparse.ArgumentTypeError(f"unknown stage format {x!r} (choose from {', '.join(FORMATS)})")
    if not out:
        raise argparse.ArgumentTypeError("no stage format")
    return out


def ideal_bubble(schedule, p, m):
    """(formula, value) of the schedule's bubble with p ranks, m micro-batches, equal stages."""
    if schedule == "zb1p":
        return "(p-1)/(3m)", (p - 1) / (3 * m)
    if schedule == "1f1b":
        return "(p-1)/(m+p-1)", (p - 1) / (m + p - 1)
    return None, None


def mib(kb):
    return kb / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    ap.add_argument("--pair", default="1f1b", help=argparse.SUPPRESS)
    ap.add_argument("--stages", type=int, default=2, help="1f1b: stages = processes (default %(default)s)")
    ap.add_argument("--schedules", type=names, default=["1f1b", "zb"],
                    help="pairs to race: 1f1b, zb (pipecut zb1p vs torch ScheduleInterleavedZeroBubble), "
                         "interleaved (pipecut interleaved-1f1b vs torch ScheduleInterleaved1F1B) (default 1f1b,zb)")
    ap.add_argument("--formats", type=format_list, default=["torchscript", "aoti"],
                    help="pipecut-run sides: torchscript (autograd over the TorchScript stages), aoti (pipecut "
                         "compile --train programs, --stage-format aoti) (default torchscript,aoti)")
    ap.add_argument("--recompute-check", default="1f1b",
                    help="pairs (comma separated, 'all' or 'none') whose split is compiled a second time, into a "
                         "copy, with --recompute all and raced as a side of its own (saved bytes, peak RSS, "
                         "losses within 1e-6); needs aoti in --formats (default %(default)s)")
    ap.add_argument("--cache", default="",
                    help="pipecut compile's package cache (default: compile_cache in the work directory)")
    ap.add_argument("--compile-jobs", type=int, default=0, help="pipecut compile -j (default: pipecut's own choice)")
    ap.add_argument("--zb-procs", type=int, default=2, help="zb/interleaved: processes; stages = 2 x this (default %(default)s)")
    ap.add_argument("--steps", type=int, default=8, help="measured optimizer steps (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured steps first, in the same run (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per side (default %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per process, both sides (default %(default)s)")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--pin", action="store_true", help="pin rank r to core r mod cores (both sides)")
    ap.add_argument("--torch-stages", choices=["script", "eager"], default="script",
                    help="torch side's stage modules: the logits split's TorchScript files (default) or eager "
                         "modules cut from the model; script falls back to eager if it fails")
    ap.add_argument("--torch-jit-optimize", action="store_true",
                    help="torch side: leave TorchScript's graph executor optimizations on (pipecut-run turns them off)")
    ap.add_argument("--pipecut", default=None)
    ap.add_argument("--runner", default=None)
    ap.add_argument("--keep", default="", help="keep artifacts in DIR (default: a temporary directory, removed)")
    import pipeline_bench_util as U

    U.add_model_args(ap, layers=8, hidden=128, seq=64, mb_size=2, microbatches=8)
    ap.set_defaults(vocab=4000)
    a = ap.parse_args()
    if a.worker:
        return worker(a)

    pipecut = a.pipecut or U.DEFAULT_PIPECUT
    runner = a.runner or U.DEFAULT_RUNNER
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    t_start = time.perf_counter()
    K = a.warmup + a.steps
    if a.steps < 1 or a.warmup < 1:
        raise SystemExit("--steps and --warmup must be at least 1 (the first step is warm-up on both sides)")
    rc_text = a.recompute_check.strip()
    if rc_text in ("", "none"):
        rc_pairs = []
    elif rc_text == "all":
        rc_pairs = list(a.schedules)
    else:
        rc_pairs = [x for x in names(rc_text) if x in a.schedules]
    if "aoti" not in a.formats:
        rc_pairs = []

    env = U.launcher_env(a.threads)

    import shlex

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    from refio import write_ref

    B = a.microbatches * a.mb_size
    print("train_vs_torch_pipelining: pipecut-run --train vs torch.distributed.pipelining training")
    print(f"model: {U.describe_model(a)}")
    print(f"torch {torch.__version__}; machine: {os.cpu_count()} CPU cores; load average at start {U.loadavg()}")
    print(f"both sides: Gloo on 127.0.0.1, OMP_NUM_THREADS={a.threads}, intra-op threads {a.threads}, "
          f"{'rank r pinned to core r' if a.pin else 'not pinned'}; SGD lr {a.lr} momentum {a.momentum}; "
          f"-m {a.microbatches}; {a.warmup} warm-up + {a.steps} measured steps per run; {a.repeats} repeats")
    print(f"pipecut-run sides: {', '.join(SIDE_NAME[f] + ' (--stage-format ' + f + ')' for f in a.formats)}"
          + (f"; {SIDE_NAME['aoti-rc']} (pipecut compile --train --recompute all) for {', '.join(rc_pairs)}"
             if rc_pairs else ""))
    print(f"torch side: {a.torch_stages} stage modules; TorchScript graph executor optimization "
          f"{'ON' if a.torch_jit_optimize else 'off (as in pipecut-run)'}; step(return_outputs=False)")

    def torchrun_cmd(n, extra):
        return [torchrun, "--nproc-per-node", str(n), "--master-addr", "127.0.0.1",
                "--master-port", str(U.free_port())] + extra

    ncpu = os.cpu_count() or 1
    have_time = os.access("/usr/bin/time", os.X_OK)

    def run_pipecut(d, procs, schedule, data, trace, fmt, rss_base):
        cmd = [runner, d, "--train", "--stage-format", fmt, "--data", data, "--steps", str(K),
               "-m", str(a.microbatches), "--schedule", schedule, "--optimizer", "sgd", "--lr", repr(a.lr),
               "--momentum", repr(a.momentum), "--threads", str(a.threads), "--json", "-q", "--trace", trace]
        # Every torchrun child: [taskset -c CORE] (/usr/bin/time -f %M -o RSS.$RANK | python MAXRSS) pipecut-run ...
        pin = f"taskset -c $((LOCAL_RANK % {ncpu})) " if a.pin else ""
        out = shlex.quote(rss_base) + ".$RANK"
        meter = (f"/usr/bin/time -f %M -o {out}" if have_time
                 else f"{shlex.quote(sys.executable)} -c {shlex.quote(PY_MAXRSS)} {out}")
        wrapped = ["sh", "-c", f'exec {pin}{meter} "$0" "$@"'] + cmd
        for r in range(procs):
            if os.path.exists(f"{rss_base}.{r}"):
                os.remove(f"{rss_base}.{r}")
        j = U.run_json(torchrun_cmd(procs, ["--no-python"] + wrapped), env=env)
        start_w, spans = pipecut_trace_times(trace, procs, K, a.warmup)
        rss = []
        for r in range(procs):
            with open(f"{rss_base}.{r}") as f:
                rss.append(int(f.read().split()[-1]))
        stats = sorted(j["stage_stats"], key=lambda s: s["stage"])
        rank_busy = [sum(s["busy_ms"] for s in stats if s["rank"] == r) for r in range(procs)]
        steady = sum(j["step_ms"][a.warmup:])
        return {"losses": j["losses"], "steady_ms": steady, "all_ms": j["wall_ms"],
                "busy_ms_per_rank": spans, "rss_kb_per_rank": rss, "report": j,
                "bubble": j["bubble"]["measured"], "bubble_steady": max(0.0, 1 - sum(spans) / (procs * steady)),
                "floor_steady": 1 - sum(spans) / (procs * max(spans)),
                "floor_all": 1 - sum(rank_busy) / (procs * max(rank_busy)) if max(rank_busy) > 0 else 0.0,
                "formats": sorted({s.get("format", "?") for s in stats}),
                "saved": [s.get("saved_activation_bytes") for s in stats],
                "for_w": [s.get("held_for_weights_bytes") for s in stats],
                "command": " ".join(shlex.quote(x) for x in cmd)}

    def run_torch(d, procs, pair, data, state, stages_kind):
        cmd = torchrun_cmd(procs, [os.path.abspath(__file__), "--worker", "--pair", pair, "--dir", d, "--data", data,
                                   "--state", state, "--steps", str(a.steps), "--warmup", str(a.warmup),
                                   "--threads", str(a.threads), "--lr", repr(a.lr), "--momentum", repr(a.momentum),
                                   "--torch-stages", stages_kind]
                           + (["--pin"] if a.pin else []) + (["--torch-jit-optimize"] if a.torch_jit_optimize else [])
                           + model_flags)
        return U.run_json(cmd, env=env)

    model_flags = ["--layers", str(a.layers), "--hidden", str(a.hidden), "--intermediate", str(a.intermediate),
                   "--heads", str(a.heads), "--kv-heads", str(a.kv_heads), "--vocab", str(a.vocab),
                   "--seq", str(a.seq), "--mb-size", str(a.mb_size), "-m", str(a.microbatches), "--seed", str(a.seed)]

    with U.WorkDir(a.keep, "pipecut_train_vs_torch_pp_") as work:
        cache = os.path.abspath(a.cache) if a.cache else os.path.join(work, "compile_cache")
        # -- model, exports, data ------------------------------------------------------------
        t0 = time.perf_counter()
        model = U.build_llama(a).train()

        class WithLoss(nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, input_ids, labels):
                logits = self.m(input_ids)
                return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))

        WithLoss.__qualname__ = "WithLoss"
        state = os.path.join(work, "llama_state.pt")
        torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, state)

        gen = torch.Generator().manual_seed(a.seed + 1)
        tokens = torch.randperm(a.vocab, generator=gen)[:min(DATA_TOKENS, a.vocab)]
        pos = torch.randint(0, len(tokens), (K * B, 1), generator=gen) + torch.arange(a.seq + 1)
        seq = tokens[pos % len(tokens)]
        ids, labels = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        data = os.path.join(work, "data.safetensors")
        write_ref(data, [ids, labels], [], {"steps": str(K), "rows_per_step": str(B)})
        x0, y0 = ids[:a.mb_size], labels[:a.mb_size]

        t1 = time.perf_counter()
        ep_loss = torch.export.export(WithLoss(model), (x0, y0))
        loss_pt2 = os.path.join(work, "llama_loss.pt2")
        torch.export.save(ep_loss, loss_pt2)
        ep_logits = torch.export.export(model, (x0,))
        logits_pt2 = os.path.join(work, "llama_logits.pt2")
        torch.export.save(ep_logits, logits_pt2)
        t2 = time.perf_counter()
        with torch.no_grad():
            l_eager = float(WithLoss(model)(x0, y0))
            l_loss = float(ep_loss.module()(x0, y0))
            lg = ep_logits.module()(x0)
            l_logits = float(F.cross_entropy(lg.reshape(-1, a.vocab), y0.reshape(-1)))
        del ep_loss, ep_logits
        print(f"artifacts: {work}   (build + data {t1 - t0:.1f}s, two exports {t2 - t1:.1f}s); first micro-batch loss: "
              f"eager {l_eager:.6f}, loss program {l_loss:.6f}, logits program + cross_entropy {l_logits:.6f}")

        # -- splits -------------------------------------------------------------------------
        def split(pt2, prefix, n, out, fmt):
            spec = spec_for(prefix, a.layers, n)
            spec_path = out + ".spec.json"
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            if os.path.exists(out):
                shutil.rmtree(out)
            subprocess.run([pipecut, "split", pt2, "--spec", spec_path, "-o", out, "--format", fmt],
                           check=True, stdout=subprocess.DEVNULL)
            with open(os.path.join(out, "manifest.json")) as f:
                man = json.load(f)
            if len(man["stages"]) != n:
                raise SystemExit(f"{out}: expected {n} stages, got {len(man['stages'])}")
            return spec, man

        def same_params(dl, dg, n):
            """Stage i of the loss split and of the logits split hold the same tensors."""
            bad = []
            for i in range(n):
                ml = torch.jit.load(os.path.join(dl, f"stage_{i:03d}.pt"))
                mg = torch.jit.load(os.path.join(dg, f"stage_{i:03d}.pt"))
                pl = {k[2:] if k.startswith("m.") else k: v for k, v in ml.state_dict().items()}
                pg = dict(mg.state_dict())
                if set(pl) != set(pg):
                    bad.append(f"stage {i}: names differ {sorted(set(pl) ^ set(pg))[:4]}")
                elif not all(torch.equal(pl[k], pg[k]) for k in pl):
                    bad.append(f"stage {i}: values differ")
            return bad, sum(len(list(torch.jit.load(os.path.join(dl, f"stage_{i:03d}.pt")).parameters()))
                            for i in range(n))

        def compile_train(d, recompute):
            """pipecut compile --train into d; None, or why it failed (the command and its error)."""
            cmd = [pipecut, "compile", d, "--train", "--recompute", recompute, "--cache", cache, "--json"]
            if a.compile_jobs:
                cmd += ["-j", str(a.compile_jobs)]
            t = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True)
            secs = time.perf_counter() - t
            if p.returncode != 0:
                return f"exit {p.returncode}: {' '.join(shlex.quote(x) for x in cmd)}\n{(p.stderr or p.stdout)[-2000:]}"
            try:
                j = json.loads(p.stdout[p.stdout.find("{"):])
                hows = [s["how"] for s in j["stages"]]
                detail = ", ".join(f"{h} {hows.count(h)}" for h in sorted(set(hows)))
            except (ValueError, KeyError):
                detail = "?"
            print(f"    pipecut compile --train --recompute {recompute} {os.path.basename(d)}: {secs:.1f}s "
                  f"(stages {detail})", flush=True)
            return None

        pairs, made = {}, {}
        need_aoti = "aoti" in a.formats
        compile_failed = {}  # (pair, side) -> why
        for name in a.schedules:
            procs = a.stages if name == "1f1b" else a.zb_procs
            n = procs * PAIRS[name][2]
            if name == "1f1b" and a.microbatches < n:
                raise SystemExit(f"Schedule1F1B needs -m >= stages ({n})")
            key = f"s{n}"
            dl, dg = os.path.join(work, f"loss_{key}"), os.path.join(work, f"logits_{key}")
            drc = dl + "_recompute_all"
            if n not in made:
                made[n] = {"aoti": None, "aoti-rc": None}
                spec, _ = split(loss_pt2, "m.model.layers", n, dl, "torchscript,pt2" if need_aoti else "torchscript")
                split(logits_pt2, "model.layers", n, dg, "torchscript")
                bad, nparams = same_params(dl, dg, n)
                print(f"  {n}-stage splits: spec {spec['split_points']}; loss split vs logits split: "
                      f"{'same parameters in every stage (' + str(nparams) + ' tensors, bitwise equal)' if not bad else 'DIFFERENT: ' + '; '.join(bad)}")
                if bad:
                    raise SystemExit("the two splits do not hold the same weights")
            if name in rc_pairs and not os.path.exists(os.path.join(drc, "manifest.json")):
                if os.path.exists(drc):
                    shutil.rmtree(drc)
                shutil.copytree(dl, drc)  # the same split, before any compile
            if need_aoti and made[n]["aoti"] is None:
                made[n]["aoti"] = compile_train(dl, "none") or ""
            if name in rc_pairs and made[n]["aoti-rc"] is None:
                made[n]["aoti-rc"] = compile_train(drc, "all") or ""
            sides = [f for f in a.formats] + (["aoti-rc"] if name in rc_pairs else []) + ["torch"]
            for side in ("aoti", "aoti-rc"):
                if side in sides and made[n][side]:
                    compile_failed[(name, side)] = "pipecut compile failed: " + made[n][side]
                    print(f"  {name}: {SIDE_NAME[side]} not run: {compile_failed[(name, side)]}", flush=True)
            pairs[name] = {"procs": procs, "stages": n, "loss_dir": dl, "logits_dir": dg, "rc_dir": drc,
                           "sides": sides}

        # -- runs ---------------------------------------------------------------------------
        res = {(p, s): [] for p in pairs for s in pairs[p]["sides"]}
        failed = dict(compile_failed)  # (pair, side) -> why
        torch_kind = {p: a.torch_stages for p in pairs}
        print()
        print("steady samples/s per run (measured steps only; side order rotates each repeat):")
        for r in range(a.repeats):
            for name, info in pairs.items():
                line = []
                for side in U.rotated(info["sides"], r):
                    if (name, side) in failed:
                        continue
                    j = None
                    if side != "torch":
                        d = info["rc_dir"] if side == "aoti-rc" else info["loss_dir"]
                        fmt = "aoti" if side.startswith("aoti") else "torchscript"
                        trace = os.path.join(work, f"trace_{name}_{side}.json")
                        try:
                            j = run_pipecut(d, info["procs"], PAIRS[name][0], data, trace, fmt,
                                            os.path.join(work, f"rss_{name}_{side}"))
                        except (RuntimeError, OSError, KeyError, ValueError) as e:
                            failed[(name, side)] = pipecut_failure(str(e))
                            print(f"  {name}: {SIDE_NAME[side]} failed: {failed[(name, side)]}", flush=True)
                            continue
                    else:
                        while j is None:
                            try:
                                j = run_torch(info["logits_dir"], info["procs"], name, data, state, torch_kind[name])
                            except RuntimeError as e:
                                why = failure_reason(str(e))
                                if torch_kind[name] == "script":
                                    print(f"  torch {PAIRS[name][1]} with TorchScript stages failed: {why}\n"
                                          f"  -> falling back to eager stage modules", flush=True)
                                    torch_kind[name] = "eager"
                                    continue
                                print(f"  torch {PAIRS[name][1]} failed: {why}", flush=True)
                                failed[(name, side)] = why
                                break
                        if j is None:
                            continue
                    res[(name, side)].append(j)
                    line.append(f"{side} {a.steps * B / (j['steady_ms'] / 1e3):7.1f}")
                print(f"  repeat {r + 1}, {name} ({info['stages']} stages / {info['procs']} processes): "
                      + "   ".join(line), flush=True)

        # -- report -------------------------------------------------------------------------
        print()
        summary = []
        loss_fail = []
        for name, info in pairs.items():
            sides = [s for s in info["sides"] if res[(name, s)]]
            title = (f"{name}: pipecut-run --schedule {PAIRS[name][0]} vs torch {PAIRS[name][1]} "
                     f"({info['stages']} stages on {info['procs']} processes"
                     + (f", torch on {torch_kind[name]} stage modules" if res[(name, 'torch')] else "") + ")")
            print(title)
            for s in info["sides"]:
                if (name, s) in failed:
                    print(f"  {SIDE_NAME[s]} did not run: {failed[(name, s)]}")
            if not sides:
                print()
                continue
            first = {s: res[(name, s)][0]["losses"] for s in sides}
            K_ = len(next(iter(first.values())))
            checks = [(x, y, tol) for x, y, tol in LOSS_CHECKS if x in first and y in first
                      and not (x == "aoti" and y == "torch" and "torchscript" in first)]
            rows = []
            for k in range(K_):
                row = [k] + [f"{first[s][k]:.6f}" for s in sides]
                row += [f"{abs(first[x][k] - first[y][k]) / abs(first[y][k]):.2e}" for x, y, _ in checks]
                rows.append(row)
            print(U.table(["step"] + [f"{s} loss" for s in sides] + [f"{x}/{y} rel" for x, y, _ in checks], rows))
            for x, y, tol in checks:
                rel = max(abs(u - v) / abs(v) for u, v in zip(first[x], first[y]))
                ok = rel <= tol
                what = "identical" if rel == 0 else f"max relative difference {rel:.2e}"
                print(f"  losses {SIDE_NAME[x]} vs {SIDE_NAME[y]}: {what} (tolerance {tol:g}: "
                      f"{'ok' if ok else 'EXCEEDED'})")
                if not ok:
                    loss_fail.append(f"{name}: {x} vs {y} {rel:.2e} > {tol:g}")
            for s in sides:
                if s == "torch":
                    continue
                drift = max(max(abs(u - v) for u, v in zip(j["losses"], first[s])) for j in res[(name, s)])
                if drift:
                    print(f"  {SIDE_NAME[s]} losses differ across repeats (max abs diff {drift:.2e})")
            headers = ["side", "samples/s med", "min", "max", "ms/step", "all steps samples/s",
                       "per-rank compute ms/step", "bubble run", "bubble steady", "peak RSS MiB per rank"]
            rows = []
            thr = {}
            for side in sides:
                js = res[(name, side)]
                t = [a.steps * B / (j["steady_ms"] / 1e3) for j in js]
                allt = [K * B / (j["all_ms"] / 1e3) for j in js]
                thr[side] = U.med(t)
                busy = [U.med([j["busy_ms_per_rank"][r] for j in js]) / a.steps for r in range(info["procs"])]
                rss = [U.med([j["rss_kb_per_rank"][r] for j in js]) for r in range(info["procs"])]
                pipe = side != "torch"
                rows.append([side, f"{U.med(t):.1f}", f"{min(t):.1f}", f"{max(t):.1f}",
                             f"{U.med([j['steady_ms'] for j in js]) / a.steps:.1f}", f"{U.med(allt):.1f}",
                             " / ".join(f"{b:.1f}" for b in busy),
                             f"{U.med([j['bubble'] for j in js]):.3f}" if pipe else "-",
                             f"{U.med([j['bubble_steady'] for j in js]):.3f}" if pipe else "-",
                             " / ".join(f"{mib(x):.0f}" for x in rss)])
            print(U.table(headers, rows))
            for side in sides:
                if side.startswith("aoti"):
                    j0 = res[(name, side)][0]
                    print(f"  {side}: stage formats {j0['formats']}; saved_activation_bytes per stage "
                          + " / ".join("-" if b is None else str(b) for b in j0["saved"])
                          + "; held_for_weights_bytes " + " / ".join("-" if b is None else str(b) for b in j0["for_w"]))
            if res[(name, "torch")]:
                notes = sorted(set(sum((j.get("notes", []) for j in res[(name, "torch")]), [])))
                for n_ in notes:
                    print(f"  torch note: {n_}")
            info["thr"] = thr
            print()
        print("per-rank compute ms/step: torch = forward_one_chunk + loss_fn + backward(_weight)_one_chunk; pipecut = "
              "the compute spans of its actions in the trace (waits excluded). bubble run: the report's "
              "bubble.measured (all steps, optimizer steps included); bubble steady: 1 - the trace's compute / "
              "(ranks x measured steps' time). Peak RSS: /usr/bin/time -f %M of each pipecut-run, ru_maxrss of "
              "each torch worker")
        print(f"load average at end {U.loadavg()}; total time {time.perf_counter() - t_start:.0f}s")
        print()

        # -- summary ------------------------------------------------------------------------
        def goal(x, g):
            return f"goal >= {g}: {'met' if x >= g else 'NOT met'}"

        for name, info in pairs.items():
            thr = info.get("thr", {})
            label = f"{PAIRS[name][0]} vs {PAIRS[name][1]}, {info['stages']} stages / {info['procs']} processes"
            if "torchscript" in info["sides"]:
                if "torchscript" in thr and "torch" in thr:
                    print(f"ratio pipecut-run / torch steady training throughput = {thr['torchscript'] / thr['torch']:.2f}"
                          f"   [TorchScript stages; {label}]")
                else:
                    print(f"ratio pipecut-run / torch steady training throughput: n/a (a side failed)   [{label}]")
            if "aoti" in info["sides"]:
                g = f"; {goal(thr['aoti'] / thr['torch'], GOAL_VS_TORCH)}" if name == "1f1b" and "aoti" in thr and "torch" in thr else ""
                if "aoti" in thr and "torch" in thr:
                    print(f"ratio compiled pipecut-run / torch steady training throughput = "
                          f"{thr['aoti'] / thr['torch']:.2f} ({thr['aoti']:.1f} vs {thr['torch']:.1f} samples/s{g})"
                          f"   [{label}]")
                else:
                    print(f"ratio compiled pipecut-run / torch: n/a (a side failed)   [{label}]")
                if "torchscript" in info["sides"]:
                    if "aoti" in thr and "torchscript" in thr:
                        x = thr["aoti"] / thr["torchscript"]
                        print(f"ratio compiled / TorchScript pipecut-run steady training throughput = {x:.2f} "
                              f"({thr['aoti']:.1f} vs {thr['torchscript']:.1f} samples/s; {goal(x, GOAL_VS_SCRIPT)})"
                              f"   [--schedule {PAIRS[name][0]}, {info['stages']} stages / {info['procs']} processes]")
                    else:
                        print(f"ratio compiled / TorchScript pipecut-run: n/a (a side failed)   [{PAIRS[name][0]}]")
        for name, info in pairs.items():
            sched = PAIRS[name][0]
            formula, ideal = ideal_bubble(sched, info["procs"], a.microbatches)
            got = [s for s in ("aoti", "torchscript") if res.get((name, s))]
            if formula is None or not got:
                continue
            parts = []
            for s in got:
                js = res[(name, s)]
                parts.append(f"{'compiled' if s == 'aoti' else 'TorchScript'} {U.med([j['bubble'] for j in js]):.3f} "
                             f"(measured steps {U.med([j['bubble_steady'] for j in js]):.3f}, uneven-ranks floor "
                             f"{U.med([j['floor_steady'] for j in js]):.3f})")
            print(f"bubble {sched} ({info['stages']} stages on p = {info['procs']} ranks, m = {a.microbatches}): ideal "
                  f"{formula} = {ideal:.3f}; measured (report, all steps) " + "; ".join(parts))
        for name in rc_pairs:
            info = pairs[name]
            no, rc = res.get((name, "aoti")), res.get((name, "aoti-rc"))
            if not no or not rc:
                print(f"recompute all vs none [{PAIRS[name][0]}]: n/a (a side failed)")
                continue
            s0, s1 = no[0]["saved"], rc[0]["saved"]
            per = " / ".join(f"{x} -> {y}" + (f" ({y / x:.3g}x)" if x and y is not None else "") for x, y in zip(s0, s1))
            r0 = [U.med([j["rss_kb_per_rank"][r] for j in no]) for r in range(info["procs"])]
            r1 = [U.med([j["rss_kb_per_rank"][r] for j in rc]) for r in range(info["procs"])]
            rel = max(abs(u - v) / abs(v) for u, v in zip(rc[0]["losses"], no[0]["losses"]))
            thr = info["thr"]
            print(f"recompute all vs none [{PAIRS[name][0]}, {info['stages']} stages, compiled]: saved_activation_bytes "
                  f"per stage {per}; peak RSS per rank " + " / ".join(f"{mib(x):.0f} -> {mib(y):.0f} MiB"
                                                                     for x, y in zip(r0, r1))
                  + f"; throughput {thr['aoti-rc'] / thr['aoti']:.2f}x; losses max relative difference {rel:.2e} "
                  f"(within 1e-6: {'yes' if rel <= 1e-6 else 'NO'})")
            # gpipe holds every micro-batch's activations until the backward: where recompute pays most.
            try:
                g = [run_pipecut(d, info["procs"], "gpipe", data, os.path.join(work, f"trace_gpipe_{tag}.json"), "aoti",
                                 os.path.join(work, f"rss_gpipe_{tag}"))
                     for d, tag in ((info["loss_dir"], "none"), (info["rc_dir"], "all"))]
            except (RuntimeError, OSError, KeyError, ValueError) as e:
                print(f"recompute all vs none [gpipe]: failed: {pipecut_failure(str(e))}")
                continue
            ms = [x["steady_ms"] / a.steps for x in g]
            print(f"recompute all vs none [gpipe, every micro-batch held until the backward, one run each]: peak RSS "
                  f"per rank " + " / ".join(f"{mib(x):.0f} -> {mib(y):.0f} MiB"
                                            for x, y in zip(g[0]["rss_kb_per_rank"], g[1]["rss_kb_per_rank"]))
                  + f" (M = {a.microbatches} micro-batches x saved_activation_bytes per stage "
                  + " / ".join(f"{x} -> {y}" for x, y in zip(g[0]["saved"], g[1]["saved"]))
                  + f"); {ms[0]:.1f} -> {ms[1]:.1f} ms/step")
        bad_sides = sorted(f"{n}/{s}" for n, s in failed)
        print(f"loss checks: {'all passed' if not loss_fail else 'FAILED: ' + '; '.join(loss_fail)}"
              + (f"; sides that did not run: {', '.join(bad_sides)}" if bad_sides else ""))
        return 1 if loss_fail or failed else 0


if __name__ == "__main__":
    sys.exit(main())
