"""Checks scripts/train_compile.py's training programs against eager autograd.

Usage: python test/train_programs.py PIPECUT_BINARY OUTDIR [--models=llama_loss,gpt2_loss,dropout] [--policies=none,all,layer] [--device=cpu|cuda]

Splits testdata/train/{llama_loss,gpt2_loss}.pt2 in two with PIPECUT_BINARY
(--format pt2) under OUTDIR, then for each stage and each recompute policy
(none, all, and a regex matching one decoder layer of the stage) runs the
compile script as pipecut would (`python scripts/train_compile.py REQUEST`),
loads the packages with torch._inductor.aoti_load_package, runs F, then I
and W (or B), resolving the SIG references, and compares with eager
autograd on the stage's ep.module(): outputs, input gradients and parameter
gradients within rtol 1e-5, atol 1e-6. Also checks that the packages hold
no constants, carry their SIG in their metadata, and that
saved_bytes(all) < saved_bytes(none) with the regex's in between.
"dropout": a Linear, Dropout(0.5), Linear stage exported in training mode:
F draws a fresh mask each call, and I and W (recompute none and all) use
the mask F drew (eager autograd with that mask as the reference).
--device=cuda (the dropout stage only; scripts/gpu_check.sh): its programs
compiled for and run on cuda:0, the eager reference there too, within rtol
1e-4 (Inductor's CUDA kernels reduce in other orders).
Exits 1 on the first failure; prints one summary line.

Compiles run one at a time with OMP_NUM_THREADS=1 and
TORCHINDUCTOR_COMPILE_THREADS=1 unless set: 30 AOTInductor packages, about
5-6 minutes on 2 cores with a cold Inductor cache.
"""
import glob
import json
import os
import re
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "train_compile.py")
TESTDATA = os.path.join(ROOT, "testdata", "train")
RTOL, ATOL = 1e-5, 1e-6


class Failure(Exception):
    pass


def fail(msg):
    raise Failure(msg)


