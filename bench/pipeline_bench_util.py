"""Shared helpers for the pipecut-run throughput benchmarks in bench/.

Used by stages_vs_whole.py and run_vs_torch_pipelining.py (not a benchmark
itself).  Builds a tiny Llama from a config with random weights (nothing is
downloaded), exports it with static shapes, cuts it with `pipecut split`,
writes reference input/output files, runs pipecut-run and summarises numbers.
"""

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))

from refio import read_ref, write_ref  # noqa: E402
from tiny_llama import llama_config, logits_model  # noqa: E402

DEFAULT_PIPECUT = os.path.join(REPO_ROOT, "build", "tools", "pipecut")
DEFAULT_RUNNER = os.path.join(REPO_ROOT, "build", "tools", "pipecut-run")


def add_model_args(ap, layers=8, hidden=128, seq=32, mb_size=4, microbatches=8):
    g = ap.add_argument_group("model (tiny Llama, random weights, static shapes)")
    g.add_argument("--layers", type=int, default=layers, help="decoder layers (default %(default)s)")
    g.add_argument("--hidden", type=int, default=hidden, help="hidden size (default %(default)s)")
    g.add_argument("--intermediate", type=int, default=0, help="MLP size (default 2 x hidden)")
    g.add_argument("--heads", type=int, default=4, help="attention heads (default %(default)s)")
    g.add_argument("--kv-heads", type=int, default=2, help="key/value heads (default %(default)s)")
    g.add_argument("--vocab", type=int, default=256, help="vocabulary (default %(default)s)")
    g.add_argument("--seq", type=int, default=seq, help="sequence length (default %(default)s)")
    g.add_argument("--mb-size", type=int, default=mb_size,
                   help="micro-batch size = the exported (static) batch size (default %(default)s)")
    g.add_argument("-m", "--microbatches", type=int, default=microbatches,
                   help="micro-batches per batch (default %(default)s)")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="weights' dtype (default %(default)s)")


def describe_model(a):
    inter = a.intermediate or 2 * a.hidden
    return (f"tiny Llama: {a.layers} layers, hidden {a.hidden}, intermediate {inter}, heads {a.heads}/{a.kv_heads} kv, "
            f"vocab {a.vocab}, seq {a.seq}, {a.dtype}, random weights; micro-batch {a.mb_size} x {a.seq} int64 ids, "
            f"M = {a.microbatches} -> batch {a.mb_size * a.microbatches}")


def build_llama(a):
    """The tiny Llama of scripts/tiny_llama.py, sized by the command line."""
    import torch

    cfg = llama_config(layers=a.layers, hidden=a.hidden, intermediate=a.intermediate or 2 * a.hidden,
                       heads=a.heads, kv_heads=a.kv_heads, vocab=a.vocab, max_positions=max(64, a.seq))
    torch.manual_seed(a.seed)
    return logits_model(cfg).eval().to(getattr(torch, a.dtype))


def prepare_model(a, work):
    """Export the model (batch = micro-batch size) and write the batch inputs plus
    eager reference outputs (computed micro-batch by micro-batch).

    Returns (pt2_path, ref_path, timings dict)."""
    import torch

    t0 = time.perf_counter()
    model = build_llama(a)
    gen = torch.Generator().manual_seed(a.seed + 1)
    batch = torch.randint(0, a.vocab, (a.mb_size * a.microbatches, a.seq), dtype=torch.int64, generator=gen)
    example = batch[: a.mb_size].clone()
    t1 = time.perf_counter()
    ep = torch.export.export(model, (example,))
    pt2 = os.path.join(work, "llama.pt2")
    torch.export.save(ep, pt2)
    t2 = time.perf_counter()
    with torch.no_grad():
        outs = [model(mb) for mb in batch.split(a.mb_size)]
    ref = os.path.join(work, "inputs.safetensors")
    write_ref(ref, [batch], [torch.cat(outs)], {"model": "bench tiny llama"})
    return pt2, ref, {"build_s": t1 - t0, "export_s": t2 - t1}


def layer_spec(layers, stages):
    """split_points ending each of `stages` equal runs of decoder layers."""
    if stages <= 1:
        return {"split_points": {}}
    if layers % stages:
        raise SystemExit(f"--layers {layers} is not a multiple of {stages} stages")
    per = layers // stages
    return {"split_points": {f"model.layers.{per * k - 1}": "END" for k in range(1, stages)}}


