#!/usr/bin/env python3
"""Benchmark: pipecut-run against torch.distributed.pipelining's ScheduleGPipe,
both running THE SAME TorchScript stage files, in the same number of
processes (one stage per process) over Gloo on loopback.

    run_vs_torch_pipelining.py [--stages 2,4] [--repeats 3] [--warmup 3]
                               [--iterations 20] [--threads 1] [--layers 8]
                               [--hidden 128] [--static-shapes] [--control]
                               [--keep DIR]

Model: a tiny Llama (transformers LlamaForCausalLM subclass returning the
logits, as in scripts/fixtures/generate.py), --layers decoder layers, random
weights, float32, exported once with torch.export with batch = micro-batch
size (static shapes) and cut by `pipecut split` after every layers/S decoder
layers, so stage 0 takes the int64 input ids and every later stage takes
only the float hidden state; each stage_NNN.pt returns a 1-tuple.

A (pipecut-run):
    torchrun --no-python --nproc-per-node S --master-addr 127.0.0.1
             --master-port P pipecut-run DIR --inputs FILE -m M --devices cpu
             --threads T --warmup W --iterations N --json --quiet
  number read: `throughput_samples_per_s` from rank 0's report (samples / wall
  time of the N measured passes, process start and warm-up excluded).

B (torch.distributed.pipelining), this file in --worker mode under
    torchrun --nproc-per-node S --master-addr 127.0.0.1 --master-port P
  every rank: dist.init_process_group("gloo"); torch.set_num_threads(T);
  m = torch.jit.load(DIR/stage_<rank>.pt); a small nn.Module wrapper calls m
  and returns the single tensor of its 1-tuple; PipelineStage(wrapper, rank,
  S, torch.device("cpu")); ScheduleGPipe(stage, n_microbatches=M) (no loss
  function: forward only).  W warm-up schedule.step() calls, then
  barrier, t0, N x step(batch on rank 0 / nothing elsewhere), barrier, t1;
  rank 0 prints N x batch / (t1 - t0).  The whole loop runs under
  torch.inference_mode() (pipecut-run's stage threads use c10::InferenceMode);
  if the schedule rejects that, it falls back to torch.no_grad() and says so.

PipelineStage and int64 inputs: without input_args/output_args PipelineStage
infers shapes at run time (stage 0 runs its module on zeros shaped like the
first micro-batch and sends the output's meta tensors to the next stage,
and so on), which copes with int64 ids; the script uses that by default.
--static-shapes instead passes input_args/output_args, the documented way
to skip that inference: meta tensors with the shapes and dtypes from the
split's manifest.json (int64 [mb, seq] ids for stage 0, float [mb, seq,
hidden] elsewhere).

Same things on both sides: stage files, batch (read from the same
safetensors file, input.0), M, W, N, process count, Gloo over 127.0.0.1,
OMP_NUM_THREADS=T in the environment and T intra-op threads.

Equality check: in the first repeat, pipecut-run also writes --output (the
merged outputs of one pass over the batch) and the torch side's last rank
saves what its first step() returned (the merged last-stage outputs of one
pass, before timing starts); both are compared with each other (exact, and
max abs diff) and with the eager model's logits; a mismatch beyond 1e-4
stops the script.

Fairness caveats (the main ones are also printed at the end):
  * all S processes share this machine's cores (2 here); with S=4 there are
    more single-threaded processes than cores, so the OS scheduler, not the
    pipeline, decides much of the outcome.  The same holds for both sides.
  * pipecut-run's GPipe streams all N x M micro-batches of the measured
    passes without draining the pipeline between passes (one fill, one
    drain); ScheduleGPipe.step() fills and drains every pass (N fills and
    drains, bubble (S-1)/(M+S-1) each, 1/9 for S=2, M=8; 3/11 for S=4).
    That is a real property of the runner, not of the per-micro-batch
    machinery.  --control adds a row running the torch side as ONE step()
    of N x M micro-batches, which removes the per-pass drain from the torch
    side (at the cost of ScheduleGPipe holding all N x M outputs).
  * pipecut-run sends the last stage's outputs (the logits) back to rank 0,
    where it merges them; ScheduleGPipe leaves them on the last rank.  That
    extra transfer counts against pipecut-run.
  * pipecut-run runs each stage on its own thread (rank 0 has one more,
    collecting the outputs from the last rank), so receiving the next
    micro-batch can overlap compute; the torch side runs everything on the
    Python main thread with batched isend/irecv (sends are waited at the end
    of the step, receives before each micro-batch).
  * Other work on the machine (load average printed before and after) hits
    both sides; runs are interleaved and medians reported, min/max show the
    spread.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def ints(text):
    return [int(x) for x in text.split(",") if x.strip()]


# ---------------------------------------------------------------------------
# Worker: one rank of the torch.distributed.pipelining side (run by torchrun)
# ---------------------------------------------------------------------------

def worker(a):
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

    from refio import read_ref

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(os.path.join(a.dir, "manifest.json")) as f:
        manifest = json.load(f)
    stages = manifest["stages"]
    if len(stages) != world:
        raise SystemExit(f"{len(stages)} stages but world size {world}")
    st = stages[rank]
    if len(st["inputs"]) != 1 or len(st["outputs"]) != 1:
        raise SystemExit(f"stage {rank}: expected 1 input and 1 output, got {len(st['inputs'])}/{len(st['outputs'])}")
    pt = [f["path"] for f in st["files"] if f["format"] == "torchscript"][0]
    script = torch.jit.load(os.path.join(a.dir, pt), map_location="cpu")
    script.eval()

    class Stage(nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, x):
            return self.m(x)[0]

    wrapped = Stage(script)

    def meta(t):
        dims = [int(d["size"]) for d in t["tensor"]["shape"]]
        dtype = {"int64": torch.int64, "float32": torch.float32}[t["tensor"]["dtype"]]
        return torch.empty(dims, dtype=dtype, device="meta")

    kw = {}
    if a.static_shapes:
        kw = {"input_args": (meta(st["inputs"][0]),), "output_args": (meta(st["outputs"][0]),)}
    stage = PipelineStage(wrapped, rank, world, torch.device("cpu"), **kw)

    batch = read_ref(a.inputs)[0][0] if rank == 0 else None
    M = a.microbatches

    def make_schedule(n_mb):
        return ScheduleGPipe(stage, n_microbatches=n_mb)

    grad_mode = "inference_mode"

    def step(sched, x):
        return sched.step(x) if rank == 0 else sched.step()

    def run_ctx():
        return torch.inference_mode() if grad_mode == "inference_mode" else torch.no_grad()

    sched = make_schedule(M)
    # First step: shape inference + the equality check output.
    try:
        with run_ctx():
            out = step(sched, batch)
    except Exception as e:  # noqa: BLE001 -- report and fall back
        if rank == 0:
            print(f"note: step() under inference_mode failed ({type(e).__name__}: {str(e).splitlines()[0][:120]}); "
                  "using no_grad", flush=True)
        grad_mode = "no_grad"
        # The stage may be half-initialised; build a fresh one.
        stage = PipelineStage(wrapped, rank, world, torch.device("cpu"), **kw)
        sched = make_schedule(M)
        with run_ctx():
            out = step(sched, batch)
    if a.save_output and rank == world - 1:
        torch.save(out.detach().clone(), a.save_output)

    with run_ctx():
        for _ in range(max(0, a.warmup - 1)):
            step(sched, batch)
        if a.one_step:
            # Control: one step over iterations x M micro-batches (no drain between passes).
            big = batch.repeat(a.iterations, 1) if rank == 0 else None
            stage2 = PipelineStage(wrapped, rank, world, torch.device("cpu"), **kw)
            sched_big = ScheduleGPipe(stage2, n_microbatches=M * a.iterations)
            step(sched_big, big)  # its own shape inference / warm-up
            dist.barrier()
            t0 = time.perf_counter()
            step(sched_big, big)
            dist.barrier()
            t1 = time.perf_counter()
        else:
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(a.iterations):
                step(sched, batch)
            dist.barrier()
            t1 = time.perf_counter()
    if rank == 0:
        samples = a.iterations * int(batch.shape[0])
        print(json.dumps({"throughput_samples_per_s": samples / (t1 - t0), "wall_ms": (t1 - t0) * 1e3,
                          "samples": samples, "grad_mode": grad_mode, "world_size": world}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--inputs", help=argparse.SUPPRESS)
    ap.add_argument("--save-output", default="", help=argparse.SUPPRESS)
    ap.add_argument("--one-step", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--stages", type=ints, default=[2, 4], help="stage (= process) counts (default 2,4)")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats per side (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up passes (default %(default)s)")
    ap.add_argument("--iterations", type=int, default=20, help="measured passes (default %(default)s)")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per process, both sides (default %(default)s)")
    ap.add_argument("--static-shapes", action="store_true",
                    help="give PipelineStage input_args/output_args (from the manifest) instead of runtime shape inference")
    ap.add_argument("--control", action="store_true",
                    help="also time the torch side as ONE step of iterations x M micro-batches (no per-pass drain)")
    ap.add_argument("--pipecut", default=None)
    ap.add_argument("--runner", default=None)
    ap.add_argument("--keep", default="", help="keep artifacts in DIR (default: a temporary directory, removed)")
    import pipeline_bench_util as U

    U.add_model_args(ap)
    a = ap.parse_args()
    if a.worker:
        return worker(a)

    pipecut = a.pipecut or U.DEFAULT_PIPECUT
    runner = a.runner or U.DEFAULT_RUNNER
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    t_start = time.perf_counter()

    env = U.launcher_env(a.threads)

    import torch

    print("run_vs_torch_pipelining: pipecut-run vs torch.distributed.pipelining ScheduleGPipe, same TorchScript stages")
    print(f"model: {U.describe_model(a)}")
    print(f"torch {torch.__version__}; machine: {os.cpu_count()} CPU cores; load average at start {U.loadavg()}")
    print(f"both sides: S processes (1 stage each), Gloo on 127.0.0.1, OMP_NUM_THREADS={a.threads}, "
          f"intra-op threads {a.threads}, -m {a.microbatches}, warmup {a.warmup}, iterations {a.iterations}, "
          f"{a.repeats} interleaved repeats")
    print(f"torch side: PipelineStage shapes by {'input_args/output_args (manifest)' if a.static_shapes else 'runtime shape inference'}")

    def torchrun_cmd(n, extra):
        return [torchrun, "--nproc-per-node", str(n), "--master-addr", "127.0.0.1",
                "--master-port", str(U.free_port())] + extra

    def run_pipecut(d, n, ref, output=None, iterations=None, warmup=None):
        cmd = torchrun_cmd(n, ["--no-python", runner, d, "--inputs", ref, "-m", str(a.microbatches),
                               "--devices", "cpu", "--threads", str(a.threads),
                               "--warmup", str(a.warmup if warmup is None else warmup),
                               "--iterations", str(a.iterations if iterations is None else iterations),
                               "--json", "--quiet"] + (["--output", output] if output else []))
        return U.run_json(cmd, env=env)

    def run_torch(d, n, ref, save=None, one_step=False, iterations=None, warmup=None):
        cmd = torchrun_cmd(n, [os.path.abspath(__file__), "--worker", "--dir", d, "--inputs", ref,
                               "-m", str(a.microbatches), "--threads", str(a.threads),
                               "--warmup", str(a.warmup if warmup is None else warmup),
                               "--iterations", str(a.iterations if iterations is None else iterations)]
                         + (["--save-output", save] if save else []) + (["--one-step"] if one_step else [])
                         + (["--static-shapes"] if a.static_shapes else []))
        return U.run_json(cmd, env=env)

    with U.WorkDir(a.keep, "pipecut_run_vs_torch_pp_") as work:
        pt2, ref, tm = U.prepare_model(a, work)
        print(f"artifacts: {work}   (build {tm['build_s']:.1f}s, export {tm['export_s']:.1f}s)")
        from refio import read_ref

        eager = read_ref(ref)[1][0]
        dirs = {}
        for s in a.stages:
            d = os.path.join(work, f"split_{s}")
            spec, manifest = U.split(pipecut, pt2, s, a.layers, d)
            dirs[s] = d
            print(f"  {s} stages: spec {spec['split_points']}; inputs {U.boundary_summary(manifest)}")

        sides = ["pipecut-run", "torch ScheduleGPipe"] + (["torch, 1 step of N*M mbs"] if a.control else [])
        res = {(s, side): [] for s in a.stages for side in sides}
        grad_modes = {}
        checks = []

        def check(s, out_pc, out_tp):
            # Both sides' outputs of one pass over the batch (the same in every pass).
            pc = read_ref(out_pc)[1][0]
            tp = torch.load(out_tp)
            same = pc.shape == tp.shape and torch.equal(pc, tp)
            diff = (pc - tp).abs().max().item() if pc.shape == tp.shape else float("inf")
            checks.append(f"  {s} stages: pipecut-run output.0 {list(pc.shape)} vs torch pipeline output {list(tp.shape)}: "
                          f"{'bit-identical' if same else 'DIFFERENT'} (max |diff| {diff:.3g}); "
                          f"max |diff| vs eager model: pipecut-run {(pc - eager).abs().max().item():.3g}, "
                          f"torch {(tp - eager).abs().max().item():.3g}")
            print(checks[-1], flush=True)
            if not torch.allclose(pc, tp, atol=1e-4, rtol=0):
                raise SystemExit("outputs differ: the two sides do not compute the same thing")

        print()
        print("raw samples/s per repeat (side order rotates each repeat; repeat 1 also saves both outputs for the check):")
        for r in range(a.repeats):
            for s in a.stages:
                order = U.rotated(sides, r)
                line = []
                out_pc = os.path.join(work, f"pipecut_out_{s}.safetensors") if r == 0 else None
                out_tp = os.path.join(work, f"torch_out_{s}.pt") if r == 0 else None
                for side in order:
                    if side == "pipecut-run":
                        j = run_pipecut(dirs[s], s, ref, output=out_pc)
                    elif side == "torch ScheduleGPipe":
                        j = run_torch(dirs[s], s, ref, save=out_tp)
                        grad_modes[s] = j["grad_mode"]
                    else:
                        j = run_torch(dirs[s], s, ref, one_step=True)
                    res[(s, side)].append(j)
                    line.append(f"{side} {j['throughput_samples_per_s']:7.1f}")
                print(f"  repeat {r + 1}, {s} stages/processes: " + "   ".join(line), flush=True)
                if r == 0:
                    check(s, out_pc, out_tp)
        print()
        headers = ["stages=procs", "side", "samples/s med", "min", "max", "wall ms med", "pipecut-run / side"]
        rows = []
        ratios = {}
        for s in a.stages:
            pc_med = U.med([j["throughput_samples_per_s"] for j in res[(s, "pipecut-run")]])
            for side in sides:
                thr = [j["throughput_samples_per_s"] for j in res[(s, side)]]
                ratio = pc_med / U.med(thr)
                ratios[(s, side)] = ratio
                rows.append([s, side, f"{U.med(thr):.1f}", f"{min(thr):.1f}", f"{max(thr):.1f}",
                             f"{U.med([j['wall_ms'] for j in res[(s, side)]]):.1f}", f"{ratio:.2f}"])
        print(U.table(headers, rows))
        pc_j = {s: res[(s, "pipecut-run")] for s in a.stages}
        for s in a.stages:
            js = pc_j[s]
            print(f"pipecut-run {s} stages: bubble measured {U.med([j['bubble']['measured'] for j in js]):.3f} "
                  f"(theoretical per batch {js[0]['bubble']['theoretical']:.3f}); backend {js[0].get('backend')}; "
                  f"world {js[0].get('world_size')}")
        print("equality check (outputs of one pass over the batch, saved during repeat 1):")
        print("\n".join(checks))
        print(f"torch side ran under {', '.join(sorted(set(grad_modes.values())))}; "
              f"load average at end {U.loadavg()}; total time {time.perf_counter() - t_start:.0f}s")
        print()
        print(f"notes: all {max(a.stages)} processes of a run share {os.cpu_count()} cores (with more processes than cores the OS")
        print("  scheduler decides much); pipecut-run streams all N x M micro-batches without draining between passes,")
        print("  ScheduleGPipe drains every step (see --control); pipecut-run also ships the logits back to rank 0.")
        print()
        for s in a.stages:
            print(f"ratio pipecut-run / torch ScheduleGPipe throughput = {ratios[(s, 'torch ScheduleGPipe')]:.2f} "
                  f"(goal: >= 1.2)   [{s} stages / {s} processes]")
            if a.control:
                print(f"  control: pipecut-run / torch 1-step-of-{a.iterations * a.microbatches}-micro-batches "
                      f"= {ratios[(s, 'torch, 1 step of N*M mbs')]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
