"""Seeded dropout (scripts/train_compile.py's SeededRandom, what compiled
training's programs run) vs Inductor's own random dropout, each compiled by
AOTInductor for the CPU, side by side in one run.

    python bench/seeded_dropout.py [--elements 16777216] [--p 0.1] [--repeats 7]

Both packages compute dropout(x, p) for a float32 x of --elements values,
with one OpenMP thread. Inductor's side draws from the process's generator
(Philox per element); the seeded side hashes (seed, stream, index) with
int64 arithmetic, so that a backward program can rebuild the mask from the
seed. Prints the median of --repeats calls of each, interleaved, the ratio,
and the kept fraction of each (about 1 - p).
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import train_compile  # noqa: E402


class Inductor(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return torch.nn.functional.dropout(x, self.p, True)


class Seeded(torch.nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x, seed):
        return train_compile.SeededRandom(seed).rewrite(torch.ops.aten.dropout.default, (x, self.p, True), {})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--elements", type=int, default=1 << 24)
    ap.add_argument("--p", type=float, default=0.1)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    torch.set_num_threads(1)
    x = torch.randn(a.elements)
    seed = torch.tensor(1234, dtype=torch.int64)
    sides = {"inductor": (Inductor(a.p), (x,)), "seeded": (Seeded(a.p), (x, seed))}
    runs, kept = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (module, args) in sides.items():
            path = os.path.join(tmp, f"{name}.pt2")
            with torch.no_grad():
                torch._inductor.aoti_compile_and_package(torch.export.export(module, args), package_path=path)
            runs[name] = (torch._inductor.aoti_load_package(path), args)
            runs[name][0](*args)  # warm
        times = {name: [] for name in runs}
        for _ in range(a.repeats):
            for name, (run, args) in runs.items():
                t = time.perf_counter()
                out = run(*args)
                times[name].append(time.perf_counter() - t)
                out = out[0] if isinstance(out, (list, tuple)) else out
                kept[name] = (out != 0).float().mean().item()
    ms = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    for name in runs:
        print(f"{name:8s} {ms[name]:8.1f} ms  kept {kept[name]:.4f}")
    print(f"seeded / inductor time: {ms['seeded'] / ms['inductor']:.2f} "
          f"(seeded {ms['inductor'] / ms['seeded']:.2f}x faster), {a.elements} elements, p={a.p}, "
          f"torch {torch.__version__}")


if __name__ == "__main__":
    main()
