#!/usr/bin/env python3
"""Benchmark: pipecut-run throughput of an S-stage split against the unsplit
program, both on ONE device (the CPU), same micro-batches, same inputs.

    stages_vs_whole.py [--stages 2,4] [--threads 2,1] [--repeats 5]
                       [--warmup 3] [--iterations 20] [--layers 8] [--hidden 128]
                       [--omp-wait-policy PASSIVE] [--keep DIR]

Question answered: what does cutting a program into pipeline stages cost (or
gain) when every stage runs on the same device?  On one device a pipeline
cannot add compute; any gain can only come from overlapping the stages'
threads, any loss comes from the runtime (queues between stage threads,
per-stage call overhead, cache effects of more, smaller programs).

Model: a tiny Llama (transformers LlamaForCausalLM subclass returning the
logits, as in scripts/fixtures/generate.py), --layers decoder layers, random
weights, float32, exported once with torch.export with a fixed batch size =
the micro-batch size (static shapes).  The batch of mb_size x M rows is
written once to a safetensors file (input.0) together with eager reference
logits (output.0), and every run reads that same file.

Sides, all split from the same .pt2 by `pipecut split`:
  1-stage   spec {"split_points": {}}: the whole program as ONE stage
  S-stage   cut after every layers/S decoder layers (model.layers.K: END), so
            each boundary carries only the hidden state.

Each side is one `pipecut-run DIR --inputs FILE -m M --devices cpu
--threads T --warmup W --iterations N --json --quiet` process; the number
read is its `throughput_samples_per_s` (samples / wall time of the N
measured passes; process start, loading and warm-up are excluded).  The
runs are interleaved (1, 2, 4, then 2, 4, 1, ...: the order rotates every
repeat so that no side always runs first or last) and medians over --repeats
are reported, with min/max.  Correctness is checked once per split first
(`--check` against the eager logits, atol 1e-4).

What "same device" means here: one pipecut-run process, every stage on
`--devices cpu`, on this machine's CPU cores (2 on the machine this was
written on).  The S stages are S threads inside that process, each running
its stage's TorchScript forward, handing tensors to the next stage through
in-process queues (no copies, no sockets).  The 1-stage side has one such
thread.

Caveats:
  * --threads T is the intra-op thread count.  ATen's parallel backend here is
    OpenMP, where every thread that calls into ATen gets its own OpenMP team,
    so an S-stage run has S stage threads x T intra-op threads (S*T OS
    threads doing work) against T for the 1-stage run.  Stages therefore
    overlap on the cores: with T=1 and S=2 the split uses both cores and the
    whole program only one, so the ratio can exceed 1 (up to ~2 on 2 cores).
    With T=2 both sides can use both cores, and the S-stage side
    oversubscribes them (S*2 threads on 2 cores).  Columns "threads" list
    S x T.  Neither setting isolates "pipeline runtime overhead" perfectly;
    T=1 is the "one core per stage thread" view, T=2 the "whole machine for
    each side" view.
  * --pin 0 confines every run (both sides) to one core.  With --threads 1
    that is the strictest "same device": the S stage threads time-share one
    core, no stage can borrow an idle core, so the ratio shows the runtime's
    own cost (hand-offs, context switches, cache effects) and cannot exceed
    1 by more than noise.
  * OpenMP threads spin while waiting (libgomp default).  With more threads
    than free cores (other processes on the machine, or S x T > cores) a
    team can stall: on the shared 2-core machine this was written on, the
    1-stage --threads 2 run (and plain PyTorch calling the same TorchScript
    file from Python with 2 threads) swung between ~800 and under 10
    samples/s from run to run, depending on what else was running.  So
    --threads 2 numbers are only meaningful on an otherwise idle machine;
    --threads 1 runs are the stable ones.  --omp-wait-policy PASSIVE (sets
    OMP_WAIT_POLICY for both sides) avoids the collapse but adds a wake-up
    cost to every parallel region.  Default: unset.
  * Anything else running on the machine (the load average is printed before
    and after) disturbs both sides; interleaving spreads that over both, the
    min/max columns show how much it moved.
  * pipecut-run's GPipe schedule streams all N x M micro-batches of the
    measured passes without draining between passes; this is the same for
    both sides.
"""

import argparse
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in bench/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pipeline_bench_util as U  # noqa: E402


def ints(text):
    return [int(x) for x in text.split(",") if x.strip()]