def split(pipecut, pt2, stages, layers, out_dir, extra=(), balance=None):
    """Equal runs of decoder layers, or with `balance` ("flops", "params")
    pipecut split --stages N --balance that; returns the spec and the manifest."""
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    if balance and stages > 1:
        how = ["--stages", str(stages), "--balance", balance]
    else:
        spec_path = out_dir + ".spec.json"
        with open(spec_path, "w") as f:
            json.dump(layer_spec(layers, stages), f)
        how = ["--spec", spec_path]
    subprocess.run([pipecut, "split", pt2, *how, "-o", out_dir, *extra], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out_dir, "manifest.json")) as f:
        manifest = json.load(f)
    spec = json.loads(manifest["split_spec"]) if balance and stages > 1 else layer_spec(layers, stages)
    if len(manifest["stages"]) != stages:
        raise SystemExit(f"{out_dir}: expected {stages} stages, manifest has {len(manifest['stages'])}")
    return spec, manifest


def boundary_summary(manifest):
    """'s0<-user0 | s1<-s0.o0 ...' : what each stage takes (checks the hidden-state-only boundary)."""
    parts = []
    for st in manifest["stages"]:
        srcs = []
        for inp in st["inputs"]:
            src = inp.get("source", {})
            if "user_input" in src:
                srcs.append(f"user{src['user_input']}")
            else:
                so = src["stage_output"]
                srcs.append(f"s{so['stage']}.o{so['output']}")
        parts.append(f"s{st['index']}<-{','.join(srcs)}")
    return " | ".join(parts)


def add_run_args(ap, repeat=5, iterations=10):
    """The options every pipecut-run bench takes: repeats, measured passes, binaries, a kept work dir."""
    ap.add_argument("--repeat", type=int, default=repeat)
    ap.add_argument("--iterations", type=int, default=iterations)
    ap.add_argument("--pipecut", default=DEFAULT_PIPECUT)
    ap.add_argument("--runner", default=DEFAULT_RUNNER)
    ap.add_argument("--keep", metavar="DIR")


def launcher_env(threads):
    """The environment for torchrun launches of both sides: no rendezvous variables inherited from a
    surrounding launch, `threads` intra-op threads, Gloo on loopback, scripts/ and bench/ importable."""
    env = dict(os.environ)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO_ROOT, "scripts"), BENCH_DIR] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_json(cmd, env=None, timeout=600, cpus=None):
    """Run a command printing one JSON document (pipecut-run --json); return it parsed.
    cpus: optional set of CPU ids the command (and its threads/children) may run on."""
    pre = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=pre)
    if p.returncode != 0:
        raise RuntimeError(f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    text = p.stdout
    start = text.find("{")
    if start < 0:
        raise RuntimeError(f"no JSON in output of {' '.join(cmd)}:\n{text[-3000:]}\n{p.stderr[-3000:]}")
    return json.JSONDecoder().raw_decode(text[start:])[0]


def rotated(items, repeat):
    """The run order for a repeat: rotated by one each time, so every side runs first, middle and last."""
    k = repeat % len(items)
    return items[k:] + items[:k]


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def loadavg():
    try:
        return "%.2f %.2f %.2f" % os.getloadavg()
    except OSError:
        return "n/a"


def table(headers, rows):
    cols = [[str(h)] + [str(r[i]) for r in rows] for i, h in enumerate(headers)]
    widths = [max(len(c) for c in col) for col in cols]
    line = "  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))
    out = [line, "  ".join("-" * w for w in widths)]
    for r in rows:
        out.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return "\n".join(out)


class WorkDir:
    """A temporary directory, or --keep DIR (created, kept)."""

    def __init__(self, keep, prefix):
        self.keep = keep
        self.prefix = prefix

    def __enter__(self):
        import tempfile

        if self.keep:
            os.makedirs(self.keep, exist_ok=True)
            self.path = os.path.abspath(self.keep)
        else:
            self.path = tempfile.mkdtemp(prefix=self.prefix)
        return self.path

    def __exit__(self, *exc):
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
        return False
