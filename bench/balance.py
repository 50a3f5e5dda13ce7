#!/usr/bin/env python3
"""Benchmark: a time-balanced 2-stage split against the even split by layers,
each run as a 2-process pipeline over Gloo (one rank per stage, one core and
one intra-op thread per rank).

    balance.py [--repeat 5] [--iterations 10] [--layers 12] [--hidden 256]
               [--vocab 32000] [--seq 32] [--mb-size 4] [-m 8] [--keep DIR]

Model: a tiny Llama whose vocabulary outweighs its layers (vocab 32000,
hidden 256: the LM head's matmul costs about as much as 10 decoder layers),
random weights, float32, exported once with the micro-batch as its batch.

Sides, both split from the same .pt2:
  even   model.layers.(L/2-1): END, torchtitan's default (embedding with the
         first half of the layers, the head with the second)
  time   pipecut split --stages 2 --balance time --cost PROFILE.json, where
         PROFILE.json is `pipecut-run WHOLE --profile` of the one-stage split
         on one thread (measured in this run, before the sides)
Also printed, not raced: the cuts --balance params and --balance flops choose.

Each side: two pipecut-run processes (RANK 0, 1 on loopback Gloo), rank r
pinned to core r, --threads 1, -m M micro-batches, --warmup 1 --iterations N,
outputs checked against eager PyTorch (--check) on every run.  The figure is
rank 0's samples/s; the sides alternate, medians over --repeat.  The GPipe
bubble measured (1 - busy / (stages x wall)) is printed beside the theory
((p-1)/(m+p-1)), which assumes equal stages: an unbalanced pipeline idles
its light stage on top of the fill and drain.

Goal (issue 10): time / even >= 1.2.  Exit 1 when missed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pipeline_bench_util as util  # noqa: E402


def launch_pair(runner, split_dir, ref, a, port):
    procs = []
    for rank in (0, 1):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1")
        cmd = [runner, split_dir, "--inputs", ref, "--check", ref, "--atol", "1e-4", "-m", str(a.microbatches),
               "--threads", "1", "--warmup", "1", "--iterations", str(a.iterations), "--json", "-q", "--timeout", "120"]
        cpus = {rank % os.cpu_count()}
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      preexec_fn=lambda c=cpus: os.sched_setaffinity(0, c)))
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (o, e) in zip(procs, outs):
        if p.returncode != 0:
            raise SystemExit(f"{split_dir}: rank exited {p.returncode}\n{o[-2000:]}\n{e[-2000:]}")
    text = outs[0][0]
    return json.JSONDecoder().raw_decode(text[text.find("{"):])[0]


def balanced_split(pipecut, pt2, by, out_dir, extra=()):
    p = subprocess.run([pipecut, "split", pt2, "--stages", "2", "--balance", by, *extra, "-o", out_dir, "-q"],
                       capture_output=True, text=True, check=True)
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    util.add_model_args(ap, layers=12, hidden=256, seq=32, mb_size=4, microbatches=8)
    ap.set_defaults(vocab=32000)
    util.add_run_args(ap)
    a = ap.parse_args()
    print(util.describe_model(a))
    print(f"2 ranks over Gloo on loopback, rank r pinned to core r, 1 intra-op thread each; load {util.loadavg()}")
    with util.WorkDir(a.keep, "pipecut-balance-") as work:
        pt2, ref, _ = util.prepare_model(a, work)
        # The profile: the one-stage split on one micro-batch (the exported
        # shape) of random token ids, one thread on one core, as each rank runs.
        whole = os.path.join(work, "whole")
        util.split(a.pipecut, pt2, 1, a.layers, whole)
        profile = os.path.join(work, "profile.json")
        subprocess.run([a.runner, whole, "--profile", profile, "--random-inputs", "--int-high", str(a.vocab), "--threads", "1", "--iterations", "10",
                        "--warmup", "2", "-q"], check=True, stdout=subprocess.DEVNULL,
                       preexec_fn=lambda: os.sched_setaffinity(0, {0}))
        sides = {}
        even_dir = os.path.join(work, "even")
        spec, _ = util.split(a.pipecut, pt2, 2, a.layers, even_dir)
        sides["even"] = (even_dir, json.dumps(spec["split_points"]))
        for by in ("time", "params", "flops"):
            d = os.path.join(work, by)
            text = balanced_split(a.pipecut, pt2, by, d, ("--cost", profile) if by == "time" else ())
            m = re.search(r"spec: (.*)", text)
            sides[by] = (d, json.loads(m.group(1))["split_points"] if m else "?")
        for name, (d, spec) in sides.items():
            print(f"  {name:6s} cut: {spec}")
        raced = ["even", "time"]
        results = {k: [] for k in raced}
        port = util.free_port()
        for rep in range(a.repeat):
            for name in util.rotated(raced, rep):
                port += 1
                results[name].append(launch_pair(a.runner, sides[name][0], ref, a, port))
        rows = []
        for name in raced:
            rs = results[name]
            tput = [r["throughput_samples_per_s"] for r in rs]
            bub = [r["bubble"]["measured"] for r in rs]
            busy = [[s["busy_ms"] for s in r["stage_stats"]] for r in rs]
            rows.append([name, f"{util.med(tput):.1f}", f"{min(tput):.1f}-{max(tput):.1f}", f"{util.med(bub):.3f}",
                         f"{rs[0]['bubble']['theoretical']:.3f}",
                         " / ".join(f"{util.med([b[i] for b in busy]):.0f}" for i in range(len(busy[0])))])
        print(util.table(["side", "samples/s", "range", "bubble", "theory", "busy ms per stage"], rows))
        ratio = util.med([r["throughput_samples_per_s"] for r in results["time"]]) / util.med(
            [r["throughput_samples_per_s"] for r in results["even"]])
        verdict = "met" if ratio >= 1.2 else "MISSED"
        print(f"time-balanced / even-by-layers throughput: {ratio:.2f}x (goal >= 1.2x: {verdict})")
        return 0 if ratio >= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
