#!/usr/bin/env python3
"""Benchmark: `pipecut-run --train` against torch.distributed.pipelining
training (Schedule1F1B, and ScheduleInterleavedZeroBubble against pipecut's
zb1p), same weights, same data, same SGD, same process count, Gloo on
loopback, one intra-op thread per process.

    train_vs_torch_pipelining.py [--stages 2] [--schedules 1f1b,zb]
                                 [--zb-procs 2] [-m 8] [--steps 8]
                                 [--warmup 2] [--repeats 3] [--threads 1]
                                 [--layers 8] [--hidden 128] [--vocab 4000]
                                 [--seq 64] [--mb-size 2] [--pin]
                                 [--torch-stages script|eager]
                                 [--torch-jit-optimize] [--keep DIR]

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

Loss check: the per-step mean micro-batch losses of both sides (pipecut's
report `losses`; torch's last stage's `losses` list, averaged), from the
first repeat, side by side, with the max relative difference.

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
    # Collect (outside the timed region): the losses from the last stage's rank, busy times from all.
    got = [None] * world
    dist.all_gather_object(got, {"losses": losses if has_last else None, "busy": busy, "notes": notes})
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

    env = U.launcher_env(a.threads)

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
    print(f"torch side: {a.torch_stages} stage modules; TorchScript graph executor optimization "
          f"{'ON' if a.torch_jit_optimize else 'off (as in pipecut-run)'}; step(return_outputs=False)")

    def torchrun_cmd(n, extra):
        return [torchrun, "--nproc-per-node", str(n), "--master-addr", "127.0.0.1",
                "--master-port", str(U.free_port())] + extra

    ncpu = os.cpu_count() or 1

    def run_pipecut(d, procs, schedule, data, trace):
        cmd = [runner, d, "--train", "--data", data, "--steps", str(K), "-m", str(a.microbatches),
               "--schedule", schedule, "--optimizer", "sgd", "--lr", repr(a.lr), "--momentum", repr(a.momentum),
               "--threads", str(a.threads), "--json", "-q", "--trace", trace]
        if a.pin:
            cmd = ["sh", "-c", f'exec taskset -c $((LOCAL_RANK % {ncpu})) "$0" "$@"'] + cmd
        j = U.run_json(torchrun_cmd(procs, ["--no-python"] + cmd), env=env)
        start_w, spans = pipecut_trace_times(trace, procs, K, a.warmup)
        return {"losses": j["losses"], "steady_ms": sum(j["step_ms"][a.warmup:]), "all_ms": j["wall_ms"],
                "busy_ms_per_rank": spans, "report": j}

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
        def split(pt2, prefix, n, out):
            spec = spec_for(prefix, a.layers, n)
            spec_path = out + ".spec.json"
            with open(spec_path, "w") as f:
                json.dump(spec, f)
            if os.path.exists(out):
                shutil.rmtree(out)
            subprocess.run([pipecut, "split", pt2, "--spec", spec_path, "-o", out, "--format", "torchscript"],
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

        pairs, made = {}, set()
        for name in a.schedules:
            procs = a.stages if name == "1f1b" else a.zb_procs
            n = procs * PAIRS[name][2]
            if name == "1f1b" and a.microbatches < n:
                raise SystemExit(f"Schedule1F1B needs -m >= stages ({n})")
            key = f"s{n}"
            dl, dg = os.path.join(work, f"loss_{key}"), os.path.join(work, f"logits_{key}")
            if n not in made:
                made.add(n)
                spec, _ = split(loss_pt2, "m.model.layers", n, dl)
                split(logits_pt2, "model.layers", n, dg)
                bad, nparams = same_params(dl, dg, n)
                print(f"  {n}-stage splits: spec {spec['split_points']}; loss split vs logits split: "
                      f"{'same parameters in every stage (' + str(nparams) + ' tensors, bitwise equal)' if not bad else 'DIFFERENT: ' + '; '.join(bad)}")
                if bad:
                    raise SystemExit("the two splits do not hold the same weights")
            pairs[name] = {"procs": procs, "stages": n, "loss_dir": dl, "logits_dir": dg}

        # -- runs ---------------------------------------------------------------------------
        sides = ["pipecut", "torch"]
        res = {(p, s): [] for p in pairs for s in sides}
        failed = {}
        torch_kind = {p: a.torch_stages for p in pairs}
        print()
        print("steady samples/s per run (measured steps only; side order rotates each repeat):")
        for r in range(a.repeats):
            for name, info in pairs.items():
                line = []
                for side in U.rotated(sides, r):
                    if side == "pipecut":
                        trace = os.path.join(work, f"trace_{name}.json")
                        j = run_pipecut(info["loss_dir"], info["procs"], PAIRS[name][0], data, trace)
                    else:
                        if name in failed:
                            continue
                        j = None
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
                                failed[name] = why
                                break
                        if j is None:
                            continue
                    res[(name, side)].append(j)
                    line.append(f"{side} {a.steps * B / (j['steady_ms'] / 1e3):7.1f}")
                print(f"  repeat {r + 1}, {name} ({info['stages']} stages / {info['procs']} processes): "
                      + "   ".join(line), flush=True)

        # -- report -------------------------------------------------------------------------
        print()
        for name, info in pairs.items():
            pc, tp = res[(name, "pipecut")], res[(name, "torch")]
            title = (f"{name}: pipecut-run --schedule {PAIRS[name][0]} vs torch {PAIRS[name][1]} "
                     f"({info['stages']} stages on {info['procs']} processes"
                     + (f", torch on {torch_kind[name]} stage modules" if tp else "") + ")")
            print(title)
            if not tp:
                print(f"  torch side did not run: {failed.get(name, '?')}")
            lp = pc[0]["losses"]
            lt = tp[0]["losses"] if tp else [float("nan")] * len(lp)
            rows = []
            for k, (x, y) in enumerate(zip(lp, lt)):
                rows.append([k, f"{x:.6f}", f"{y:.6f}", f"{abs(x - y) / abs(y):.2e}" if tp else "-"])
            print(U.table(["step", "pipecut loss", "torch loss", "rel diff"], rows))
            if tp:
                maxrel = max(abs(x - y) / abs(y) for x, y in zip(lp, lt))
                drift = max(max(abs(u - v) for u, v in zip(j["losses"], lp)) for j in pc)
                print(f"  max relative loss difference {maxrel:.2e}; pipecut losses identical across repeats: "
                      f"{'yes' if drift == 0 else f'no (max abs diff {drift:.2e})'}")
            headers = ["side", "samples/s med", "min", "max", "steps/s", "ms/step", "all steps samples/s",
                       "per-rank ms/step"]
            rows = []
            thr = {}
            for side, js in (("pipecut", pc), ("torch", tp)):
                if not js:
                    continue
                t = [a.steps * B / (j["steady_ms"] / 1e3) for j in js]
                allt = [K * B / (j["all_ms"] / 1e3) for j in js]
                thr[side] = U.med(t)
                busy = [U.med([j["busy_ms_per_rank"][r] for j in js]) / a.steps for r in range(info["procs"])]
                rows.append([side, f"{U.med(t):.1f}", f"{min(t):.1f}", f"{max(t):.1f}", f"{U.med(t) / B:.2f}",
                             f"{U.med([j['steady_ms'] for j in js]) / a.steps:.1f}", f"{U.med(allt):.1f}",
                             " / ".join(f"{b:.1f}" for b in busy)])
            print(U.table(headers, rows))
            if tp:
                notes = sorted(set(sum((j.get("notes", []) for j in tp), [])))
                for n_ in notes:
                    print(f"  torch note: {n_}")
            info["ratio"] = thr["pipecut"] / thr["torch"] if "torch" in thr else None
            print()
        print("per-rank ms/step: torch = forward_one_chunk + loss_fn + backward(_weight)_one_chunk (compute only); "
              "pipecut = the compute spans of its actions in the trace (waits excluded)")
        print(f"load average at end {U.loadavg()}; total time {time.perf_counter() - t_start:.0f}s")
        print()
        for name, info in pairs.items():
            label = f"{PAIRS[name][0]} vs {PAIRS[name][1]}, {info['stages']} stages / {info['procs']} processes"
            if info["ratio"] is None:
                print(f"ratio pipecut-run / torch steady training throughput: n/a (torch failed)   [{label}]")
            else:
                print(f"ratio pipecut-run / torch steady training throughput = {info['ratio']:.2f}   [{label}]")


if __name__ == "__main__":
    sys.exit(main())
