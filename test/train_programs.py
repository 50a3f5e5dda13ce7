"""Checks scripts/train_compile.py's training programs against eager autograd.

Usage: python test/train_programs.py PIPECUT_BINARY OUTDIR [--models llama_loss,gpt2_loss] [--policies none,all,layer]

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


def compile_programs(python, source, inputs, grad_inputs, policy, outdir, tag):
    outputs = {p: os.path.join(outdir, f"{tag}.{p}.pt2") for p in "FIWB"}
    req = {"mode": "compile_train", "source": source, "device": "cpu", "options": {}, "inputs": inputs,
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


def close(name, got, want):
    import torch

    if got.shape != want.shape or got.dtype != want.dtype:
        fail(f"{name}: {got.dtype}{list(got.shape)} where eager gives {want.dtype}{list(want.shape)}")
    if want.is_floating_point():
        if not torch.allclose(got, want, rtol=RTOL, atol=ATOL):
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
        expect = ["F", "I", "W"] if grad_inputs else ["F", "B"]
        if sorted(progs) != sorted(expect):
            fail(f"{tag}.{label}: programs {sorted(progs)}, expected {expect}")
        if sorted(answer["tangents"]) != tangent_idx:
            fail(f"{tag}.{label}: tangents {answer['tangents']}, eager's outputs requiring grad are {tangent_idx}")
        env = {f"param:{n}": p.detach() for n, p in params.items()}
        env.update({f"buffer:{n}": t for n, t in tensors.items() if isinstance(t, torch.Tensor)})
        env.update({f"input:{k}": x for k, x in enumerate(inputs)})
        env.update({f"tangent:{k}": t for k, t in tangents.items()})
        for name in expect:
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
        for k, y in enumerate(ys):
            close(f"{tag}.{label} output:{k}", env[f"output:{k}"], y.detach())
            checks += 1
        for k, g in want_gx.items():
            close(f"{tag}.{label} grad_input:{k}", env[f"grad_input:{k}"], g if g is not None else torch.zeros_like(xs[k]))
            checks += 1
        for n, g in want_gp.items():
            if g is None:
                if f"grad:{n}" in env:
                    close(f"{tag}.{label} grad:{n}", env[f"grad:{n}"], torch.zeros_like(params[n]))
                continue
            if f"grad:{n}" not in env:
                fail(f"{tag}.{label}: no grad:{n}, eager's is not None")
            close(f"{tag}.{label} grad:{n}", env[f"grad:{n}"], g)
            checks += 1
    if "all" in saved_bytes and "none" in saved_bytes:
        a, n = saved_bytes["all"], saved_bytes["none"]
        if not a < n:
            fail(f"{tag}: saved_bytes all {a} is not below none {n}")
        if "layer" in saved_bytes and not a <= saved_bytes["layer"] <= n:
            fail(f"{tag}: saved_bytes of the one-layer regex {saved_bytes['layer']} is not between all {a} and none {n}")
        checks += 1
    return checks, saved_bytes, seconds


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    binary, outdir = args
    os.makedirs(outdir, exist_ok=True)
    models = opts.get("models", "llama_loss,gpt2_loss").split(",")
    wanted = opts.get("policies", "none,all,layer").split(",")

    def policies(ep):
        table = {"none": "none", "all": "all"}
        if "layer" in wanted:
            table["layer"] = one_layer_regex(ep)
        return [(k, table[k]) for k in wanted]

    import torch

    start = time.monotonic()
    total, n_stages, n_compiles = 0, 0, 0
    try:
        for model in models:
            for source in split(binary, model, outdir):
                tag = f"{model}.{os.path.splitext(os.path.basename(source))[0]}"
                checks, saved, seconds = check_stage(sys.executable, source, outdir, tag, policies)
                total += checks
                n_stages += 1
                n_compiles += len(seconds)
                print(f"{tag}: {checks} checks; saved_bytes " + ", ".join(f"{k} {v}" for k, v in saved.items())
                      + "; compile " + ", ".join(f"{k} {s:.0f}s {p}" for k, (s, p) in seconds.items()), flush=True)
    except Failure as e:
        print(f"FAIL: {e}", flush=True)
        return 1
    print(f"train_programs: {total} checks passed ({n_stages} stages, {n_compiles} compiles, torch {torch.__version__}, "
          f"{time.monotonic() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
