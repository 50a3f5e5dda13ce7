#!/usr/bin/env python3
"""Benchmark: weights from the model's own checkpoint at the sizes users work
at (issue 57), each figure measured side by side in this run.

    weights.py [--pipecut PATH] [--work DIR] [--rounds 3] [--part split|path|both]
               [--today-layers 16] [--path-layers 32]

Checkpoints are written once into --work (default ~/.cache/pipecut/bench-weights)
and reused: Llama-2-7B's shapes (hidden 4096, intermediate 11008, 32 heads,
vocab 32000), bfloat16, N(0, 0.02) weights drawn with a fixed seed, saved as
transformers saves a sharded checkpoint (model-0000i-of-0000n.safetensors and
model.safetensors.index.json, config.json), tensor by tensor: the model is
never built with its weights.

  split  The 4-layer cut (2.1 GB): its graph exported on the meta device
         (scripts/export_meta.py), then `pipecut split --weights CKPT
         --weights buffers.safetensors --stages 4 --balance params` against
         `cp -r CKPT` (each side after a `sync`, then `sync`: the time includes
         the writes reaching the disk; the page cache holds the checkpoint for
         both). --format pt2 alone and both formats, alternated with the cp
         --rounds times; the per-round ratios' median is the figure (goal:
         <= 1.5x cp). Peak anonymous memory (RssAnon, polled every 5 ms)
         against the largest stage file (goal: <= 1.1x).
  path   The whole path at 32 layers (13.5 GB): meta export, then split into
         8 stages from the checkpoint (--format pt2), wall time and peak
         resident memory of each process (wait4's ru_maxrss). Then what users
         must do without it: build the model with its weights
         (from_pretrained), torch.export.save it, then pipecut split the
         .pt2; at --today-layers (its checkpoint is the 32-layer one, read
         with num_hidden_layers overridden), since at 32 layers it does not
         fit in 24 GiB: on this machine it was OOM-killed inside
         torch.export.save at 24 GB of anonymous memory (2026-12-06).
         The meta path at the same layer count beside it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from scale import rmtree, run, synced  # noqa: E402

MiB, GiB = 1 << 20, 1 << 30
SHAPE = dict(hidden_size=4096, intermediate_size=11008, num_attention_heads=32, num_key_value_heads=32,
             vocab_size=32000, max_position_embeddings=4096)


def llama_config(layers):
    from transformers import LlamaConfig

    cfg = LlamaConfig(num_hidden_layers=layers, attn_implementation="sdpa", use_cache=False, **SHAPE)
    cfg.torch_dtype = "bfloat16"
    return cfg


def tensor_shapes(layers):
    h, i, v = SHAPE["hidden_size"], SHAPE["intermediate_size"], SHAPE["vocab_size"]
    yield "model.embed_tokens.weight", (v, h)
    for layer in range(layers):
        p = f"model.layers.{layer}."
        yield p + "input_layernorm.weight", (h,)
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            yield p + f"self_attn.{proj}.weight", (h, h)
        yield p + "post_attention_layernorm.weight", (h,)
        yield p + "mlp.gate_proj.weight", (i, h)
        yield p + "mlp.up_proj.weight", (i, h)
        yield p + "mlp.down_proj.weight", (h, i)
    yield "model.norm.weight", (h,)
    yield "lm_head.weight", (v, h)


def write_checkpoint(path, layers, shard_bytes=2 * GiB):
    """A sharded bfloat16 checkpoint, as save_pretrained lays it out, written
    a shard at a time (a shard's tensors in memory, never the model)."""
    if os.path.exists(os.path.join(path, "model.safetensors.index.json")):
        return
    import torch
    from safetensors.torch import save_file

    rmtree(path)
    os.makedirs(path)
    g = torch.Generator().manual_seed(0)
    shards, current, size = [], {}, 0
    for name, shape in tensor_shapes(layers):
        t = torch.empty(shape, dtype=torch.float32)
        if len(shape) > 1:
            t.normal_(0, 0.02, generator=g)
        else:  # a norm's weight: near one, not one (nothing uniform)
            t.normal_(1, 0.1, generator=g)
        current[name] = t.to(torch.bfloat16)
        size += current[name].numel() * 2
        if size >= shard_bytes:
            shards.append(current)
            current, size = {}, 0
    if current:
        shards.append(current)
    weight_map, total = {}, 0
    for k, shard in enumerate(shards):
        name = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(path, name), metadata={"format": "pt"})
        for t in shard:
            weight_map[t] = name
            total += shard[t].numel() * 2
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    llama_config(layers).save_pretrained(path)


def python():
    return sys.executable


