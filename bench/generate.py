#!/usr/bin/env python3
"""Generation throughput: a 2-stage pipeline on 2 Gloo processes against the
same program unsplit, and against transformers' generate.

    python bench/generate.py [--rows 128 --hidden 768 ...] [--rounds 3] [--keep DIR]

Model: transformers' Llama with random weights (nothing downloaded), float32
(--dtype bfloat16 for larger widths), exported as a decode step with its static cache
(TorchExportableModuleForDecoderOnlyLM, batch B rows, cache C), the sequence
length symbolic so that prompts are prefilled in chunks (--prefill-chunk).
The default shape (8 layers, hidden 768, 56.6M parameters, B = 128 rows) makes
a decode step compute-bound on one core: its matrix products run at MKL's
full rate, and two such processes do not slow each other (at B = 8 a step is
operator overhead and memory stalls). Workload: --prompts prompts of
--prompt-len tokens, --new-tokens generated each, greedy. Measured side by
side, alternating, --rounds times (medians):

  pipeline   pipecut split into 2 stages as docs/pipecut.md tells a user:
             --stages 2 --balance time with a profile of the unsplit
             program's decode step (--balance flops: by FLOPs; --cut N:
             before layer N), pipecut-run --generate on 2 processes over
             Gloo, --threads 1 each, --slots K
  unsplit    the one-stage split, pipecut-run --generate in one process,
             --threads 1, one slot: the same program looped
  pair       two such unsplit runs at once, each on every prompt: their
             tokens/s summed is what two cores give this program, the
             pipeline's real ceiling (2x unsplit only where two busy cores
             do not slow each other: on a VM their vCPUs may share a core)
  torch      the same exported program looped in PyTorch (ep.module()), 1 thread
  hf         transformers' generate with a static cache, batch B, 2 threads

With --aoti, the two splits are also compiled (pipecut compile, AOTInductor
packages for the device's kind) and run as pipeline-aoti and unsplit-aoti
(pipecut-run --stage-format aoti), their tokens checked against the
TorchScript runs' (the fused kernels round differently: a differing greedy
token is reported with its prompt and position, not hidden).

With --device cuda:N (scripts/gpu_check.sh) the pipeline's two stages share
that GPU in one process, and unsplit and hf run on it too (no PyTorch loop).

Goals (issue 36): pipeline >= 1.7x unsplit (ideal 2x), pipeline >= 1.5x hf.
Pipeline / pair says how much of the two cores' capacity the pipeline uses.
Every run's tokens are checked: the pipeline's equal the unsplit run's.
Tokens/s counts generated tokens over each run's generation time (pipecut:
its report's wall time, after loading; PyTorch: the loop; hf: the generate
calls); TTFT and inter-token p50 are the pipecut reports'.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, os.path.join(REPO_ROOT, "scripts"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(a):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(num_hidden_layers=a.layers, hidden_size=a.hidden, intermediate_size=a.intermediate,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, vocab_size=a.vocab,
                      max_position_embeddings=a.cache, attn_implementation="sdpa", use_cache=True)
    return LlamaForCausalLM(cfg).to(getattr(torch, a.dtype)).eval()


def export(model, a, path):
    import torch
    from transformers.integrations.executorch import TorchExportableModuleForDecoderOnlyLM

    model.generation_config.cache_implementation = "static"
    model.generation_config.cache_config = {"batch_size": a.rows, "max_cache_len": a.cache}
    w = TorchExportableModuleForDecoderOnlyLM(model, batch_size=a.rows, max_cache_len=a.cache)
    # The sequence length symbolic: a prompt is prefilled in one call, as transformers' generate does.
    seq = torch.export.Dim("seq", min=1, max=a.cache - 1)
    ep = w.export(input_ids=torch.zeros(a.rows, 4, dtype=torch.long), cache_position=torch.arange(4),
                  dynamic_shapes={"input_ids": {1: seq}, "cache_position": {0: seq}}, strict=False)
    torch.export.save(ep, path)


def profile_decode_step(a, work, unsplit, on_device):
    """pipecut-run --profile --decode-step of the unsplit program: one token
    per row, the step the pipeline mostly runs, where the exported example
    is a prefill chunk."""
    profile = os.path.join(work, "decode_step.profile.json")
    subprocess.run([a.pipecut_run, unsplit, "--profile", profile, "--decode-step", "--threads", "1", "-q", "--force",
                    *on_device], check=True, capture_output=True)
    return profile


def prompts(a):
    import random

    rng = random.Random(1)
    return [{"id": i, "prompt": [rng.randrange(1, a.vocab) for _ in range(a.prompt_len)]} for i in range(a.prompts)]


def run_pipecut(cmds, env_extra=None, check_exit_4=False, every=False):
    """Runs the commands at once (ranks); returns rank 0's JSON report (with
    every, each command's). With check_exit_4, exit 4 (--check-tokens found
    a differing token) still returns the report, whose "check" says where."""
    procs = []
    for rank, cmd in enumerate(cmds):
        env = dict(os.environ)
        env.update(env_extra[rank] if env_extra else {})
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate() for p in procs]
    for p, (o, e) in zip(procs, outs):
        if p.returncode != 0 and not (check_exit_4 and p.returncode == 4):
            raise SystemExit(f"pipecut-run failed ({p.returncode}): {e}")
    return [json.loads(o) for o, _ in outs] if every else json.loads(outs[0][0])


def check(report, side):
    """Stops at a differing token, except between a compiled run and the TorchScript one, where it is reported."""
    c = report.get("check")
    if c is None or c.get("ok"):
        return
    if side.endswith("-aoti"):
        print(f"  {side}: tokens differ from the TorchScript unsplit run's: {c}", flush=True)
        return
    raise SystemExit(f"{side}: tokens differ from the unsplit run's: {c}")


def torch_loop(path, plist, a):
    """The exported program looped in PyTorch, B prompts at a time, 1 thread: generated tokens, seconds."""
    import torch

    torch.set_num_threads(1)
    tokens = 0
    elapsed = 0.0
    for g in range(0, len(plist), a.rows):
        group = plist[g:g + a.rows]
        rows = [p["prompt"] for p in group] + [group[0]["prompt"]] * (a.rows - len(group))
        mod = torch.export.load(path).module()  # a fresh cache, before the clock
        t0 = time.perf_counter()
        with torch.no_grad():
            logits = mod(input_ids=torch.tensor(rows), cache_position=torch.arange(a.prompt_len))
            for k in range(a.new_tokens):
                nxt = logits[:, -1].argmax(-1)
                tokens += len(group)
                if k + 1 == a.new_tokens:
                    break
                logits = mod(input_ids=nxt.view(-1, 1), cache_position=torch.tensor([a.prompt_len + k]))
        elapsed += time.perf_counter() - t0
    return tokens, elapsed


def hf_generate(model, plist, a):
    import torch

    torch.set_num_threads(2)
    tokens = 0
    t0 = time.perf_counter()
    for g in range(0, len(plist), a.rows):
        group = plist[g:g + a.rows]
        ids = torch.tensor([p["prompt"] for p in group], device=a.device)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens, do_sample=False,
                                 cache_implementation="static", pad_token_id=0)
        tokens += (out.shape[1] - a.prompt_len) * len(group)
    if a.device != "cpu":
        torch.cuda.synchronize()
    return tokens, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=768)
    ap.add_argument("--intermediate", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--rows", type=int, default=128, help="the exported batch B")
    ap.add_argument("--cache", type=int, default=64)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                    help="the weights' and the cache's dtype (bfloat16: e.g. 7B widths, --hidden 4096 --intermediate "
                         "11008 --heads 32 --kv-heads 32 --vocab 32000)")
    ap.add_argument("--prompts", type=int, default=384)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=48)
    ap.add_argument("--slots", type=int, default=3)
    ap.add_argument("--prefill-chunk", type=int, default=4, help="prompt tokens per step (pipecut-run --prefill-chunk)")
    ap.add_argument("--balance", choices=("time", "flops"), default="time",
                    help="how pipecut split cuts the pipeline: time (a profile of the unsplit decode step) or flops")
    ap.add_argument("--cut", type=int, help="the second stage starts at this layer instead of --balance's cut")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--device", default="cpu",
                    help="cpu (the goals' setting), or e.g. cuda:0: both stages on that GPU in one process, "
                         "unsplit and transformers' generate on it too; no PyTorch loop")
    ap.add_argument("--pipecut", default=os.path.join(REPO_ROOT, "build", "tools", "pipecut"))
    ap.add_argument("--pipecut-run", default=os.path.join(REPO_ROOT, "build", "tools", "pipecut-run"))
    ap.add_argument("--keep", help="keep the model and splits here")
    ap.add_argument("--aoti", action="store_true",
                    help="also compile both splits (pipecut compile) and run them as AOTInductor packages")
    a = ap.parse_args()
    import warnings

    # torch.export.load warns once per lifted cache tensor on every load of
    # the PyTorch loop's program: hundreds of lines a round.
    warnings.filterwarnings("ignore", message="A model attribute .* requires gradient")
    import torch

    work = a.keep or tempfile.mkdtemp(prefix="pipecut-bench-generate-")
    os.makedirs(work, exist_ok=True)
    model = build(a)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: Llama {a.layers} layers, hidden {a.hidden}, intermediate {a.intermediate}, heads {a.heads}/{a.kv_heads}, "
          f"vocab {a.vocab}: {params / 1e6:.1f}M parameters, {a.dtype}; batch {a.rows} rows per slot, cache {a.cache}")
    print(f"workload: {a.prompts} prompts of {a.prompt_len} tokens, {a.new_tokens} new tokens each, greedy; "
          f"{os.cpu_count()} CPUs")
    pt2 = os.path.join(work, "model.pt2")
    if not os.path.exists(pt2):
        export(model, a, pt2)
    plist = prompts(a)
    ppath = os.path.join(work, "prompts.jsonl")
    with open(ppath, "w") as f:
        for p in plist:
            f.write(json.dumps(p) + "\n")
    # The unsplit program is the one-stage split; the pipeline's 2 stages are
    # balanced as a user would (docs/pipecut.md): by a profile of the unsplit
    # program's decode step (--balance time, the default), by FLOPs, or cut
    # before layer --cut.
    splits = {"unsplit": {"split_points": {}},
              "pipeline": {"split_points": {f"model.model.layers.{a.cut}": "BEGINNING"}} if a.cut is not None else None}
    on_device = ["--devices", a.device] if a.device != "cpu" else []
    dirs = {}
    for name, spec in splits.items():
        sp = os.path.join(work, name + ".json")
        with open(sp, "w") as f:
            json.dump(spec, f)
        dirs[name] = os.path.join(work, name)
        how = ["--spec", sp] if spec is not None else ["--stages", "2", "--balance", a.balance]
        if spec is None and a.balance == "time":
            how += ["--cost", profile_decode_step(a, work, dirs["unsplit"], on_device)]
        formats = "torchscript,pt2" if a.aoti or (name == "unsplit" and a.balance == "time") else "torchscript"
        s = subprocess.run([a.pipecut, "split", pt2, *how, "-o", dirs[name], "-q", "--format", formats, "--force"],
                           check=True, capture_output=True, text=True)
        if spec is None:
            report = (s.stdout + s.stderr).splitlines()
            print(f"{name}: --balance {a.balance}: " + "; ".join(l.strip() for l in report if "imbalance" in l or "spec:" in l))
        if a.aoti:
            t0 = time.perf_counter()
            c = subprocess.run([a.pipecut, "compile", dirs[name], "--device", a.device.split(":")[0], "--python",
                                sys.executable, "--cache", os.path.join(work, "aoti-cache"), "-q"],
                               capture_output=True, text=True)
            if c.returncode != 0:
                raise SystemExit(f"pipecut compile {dirs[name]} failed ({c.returncode}): {c.stderr}")
            print(f"compiled {name}: {time.perf_counter() - t0:.1f} s", flush=True)
    common = ["--generate", "--prompts", ppath, "--max-new-tokens", str(a.new_tokens), "--json", "-q", "--threads", "1",
              "--prefill-chunk", str(a.prefill_chunk)]
    sides = ("pipeline", "unsplit", "pair", "pipeline-aoti", "unsplit-aoti", "torch", "hf") if a.aoti else \
        ("pipeline", "unsplit", "pair", "torch", "hf")
    results = {k: [] for k in sides}
    if a.device != "cpu":
        del results["torch"], results["pair"]
        model.to(a.device)
    reports = {}
    for rnd in range(a.rounds):
        for fmt in (("torchscript", "aoti") if a.aoti else ("torchscript",)):
            sfx = "-aoti" if fmt == "aoti" else ""
            staged = ["--stage-format", fmt] if fmt == "aoti" else []
            out_u = os.path.join(work, f"unsplit{sfx}.{rnd}.jsonl")
            # The compiled runs are checked against the TorchScript unsplit run's tokens.
            ref_u = os.path.join(work, f"unsplit.{rnd}.jsonl")
            cmd = [a.pipecut_run, dirs["unsplit"], *common, *staged, *on_device, "--slots", "1", "--output", out_u,
                   "--force"]
            if fmt == "aoti":
                cmd += ["--check-tokens", ref_u]
            r = run_pipecut([cmd], check_exit_4=True)
            check(r, "unsplit" + sfx)
            results["unsplit" + sfx].append(r["generated_tokens"] / (r["wall_ms"] / 1000))
            reports["unsplit" + sfx] = r
            if fmt == "torchscript" and a.device == "cpu":
                both = [[*cmd[:cmd.index("--output")], "--output", os.path.join(work, f"pair{k}.{rnd}.jsonl"), "--force",
                         "--check-tokens", out_u] for k in range(2)]
                rs = run_pipecut(both, every=True)
                for k, rk in enumerate(rs):
                    check(rk, f"pair {k}")
                results["pair"].append(sum(rk["generated_tokens"] / (rk["wall_ms"] / 1000) for rk in rs))
            out_p = os.path.join(work, f"pipeline{sfx}.{rnd}.jsonl")
            cmd = [a.pipecut_run, dirs["pipeline"], *common, *staged, *on_device, "--slots", str(a.slots),
                   "--check-tokens", ref_u]
            if a.device == "cpu":
                port = free_port()
                env = [{"RANK": str(k), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port)} for k in range(2)]
                cmd += ["--backend", "gloo", "--timeout", "600"]
                r = run_pipecut([cmd + ["--output", out_p, "--force"], cmd], env, check_exit_4=True)
            else:
                r = run_pipecut([cmd + ["--output", out_p, "--force"]], check_exit_4=True)
            check(r, "pipeline" + sfx)
            results["pipeline" + sfx].append(r["generated_tokens"] / (r["wall_ms"] / 1000))
            reports["pipeline" + sfx] = r
        if a.device == "cpu":
            n, s = torch_loop(pt2, plist, a)
            results["torch"].append(n / s)
        n, s = hf_generate(model, plist, a)
        results["hf"].append(n / s)
        print(f"round {rnd + 1}: " + ", ".join(f"{k} {v[-1]:.1f} tok/s" for k, v in results.items()), flush=True)
    med = {k: statistics.median(v) for k, v in results.items()}
    print("\nmedians (generated tokens per second):")
    for k, v in med.items():
        print(f"  {k:9s} {v:8.1f}")
    for k in [k for k in sides if k in reports]:
        r = reports[k]
        print(f"  {k}: TTFT p50 {r['ttft_ms']['p50']:.1f} ms, inter-token p50 {r['inter_token_ms']['p50']:.1f} ms, "
              f"bubble {r['bubble']['measured']:.3f}, prefill {r['prefill_tokens_per_s']:.1f} tok/s")
    # The rounds' own ratios: on a shared machine a round's sides see the
    # same neighbours more nearly than the medians of separate rounds do.
    per_round = lambda a_, b_: ", ".join(f"{x / y:.2f}" for x, y in zip(results[a_], results[b_]))
    print(f"rounds' ratios: pipeline / unsplit {per_round('pipeline', 'unsplit')}; pipeline / hf {per_round('pipeline', 'hf')}"
          + (f"; pipeline-aoti / hf {per_round('pipeline-aoti', 'hf')}" if a.aoti else ""))
    g1 = med["pipeline"] / med["unsplit"]
    g2 = med["pipeline"] / med["hf"]
    print(f"\npipeline / unsplit (pipecut-run, 1 thread): {g1:.2f}x (goal >= 1.7x) {'MET' if g1 >= 1.7 else 'NOT MET'}")
    print(f"pipeline / transformers generate (2 threads): {g2:.2f}x (goal >= 1.5x) {'MET' if g2 >= 1.5 else 'NOT MET'}")
    if "pair" in med:
        print(f"two unsplit runs at once / one alone: {med['pair'] / med['unsplit']:.2f}x (what two cores give); "
              f"pipeline / that: {med['pipeline'] / med['pair']:.2f}")
    if a.aoti:
        print(f"pipeline-aoti / unsplit-aoti: {med['pipeline-aoti'] / med['unsplit-aoti']:.2f}x, "
              f"pipeline-aoti / transformers generate: {med['pipeline-aoti'] / med['hf']:.2f}x, "
              f"pipeline-aoti / pipeline: {med['pipeline-aoti'] / med['pipeline']:.2f}x")
    if "torch" in med:
        print(f"pipeline / PyTorch loop of the exported program (1 thread): {med['pipeline'] / med['torch']:.2f}x")
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
