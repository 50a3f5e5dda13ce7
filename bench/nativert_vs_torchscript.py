#!/usr/bin/env python3
"""Benchmark: the same stages run as TorchScript (.pt) and through LibTorch's
NativeRT (.pt2, `pipecut-run --stage-format pt2`), side by side in one run.

    nativert_vs_torchscript.py [--repeat 5] [--iterations 10] [--stages 4] [--layers 8]
                               [--hidden 128] [--vocab 4000] [--seq 32] [--mb-size 4] [-m 8]

Model: the bench tiny Llama (random weights, float32), exported with the
micro-batch as its batch, split into --stages stages by layers with
`--inline-grad-regions` (NativeRT refuses the rotary embedding's no_grad
region; the TorchScript files are the same either way).

Each side: one pipecut-run process, every stage on the CPU with one intra-op
thread each (stage threads run side by side on the cores), GPipe, M
micro-batches, one warm-up pass and --iterations measured ones, outputs
checked against the unsplit TorchScript program bit for bit (--exact) on
every run. Both sides and the oracle run the linear layers through ATen's
BLAS (`--cpu-matmul blas`, what NativeRT runs): this compares the two
executors, not the kernels. Sides alternate; medians over --repeat. Printed: samples/s and
each stage's busy ms per micro-batch for both formats, and their ratios
(NativeRT time / TorchScript time: below 1 means NativeRT is faster). No
goal: issue 9 asks for the figure.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pipeline_bench_util as util  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    util.add_model_args(ap, layers=8, hidden=128, seq=32, mb_size=4, microbatches=8)
    ap.add_argument("--stages", type=int, default=4)
    util.add_run_args(ap)
    a = ap.parse_args()
    print(util.describe_model(a))
    print(f"{a.stages} stages in one process, 1 intra-op thread per stage, GPipe, M={a.microbatches}; "
          f"load {util.loadavg()}")
    with util.WorkDir(a.keep, "pipecut-nativert-") as work:
        pt2, ref, _ = util.prepare_model(a, work)
        whole = os.path.join(work, "whole")
        util.split(a.pipecut, pt2, 1, a.layers, whole)
        oracle = os.path.join(work, "whole.out.safetensors")
        util.run_json([a.runner, whole, "--inputs", ref, "-m", str(a.microbatches), "--output", oracle, "--json", "-q",
                       "--cpu-matmul", "blas"])
        d = os.path.join(work, "split")
        util.split(a.pipecut, pt2, a.stages, a.layers, d, ("--inline-grad-regions",))
        sides = {"torchscript": [], "pt2": []}
        for rep in range(a.repeat):
            for fmt in util.rotated(list(sides), rep):
                r = util.run_json([a.runner, d, "--stage-format", fmt, "--cpu-matmul", "blas", "--inputs", ref,
                                   "--check", oracle, "--exact",
                                   "-m", str(a.microbatches), "--threads", "1", "--warmup", "1",
                                   "--iterations", str(a.iterations), "--json", "-q"])
                if not r["check"]["ok"]:
                    raise SystemExit(f"{fmt}: outputs differ from the unsplit program: {r['check']}")
                sides[fmt].append(r)
        mbs = (a.iterations + 1) * a.microbatches  # busy time covers the warm-up pass too
        rows, busy = [], {}
        for fmt, rs in sides.items():
            busy[fmt] = [util.med([r["stage_stats"][s]["busy_ms"] for r in rs]) / mbs for s in range(a.stages)]
            tput = [r["throughput_samples_per_s"] for r in rs]
            rows.append([fmt, f"{util.med(tput):.1f}", f"{min(tput):.1f}-{max(tput):.1f}",
                         " / ".join(f"{b:.2f}" for b in busy[fmt])])
        print(util.table(["stages", "samples/s", "range", "busy ms per micro-batch, per stage"], rows))
        ratios = [p / t for p, t in zip(busy["pt2"], busy["torchscript"])]
        print("NativeRT / TorchScript busy time per stage: " + " / ".join(f"{x:.2f}" for x in ratios))
        tp = util.med([r["throughput_samples_per_s"] for r in sides["pt2"]])
        tt = util.med([r["throughput_samples_per_s"] for r in sides["torchscript"]])
        print(f"throughput NativeRT / TorchScript: {tp / tt:.2f}x (outputs bit for bit the unsplit program's on every run)")
        return 0


if __name__ == "__main__":
    sys.exit(main())
