"""The ceiling on issue 37's CPU goal: FLOPs per sample of the model
aoti_vs_torchscript.py runs, and the one-thread rate of its matrix products
at that model's own shapes, through ATen's BLAS (MKL in the pip wheel:
torch.nn.functional.linear, what PyTorch runs) and through oneDNN
(torch.ops.mkldnn._linear_pointwise, what pipecut-run's `--cpu-matmul
onednn`, the default, runs for TorchScript stages on a CPU). A pipeline's
samples/s times the FLOPs per sample, divided by the cores, set beside these
rates, says how much of a stage could still be saved: nothing fusion does
makes the matrix products themselves faster. MKL chooses its code path by
CPU vendor, oneDNN by instruction set: the two columns differ most on AMD
CPUs with AVX-512.

  python bench/gemm_ceiling.py [--hidden 512] [--layers 8] [--seq 128] [--repeat 5]
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--intermediate", type=int, default=0, help="default 2 x hidden, as the bench model")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--seq", type=int, default=128, help="rows of each product: the micro-batch's tokens")
    ap.add_argument("--repeat", type=int, default=5, help="best of this many timings of 50 calls")
    a = ap.parse_args()
    torch.set_num_threads(1)
    h, inter, s = a.hidden, a.intermediate or 2 * a.hidden, a.seq
    hd = h // a.heads
    proj = [(h, h), (h, a.kv_heads * hd), (h, a.kv_heads * hd), (h, h), (h, inter), (h, inter), (inter, h)]
    linear = sum(2 * s * k * n for k, n in proj) * a.layers
    attention = 2 * 2 * s * s * hd * a.heads * a.layers  # QK^T and PV, counted in full
    head = 2 * s * h * a.vocab
    total = linear + attention + head
    print(f"GFLOP per sample of {s} tokens: linear {linear / 1e9:.3f}, attention {attention / 1e9:.3f}, "
          f"lm_head {head / 1e9:.3f}, total {total / 1e9:.3f}")

    def rate(m, k, n, onednn):
        x, w = torch.randn(m, k), torch.randn(n, k)
        if onednn:
            f = lambda: torch.ops.mkldnn._linear_pointwise(x, w, None, "none", [], "")
        else:
            f = lambda: torch.nn.functional.linear(x, w)
        for _ in range(5):
            f()
        best = float("inf")
        for _ in range(a.repeat):
            t = time.perf_counter()
            for _ in range(50):
                f()
            best = min(best, (time.perf_counter() - t) / 50)
        return 2 * m * k * n / best / 1e9

    print("GFLOP/s, 1 thread:       BLAS (MKL)   oneDNN")
    for m, k, n in [(s, k, n) for k, n in sorted(set(proj))] + [(s, h, a.vocab), (2048, 2048, 2048)]:
        print(f"  {m:4d} x {k:4d} -> {n:5d}: {rate(m, k, n, False):10.1f} {rate(m, k, n, True):9.1f}")
    print(f"samples/s x {total / 1e9:.3f} GFLOP / cores = GFLOP/s per core a pipeline reaches")


if __name__ == "__main__":
    main()