def run_rusage(cmd, env=None):
    """Runs cmd; returns (seconds, peak anonymous bytes, peak resident bytes, output).
    Peak resident from /usr/bin/time (its child's maxrss: a child of this
    process would inherit this process's high-water mark through fork);
    peak anonymous (RssAnon, polled every 5 ms) is what the process itself
    allocated, without the file pages it maps (a checkpoint's, the page
    cache's to drop)."""
    marker = "pipecut-bench-maxrss-kb="
    t0 = time.perf_counter()
    proc = subprocess.Popen(["/usr/bin/time", "-f", marker + "%M"] + cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    peak = [0]

    def poll():  # the RssAnon of time's child, the command
        while proc.poll() is None:
            try:
                with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
                    kids = f.read().split()
                for kid in kids:
                    with open(f"/proc/{kid}/status") as f:
                        for line in f:
                            if line.startswith("RssAnon:"):
                                peak[0] = max(peak[0], int(line.split()[1]) * 1024)
            except OSError:
                pass
            time.sleep(0.005)

    poller = threading.Thread(target=poll)
    poller.start()
    out, err = proc.communicate()
    poller.join()
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"failed (exit {proc.returncode}): {' '.join(cmd)}\n{(out + err)[-4000:]}")
    rss = int(err.rsplit(marker, 1)[1].split()[0]) * 1024
    return elapsed, peak[0], rss, out + err


def meta_export(work, ckpt, layers, out):
    """scripts/export_meta.py on the checkpoint's config, at `layers` layers."""
    cfgdir = os.path.join(work, f"config{layers}")
    os.makedirs(cfgdir, exist_ok=True)
    llama_config(layers).save_pretrained(cfgdir)
    rmtree(out)
    return run_rusage([python(), os.path.join(ROOT, "scripts", "export_meta.py"), "--config", cfgdir, "-o", out,
                       "--no-decode", "--batch", "1", "--seq", "128"])[:3]


def split_part(args, work):
    ckpt = os.path.join(work, "ckpt4")
    write_checkpoint(ckpt, 4)
    meta = os.path.join(work, "meta4")
    meta_export(work, ckpt, 4, meta)
    ckpt_bytes = sum(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt))
    out, copy = os.path.join(work, "split4"), os.path.join(work, "copy")
    split = [args.pipecut, "split", os.path.join(meta, "model.pt2"), "--weights", ckpt, "--weights",
             os.path.join(meta, "buffers.safetensors"), "--stages", "4", "--balance", "params", "-o", out, "-q"]
    # Per round, back to back: cp -r of the checkpoint, the split in one
    # format (as many bytes as the checkpoint), the split in both formats,
    # and cp -r of that output (the same bytes as it wrote).
    ratio = {"pt2": [], "both": [], "both_out": []}
    peaks = {"pt2": [], "both": []}
    times = {"pt2": [], "both": [], "cp": [], "cp_out": []}
    largest = {}

    def cp(src):
        rmtree(copy)
        s, _, _, _ = synced(["cp", "-r", src, copy])
        rmtree(copy)
        return s

    def split_once(kind, flags):
        rmtree(out)
        s, peak, _, _ = synced(split + flags, poll_memory=True)
        peaks[kind].append(peak)
        times[kind].append(s)
        largest[kind] = max(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out) if f.startswith("stage_"))
        return s

    for r in range(args.rounds):
        cp_s = cp(ckpt)
        pt2_s = split_once("pt2", ["--format", "pt2"])
        both_s = split_once("both", [])
        out_s = cp(out)
        times["cp"].append(cp_s)
        times["cp_out"].append(out_s)
        ratio["pt2"].append(pt2_s / cp_s)
        ratio["both"].append(both_s / cp_s)
        ratio["both_out"].append(both_s / out_s)
        print(f"  round {r + 1}: cp checkpoint {cp_s:.2f} s; split --format pt2 {pt2_s:.2f} s ({pt2_s / cp_s:.2f}x); "
              f"both formats {both_s:.2f} s ({both_s / cp_s:.2f}x the checkpoint's cp, {both_s / out_s:.2f}x cp of "
              f"its output, {out_s:.2f} s)", flush=True)
    rmtree(out)
    med = statistics.median
    print(f"split with --weights: checkpoint {ckpt_bytes / 1e9:.2f} GB (bf16, 4 layers of Llama-2-7B), 4 stages, "
          f"{args.rounds} rounds (medians of the per-round ratios)")
    print(f"  --format pt2 / cp -r checkpoint: {med(ratio['pt2']):.2f}x (rounds "
          f"{', '.join(f'{x:.2f}' for x in ratio['pt2'])}); split {med(times['pt2']):.2f} s, cp {med(times['cp']):.2f} s")
    print(f"  both formats / cp -r checkpoint: {med(ratio['both']):.2f}x (twice the bytes); / cp -r of its output: "
          f"{med(ratio['both_out']):.2f}x (rounds {', '.join(f'{x:.2f}' for x in ratio['both_out'])})")
    for kind in ("pt2", "both"):
        print(f"  peak anonymous memory, {kind}: {max(peaks[kind]) / MiB:.0f} MiB = "
              f"{max(peaks[kind]) / largest[kind]:.2f}x the largest stage file ({largest[kind] / MiB:.0f} MiB)")