def split(binary, model, outdir):
    out = os.path.join(outdir, f"{model}.2")
    cmd = [binary, "split", os.path.join(TESTDATA, f"{model}.pt2"), "--spec", os.path.join(TESTDATA, f"{model}.2.json"),
           "--format", "pt2", "-o", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    stages = sorted(glob.glob(os.path.join(out, "stage*.pt2")))
    if not stages:
        fail(f"no stage .pt2 files in {out}")
    return stages


def stage_inputs(ep):
    from torch.export.graph_signature import InputKind

    ph = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    specs = []
    for s in ep.graph_signature.input_specs:
        if s.kind == InputKind.USER_INPUT:
            v = ph[s.arg.name].meta["val"]
            specs.append({"dtype": str(v.dtype).replace("torch.", ""), "shape": [int(d) for d in v.shape]})
    return specs


def one_layer_regex(ep):
    paths = set()
    for n in ep.graph.nodes:
        for v in (n.meta.get("nn_module_stack") or {}).values():
            if re.fullmatch(r"(.*\.)?(layers|h)\.\d+", v[0]):
                paths.add(v[0])
    if not paths:
        fail("no decoder layer in the stage's nn_module_stack")
    return re.escape(sorted(paths)[0])


def compile_programs(python, source, inputs, grad_inputs, policy, outdir, tag, device="cpu"):
    outputs = {p: os.path.join(outdir, f"{tag}.{p}.pt2") for p in "FIWB"}
    req = {"mode": "compile_train", "source": source, "device": device, "options": {}, "inputs": inputs,
           "grad_inputs": grad_inputs, "recompute": policy, "outputs": outputs}
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    r = subprocess.run([python, SCRIPT, json.dumps(req)], capture_output=True, text=True, env=env)
    lines = r.stdout.strip().splitlines()
    last = lines[-1] if lines else ""
    if r.returncode != 0 or not last.startswith("{"):
        fail(f"{tag}: train_compile.py failed ({r.returncode}): {last}\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return json.loads(last), outputs


def close(name, got, want, relative_atol=False, rtol=RTOL):
    """relative_atol: atol is ATOL times the largest |want| (gradients
    summed from values far larger than their result)."""
    import torch

    if got.shape != want.shape or got.dtype != want.dtype:
        fail(f"{name}: {got.dtype}{list(got.shape)} where eager gives {want.dtype}{list(want.shape)}")
    if want.is_floating_point():
        atol = ATOL * max(1.0, want.abs().max().item()) if relative_atol else ATOL
        if not torch.allclose(got, want, rtol=rtol, atol=atol * rtol / RTOL):
            err = (got - want).abs().max().item()
            fail(f"{name}: differs from eager by up to {err:.3g} (max |eager| {want.abs().max().item():.3g})")
    elif not torch.equal(got, want):
        fail(f"{name}: differs from eager")


def check_stage(python, source, outdir, tag, policies):
    import torch

    ep = torch.export.load(source)
    inputs_spec = stage_inputs(ep)
    grad_inputs = [k for k, s in enumerate(inputs_spec) if getattr(torch, s["dtype"]).is_floating_point]
    gen = torch.Generator().manual_seed(1)
    inputs = []
    for s in inputs_spec:
        dtype = getattr(torch, s["dtype"])
        if dtype.is_floating_point:
            inputs.append(torch.randn(s["shape"], generator=gen).to(dtype))
        else:  # token ids and labels: the fixtures' vocabulary is 256
            inputs.append(torch.randint(0, 256, s["shape"], generator=gen).to(dtype))

    # Eager reference.
    mod = ep.module()
    params = dict(mod.named_parameters())
    xs = [x.clone().requires_grad_(k in grad_inputs) for k, x in enumerate(inputs)]
    ys = mod(*xs)
    ys = list(ys) if isinstance(ys, (list, tuple)) else [ys]
    tangent_idx = [k for k, y in enumerate(ys) if y.is_floating_point() and y.requires_grad]
    tangents = {k: torch.randn(ys[k].shape, generator=gen) for k in tangent_idx}
    if ys[-1].dim() == 0 and len(tangent_idx) == 1:
        tangents[tangent_idx[0]] = torch.tensor(0.25)  # a loss stage: 1/M
    wrt = [xs[k] for k in grad_inputs] + list(params.values())
    grads = torch.autograd.grad([ys[k] for k in tangent_idx], wrt, [tangents[k] for k in tangent_idx],
                                allow_unused=True)
    want_gx = dict(zip(grad_inputs, grads[:len(grad_inputs)]))
    want_gp = dict(zip(params, grads[len(grad_inputs):]))

    tensors = {**ep.state_dict, **ep.constants}
    checks, saved_bytes, seconds = 0, {}, {}
    for label, policy in policies(ep):
        t0 = time.monotonic()
        answer, files = compile_programs(python, source, inputs_spec, grad_inputs, policy, outdir, f"{tag}.{label}")
        seconds[label] = (time.monotonic() - t0, answer.get("program_seconds"))
        saved_bytes[label] = answer["saved_bytes"]
        progs = answer["programs"]
        expect = ["F", "I", "W", "B"] if grad_inputs else ["F", "B"]
        if sorted(progs) != sorted(expect):
            fail(f"{tag}.{label}: programs {sorted(progs)}, expected {expect}")
        if sorted(answer["tangents"]) != tangent_idx:
            fail(f"{tag}.{label}: tangents {answer['tangents']}, eager's outputs requiring grad are {tangent_idx}")
        base = {f"param:{n}": p.detach() for n, p in params.items()}
        base.update({f"buffer:{n}": t for n, t in tensors.items() if isinstance(t, torch.Tensor)})
        base.update({f"input:{k}": x for k, x in enumerate(inputs)})
        base.update({f"tangent:{k}": t for k, t in tangents.items()})
        # I then W, and B alone (I and W in one), each after the same F.
        for order in (["F", "I", "W"], ["F", "B"]) if grad_inputs else (["F", "B"],):
            env = dict(base)
            for name in order:
                sig = progs[name]
                runner = torch._inductor.aoti_load_package(files[name])
                if list(runner.get_constant_fqns()):
                    fail(f"{tag}.{label}.{name}: the package holds constants {list(runner.get_constant_fqns())[:3]}")
                meta = runner.get_metadata()
                if json.loads(meta.get("pipecut.train", "null")) != sig:
                    fail(f"{tag}.{label}.{name}: the package's pipecut.train metadata is not its SIG")
                missing = [r for r in sig["inputs"] if r not in env]
                if missing:
                    fail(f"{tag}.{label}.{name}: inputs {missing[:3]} are not available before {name} runs")
                with torch.no_grad():
                    outs = runner(*[env[r].contiguous() for r in sig["inputs"]])
                outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                if len(outs) != len(sig["outputs"]):
                    fail(f"{tag}.{label}.{name}: {len(outs)} outputs, SIG lists {len(sig['outputs'])}")
                for r, t in zip(sig["outputs"], outs):
                    env[r] = t
            what = f"{tag}.{label}.{'+'.join(order)}"
            for k, y in enumerate(ys):
                close(f"{what} output:{k}", env[f"output:{k}"], y.detach())
                checks += 1
            for k, g in want_gx.items():
                want = g if g is not None else torch.zeros_like(xs[k])
                close(f"{what} grad_input:{k}", env[f"grad_input:{k}"], want)
                checks += 1
            for n, g in want_gp.items():
                if g is None:
                    if f"grad:{n}" in env:
                        close(f"{what} grad:{n}", env[f"grad:{n}"], torch.zeros_like(params[n]))
                    continue
                if f"grad:{n}" not in env:
                    fail(f"{what}: no grad:{n}, eager's is not None")
                close(f"{what} grad:{n}", env[f"grad:{n}"], g)
                checks += 1
    if "all" in saved_bytes and "none" in saved_bytes:
        a, n = saved_bytes["all"], saved_bytes["none"]
        if not a < n:
            fail(f"{tag}: saved_bytes all {a} is not below none {n}")
        if "layer" in saved_bytes and not a <= saved_bytes["layer"] <= n:
            fail(f"{tag}: saved_bytes of the one-layer regex {saved_bytes['layer']} "
                 f"is not between all {a} and none {n}")
        checks += 1
    return checks, saved_bytes, seconds


def _Run(module, rng):
    """module as an nn.Module whose forward runs it through rng (a
    train_compile.SeededRandom), for torch.func.functional_call."""
    import torch

    class Run(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = module

        def forward(self, *args):
            return rng.run(self.m, *args)

    return Run()


def check_dropout(python, binary, outdir, labels, device="cpu"):
    """Random ops: a stage with Dropout, Dropout2d, SDPA's dropout_p and
    randn_like noise, whose draws are a function of the "rng:0" input
    alone: F with one seed twice gives the same bits, with another seed
    other masks; I and W, and B, rebuild F's random values from the same
    seed (recompute "all": F saves nothing) or read the values F saved
    ("none"). The reference is eager autograd on the stage's ep.module()
    run through train_compile's SeededRandom with that seed: every
    rewritten op, the same draws."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    sys.path.insert(0, os.path.dirname(SCRIPT))
    import train_compile

    class Dropped(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin1, self.drop, self.lin2 = nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 8)
            self.drop2d = nn.Dropout2d(0.25)

        def forward(self, x):
            d = self.drop(self.lin1(x))
            q = d.reshape(2, 2, 8, 16)
            a = self.drop2d(F.scaled_dot_product_attention(q, q, q, dropout_p=0.2))
            a = a + 0.01 * torch.randn_like(a)
            return d, self.lin2(a.reshape(32, 16))

    torch.manual_seed(0)
    model = Dropped().train()
    x = torch.randn(32, 16)
    pt2 = os.path.join(outdir, "dropout.pt2")
    torch.export.save(torch.export.export(model, (x,)), pt2)
    spec = os.path.join(outdir, "dropout.spec.json")
    with open(spec, "w") as f:
        f.write('{"split_points": {}}')
    out = os.path.join(outdir, "dropout.1")
    cmd = [binary, "split", pt2, "--spec", spec, "--format", "pt2", "-o", out, "-q"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    source = os.path.join(out, "stage_000.pt2")
    stage = torch.export.load(source).module().to(device)
    params = {n: p.detach() for n, p in stage.named_parameters()}
    gen = torch.Generator().manual_seed(2)
    tangents = {0: torch.randn(32, 16, generator=gen).to(device), 1: torch.randn(32, 8, generator=gen).to(device)}
    x = x.to(device)
    rtol = RTOL if device == "cpu" else 1e-4
    checks, saved_bytes = 0, {}
    for label in labels:
        tag = f"dropout.{label}"
        answer, files = compile_programs(python, source, [{"dtype": "float32", "shape": [32, 16]}], [0], label,
                                         outdir, tag, device)
        saved_bytes[label] = answer["saved_bytes"]
        progs = answer["programs"]
        if sorted(progs) != ["B", "F", "I", "W"]:
            fail(f"{tag}: programs {sorted(progs)}, expected F, I, W, B")
        if answer.get("seeded_random_ops") != 4:
            fail(f"{tag}: {answer.get('seeded_random_ops')} random ops rewritten as seeded, expected 4 (dropout, "
                 "SDPA's dropout_p, Dropout2d, randn_like)")
        run = {k: torch._inductor.aoti_load_package(files[k]) for k in progs}
        env = {f"param:{n}": p for n, p in params.items()}
        env.update({"input:0": x, "tangent:0": tangents[0], "tangent:1": tangents[1]})
        seed = torch.tensor(0x9D2C5680A1, dtype=torch.int64, device=device)  # only the low 32 bits count

        def call(name):
            with torch.no_grad():
                outs = run[name](*[env[r].contiguous() for r in progs[name]["inputs"]])
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            return dict(zip(progs[name]["outputs"], outs))

        if "rng:0" not in progs["F"]["inputs"]:
            fail(f"{tag}: F does not read the seed (rng:0)")
        env["rng:0"] = seed + 1
        other = call("F")
        env["rng:0"] = seed
        env.update(call("F"))
        again = call("F")
        d = env["output:0"]
        kept = (d != 0).float().mean().item()
        if not 0.3 < kept < 0.7:
            fail(f"{tag}: F keeps {kept:.2f} of the values, dropout(0.5) keeps about half")
        if torch.equal(other["output:0"] != 0, d != 0):
            fail(f"{tag}: F drew the same mask for two seeds")
        if not all(torch.equal(again[r], env[r]) for r in again):
            fail(f"{tag}: F drew other values for the same seed")
        if label == "all":
            if saved_bytes[label] != 0:
                fail(f"{tag}: F saves {saved_bytes[label]} bytes; recompute all should save nothing")
            for name in ("I", "B"):
                if "rng:0" not in progs[name]["inputs"]:
                    fail(f"{tag}: {name} recomputes the dropout without the seed (rng:0)")
        elif saved_bytes[label] == 0:
            fail(f"{tag}: saved_bytes 0: the masks should be saved")
        # Eager, with the seed F was given.
        rng = train_compile.SeededRandom(seed)
        xs = x.clone().requires_grad_(True)
        ps = {n: p.clone().requires_grad_(True) for n, p in params.items()}
        ys = torch.func.functional_call(_Run(stage, rng), {"m." + n: p for n, p in ps.items()}, (xs,))
        close(f"{tag} output:0", d, ys[0].detach(), rtol=rtol)
        close(f"{tag} output:1", env["output:1"], ys[1].detach(), rtol=rtol)
        grads = torch.autograd.grad(list(ys), [xs] + list(ps.values()), [tangents[0], tangents[1]])
        after_f = dict(env)
        for order in (["I", "W"], ["B"]):
            env = dict(after_f)
            for name in order:
                env.update(call(name))
            what = f"{tag}.{'+'.join(order)}"
            close(f"{what} grad_input:0", env["grad_input:0"], grads[0], relative_atol=True, rtol=rtol)
            for n, g in zip(ps, grads[1:]):
                close(f"{what} grad:{n}", env[f"grad:{n}"], g, relative_atol=True, rtol=rtol)
            checks += 1 + len(ps)
        checks += 3
    return checks, saved_bytes


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    binary, outdir = args
    os.makedirs(outdir, exist_ok=True)
    models = opts.get("models", "llama_loss,gpt2_loss,dropout").split(",")
    device = opts.get("device", "cpu")
    if device != "cpu" and models != ["dropout"]:
        print("--device: only with --models=dropout", file=sys.stderr)
        return 2
    wanted = opts.get("policies", "none,all,layer").split(",")

    def policies(ep):
        table = {"none": "none", "all": "all"}
        if "layer" in wanted:
            table["layer"] = one_layer_regex(ep)
        return [(k, table[k]) for k in wanted]

    import torch

    start = time.monotonic()
    total, n_stages, n_requests, n_packages = 0, 0, 0, 0
    try:
        for model in models:
            if model == "dropout":
                checks, saved = check_dropout(sys.executable, binary, outdir,
                                              [w for w in wanted if w in ("none", "all")] or ["none", "all"], device)
                total += checks
                n_stages += 1
                n_requests += len(saved)
                n_packages += 4 * len(saved)  # F, I, W, B
                print(f"dropout: {checks} checks; saved_bytes " + ", ".join(f"{k} {v}" for k, v in saved.items()),
                      flush=True)
                continue
            for source in split(binary, model, outdir):
                tag = f"{model}.{os.path.splitext(os.path.basename(source))[0]}"
                checks, saved, seconds = check_stage(sys.executable, source, outdir, tag, policies)
                total += checks
                n_stages += 1
                n_requests += len(seconds)
                n_packages += sum(len(p or {}) for _, p in seconds.values())
                print(f"{tag}: {checks} checks; saved_bytes " + ", ".join(f"{k} {v}" for k, v in saved.items())
                      + "; compile " + ", ".join(f"{k} {s:.0f}s {p}" for k, (s, p) in seconds.items()), flush=True)
    except Failure as e:
        print(f"FAIL: {e}", flush=True)
        return 1
    print(f"train_programs: {total} checks passed ({n_stages} stages, {n_requests} compile requests, "
          f"{n_packages} packages, torch {torch.__version__}, {time.monotonic() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