def load_stages(d):
    import torch

    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    mods = []
    for st in manifest["stages"]:
        pt = [x["path"] for x in st["files"] if x["format"] == "torchscript"][0]
        mods.append((torch.jit.load(os.path.join(d, pt), map_location="cpu").eval(), st["inputs"]))
    return mods


def run_sequential(mods, mb):
    """One micro-batch through the stage programs, one after another, in this thread."""
    outs = {}
    for i, (m, inputs) in enumerate(mods):
        args = []
        for inp in inputs:
            src = inp["source"]
            args.append(mb[src["user_input"]] if "user_input" in src
                        else outs[(src["stage_output"]["stage"], src["stage_output"]["output"])])
        for j, t in enumerate(m(*args)):
            outs[(i, j)] = t
    return outs


def sequential_baseline(a, configs, dirs, ref, cpus):
    """samples/s of the stage programs called back to back from Python, 1 thread, no pipeline runtime."""
    import torch

    old = os.sched_getaffinity(0)
    if cpus:
        os.sched_setaffinity(0, cpus)
    old_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        batch = U.read_ref(ref)[0]
        mbs = list(zip(*[t.split(a.mb_size) for t in batch]))
        mods = {s: load_stages(dirs[s]) for s in configs}
        res = {s: [] for s in configs}
        with torch.inference_mode():
            for s in configs:
                for _ in range(a.warmup):
                    for mb in mbs:
                        run_sequential(mods[s], mb)
            for r in range(a.repeats):
                k = r % len(configs)
                for s in configs[k:] + configs[:k]:
                    t0 = time.perf_counter()
                    for _ in range(a.iterations):
                        for mb in mbs:
                            run_sequential(mods[s], mb)
                    res[s].append(a.iterations * a.mb_size * len(mbs) / (time.perf_counter() - t0))
        return res
    finally:
        torch.set_num_threads(old_threads)
        os.sched_setaffinity(0, old)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--stages", type=ints, default=[2, 4], help="stage counts to compare with 1 (default 2,4)")
    ap.add_argument("--threads", type=ints, default=[2, 1], help="--threads values, each run for both sides (default 2,1)")
    ap.add_argument("--repeats", type=int, default=5, help="interleaved repeats per side (default %(default)s)")
    ap.add_argument("--warmup", type=int, default=3, help="pipecut-run --warmup (default %(default)s)")
    ap.add_argument("--iterations", type=int, default=20, help="pipecut-run --iterations (default %(default)s)")
    ap.add_argument("--schedule", default="gpipe", help="pipecut-run --schedule (default %(default)s)")
    ap.add_argument("--omp-wait-policy", default="", help="set OMP_WAIT_POLICY for every run (default: leave unset)")
    ap.add_argument("--pin", type=ints, default=[],
                    help="CPU ids (e.g. 0) every pipecut-run process is confined to (sched_setaffinity); default: all")
    ap.add_argument("--no-sequential", action="store_true",
                    help="skip the in-process baseline (stage programs called back to back from Python, 1 thread)")
    ap.add_argument("--pipecut", default=U.DEFAULT_PIPECUT)
    ap.add_argument("--runner", default=U.DEFAULT_RUNNER)
    ap.add_argument("--keep", default="", help="keep artifacts in DIR (default: a temporary directory, removed)")
    U.add_model_args(ap)
    a = ap.parse_args()

    t_start = time.perf_counter()
    cpus = set(a.pin) or None
    env = dict(os.environ)
    if a.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = a.omp_wait_policy
    for k in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)  # single process, no c10d

    print("stages_vs_whole: pipecut-run, S-stage split vs whole program (1 stage), same device (cpu)")
    print(f"model: {U.describe_model(a)}")
    print(f"machine: {os.cpu_count()} CPU cores; load average at start {U.loadavg()}; "
          f"OMP_WAIT_POLICY={env.get('OMP_WAIT_POLICY', '(unset)')}; "
          f"CPUs used: {','.join(map(str, sorted(cpus))) + ' (pinned)' if cpus else 'all'}")
    print(f"runs: -m {a.microbatches} --schedule {a.schedule} --warmup {a.warmup} --iterations {a.iterations} "
          f"--devices cpu, threads {a.threads}, {a.repeats} interleaved repeats")

    with U.WorkDir(a.keep, "pipecut_stages_vs_whole_") as work:
        pt2, ref, tm = U.prepare_model(a, work)
        print(f"artifacts: {work}   (build {tm['build_s']:.1f}s, export {tm['export_s']:.1f}s)")
        configs = [1] + [s for s in a.stages if s != 1]
        dirs = {}
        for s in configs:
            d = os.path.join(work, f"split_{s}")
            spec, manifest = U.split(a.pipecut, pt2, s, a.layers, d)
            dirs[s] = d
            print(f"  {s}-stage: spec {spec['split_points'] or '{}'}; inputs {U.boundary_summary(manifest)}")

        # Correctness, once per split, cheap.
        for s in configs:
            U.run_json([a.runner, dirs[s], "--inputs", ref, "-m", str(a.microbatches), "--devices", "cpu",
                        "--threads", "1", "--check", ref, "--atol", "1e-4", "--json", "--quiet"], env=env)
        print(f"check: every split reproduces the eager logits (atol 1e-4) with -m {a.microbatches}")

        def run(s, t):
            j = U.run_json([a.runner, dirs[s], "--inputs", ref, "-m", str(a.microbatches), "--schedule", a.schedule,
                            "--devices", "cpu", "--threads", str(t), "--warmup", str(a.warmup),
                            "--iterations", str(a.iterations), "--json", "--quiet"], env=env, cpus=cpus)
            return j

        res = {(s, t): [] for s in configs for t in a.threads}
        print()
        print("raw samples/s per repeat (run order rotates each repeat):")
        for r in range(a.repeats):
            for t in a.threads:
                order = U.rotated(configs, r)
                line = []
                for s in order:
                    j = run(s, t)
                    res[(s, t)].append(j)
                    line.append(f"{s}-stage {j['throughput_samples_per_s']:7.1f}")
                print(f"  repeat {r + 1} threads {t}: " + "   ".join(line), flush=True)

        print()
        headers = ["side", "--threads", "work threads", "samples/s med", "min", "max", "wall ms med",
                   "bubble meas", "bubble theory", "ratio vs 1-stage", "paired ratio med"]
        rows = []
        ratios = {}
        for t in a.threads:
            base = [j["throughput_samples_per_s"] for j in res[(1, t)]]
            for s in configs:
                js = res[(s, t)]
                thr = [j["throughput_samples_per_s"] for j in js]
                ratio = U.med(thr) / U.med(base)
                paired = U.med([x / y for x, y in zip(thr, base)])
                ratios[(s, t)] = (ratio, paired)
                rows.append([f"{s}-stage", t, f"{s}x{t}", f"{U.med(thr):.1f}", f"{min(thr):.1f}", f"{max(thr):.1f}",
                             f"{U.med([j['wall_ms'] for j in js]):.1f}",
                             f"{U.med([j['bubble']['measured'] for j in js]):.3f}",
                             f"{js[0]['bubble']['theoretical']:.3f}",
                             "1.00" if s == 1 else f"{ratio:.2f}", "1.00" if s == 1 else f"{paired:.2f}"])
        print(U.table(headers, rows))
        print("(ratio vs 1-stage = median S-stage / median 1-stage; paired ratio = median over repeats of the")
        print(" ratio of runs made back to back; work threads = stage threads x intra-op threads)")
        if not a.no_sequential:
            seq = sequential_baseline(a, configs, dirs, ref, cpus)
            print()
            print("baseline without pipecut-run: the same stage files called one after another for each micro-batch")
            print("from Python (torch.jit.load, 1 thread, same CPUs), i.e. what the split programs cost by themselves:")
            base = seq[1]
            rows = [[f"{s}-stage", f"{U.med(seq[s]):.1f}", f"{min(seq[s]):.1f}", f"{max(seq[s]):.1f}",
                     f"{U.med(seq[s]) / U.med(base):.2f}"] for s in configs]
            print(U.table(["programs", "samples/s med", "min", "max", "ratio vs 1-stage"], rows))
        print(f"load average at end {U.loadavg()}; total time {time.perf_counter() - t_start:.0f}s")
        if len(a.threads) > 1:
            best = {s: max(a.threads, key=lambda t: U.med([j["throughput_samples_per_s"] for j in res[(s, t)]]))
                    for s in configs}
            bm = {s: U.med([j["throughput_samples_per_s"] for j in res[(s, best[s])]]) for s in configs}
            print("best --threads per side: " + "; ".join(
                f"{s}-stage {bm[s]:.1f} (T={best[s]}, {bm[s] / bm[1]:.2f}x 1-stage)" for s in configs))
        print()
        for t in a.threads:
            for s in configs:
                if s == 1:
                    continue
                print(f"ratio {s}-stage / 1-stage throughput = {ratios[(s, t)][0]:.2f} "
                      f"(goal: within 3%, i.e. >= 0.97)   [--threads {t}]")


if __name__ == "__main__":
    main()