def path_part(args, work):
    layers, today = args.path_layers, args.today_layers
    ckpt = os.path.join(work, f"ckpt{layers}")
    t0 = time.perf_counter()
    write_checkpoint(ckpt, layers)
    ckpt_bytes = sum(os.path.getsize(os.path.join(ckpt, f)) for f in os.listdir(ckpt))
    print(f"checkpoint: {layers} layers, {ckpt_bytes / 1e9:.2f} GB ({time.perf_counter() - t0:.0f} s to have it)",
          flush=True)
    rows = []

    def meta_path(n):
        meta = os.path.join(work, f"meta{n}")
        e_s, e_anon, e_rss = meta_export(work, ckpt, n, meta)
        out = os.path.join(work, f"split{n}")
        rmtree(out)
        os.sync()
        s_s, s_anon, s_rss, _ = run_rusage([args.pipecut, "split", os.path.join(meta, "model.pt2"), "--weights", ckpt,
                                            "--weights", os.path.join(meta, "buffers.safetensors"), "--stages", "8",
                                            "--balance", "params", "--format", "pt2", "-o", out, "-q"])
        os.sync()
        rows.append((f"meta export + split --weights, {n} layers", e_s, e_anon, e_rss, s_s, s_anon, s_rss))
        rmtree(out)

    def today_path(n):
        pt2 = os.path.join(work, f"real{n}.pt2")
        script = f"""
import os, sys, torch
os.environ["HF_HUB_OFFLINE"] = "1"
sys.path.insert(0, {os.path.join(ROOT, 'scripts')!r})
from transformers import LlamaForCausalLM
class LlamaLogits(LlamaForCausalLM):
    def forward(self, input_ids):
        return super().forward(input_ids=input_ids, use_cache=False).logits
m = LlamaLogits.from_pretrained({ckpt!r}, dtype=torch.bfloat16, num_hidden_layers={n}, attn_implementation="sdpa").eval()
ids = torch.zeros(1, 128, dtype=torch.long)
ep = torch.export.export(m, (ids,), strict=False)
torch.export.save(ep, {pt2!r})
"""
        e_s, e_anon, e_rss, _ = run_rusage([python(), "-c", script])
        out = os.path.join(work, f"split_today{n}")
        rmtree(out)
        os.sync()
        s_s, s_anon, s_rss, _ = run_rusage([args.pipecut, "split", pt2, "--stages", "8", "--balance", "params",
                                            "--format", "pt2", "-o", out, "-q"])
        os.sync()
        rows.append((f"from_pretrained + torch.export.save + split, {n} layers", e_s, e_anon, e_rss, s_s, s_anon, s_rss))
        rmtree(out)
        os.remove(pt2)

    meta_path(layers)
    for n in today:
        meta_path(n)
        today_path(n)
    print("the whole path (Llama-2-7B shapes, bfloat16, 8 stages, --format pt2); memory: peak anonymous "
          "(peak resident, mapped file pages included)")
    for name, e_s, e_anon, e_rss, s_s, s_anon, s_rss in rows:
        print(f"  {name}: export {e_s:.1f} s, {e_anon / GiB:.2f} GiB ({e_rss / GiB:.2f}); split {s_s:.1f} s, "
              f"{s_anon / GiB:.2f} GiB ({s_rss / GiB:.2f}); total {e_s + s_s:.1f} s")
    for n in today:
        meta = next(r for r in rows if r[0] == f"meta export + split --weights, {n} layers")
        real = next(r for r in rows if r[0] == f"from_pretrained + torch.export.save + split, {n} layers")
        print(f"  at {n} layers, today's path / the meta path: time {(real[1] + real[4]) / (meta[1] + meta[4]):.1f}x, "
              f"peak anonymous memory {max(real[2], real[5]) / max(meta[2], meta[5]):.1f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pipecut", default=os.path.join(ROOT, "build", "tools", "pipecut"))
    ap.add_argument("--work", default=os.path.expanduser("~/.cache/pipecut/bench-weights"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--part", choices=("split", "path", "both"), default="both")
    ap.add_argument("--today-layers", type=int, nargs="*", default=[16],
                    help="layer counts to run today's path at (none: skip it)")
    ap.add_argument("--path-layers", type=int, default=32)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.part in ("split", "both"):
        split_part(args, args.work)
    if args.part in ("path", "both"):
        path_part(args, args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
