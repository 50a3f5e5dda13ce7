"""`pipecut split --stages N --balance params|flops|time` end to end on a Llama
whose vocabulary outweighs its layers (vocab 32000, hidden 256, 12 layers):
the embedding and the LM head each weigh about 8 layers.

Checks: --balance params reaches the optimum of a brute force over the same
module boundaries and beats the even split by layers; the chosen cuts are an
ordinary split spec that reproduces the split by hand; the stages compute
what PyTorch computes; --balance flops and time put the LM head (the heaviest
matmul by far) nearly alone; and every bad request exits as documented.
Usage: balance_llama.py PIPECUT PIPECUT_RUN OUT
"""
import hashlib
import itertools
import json
import os
import re
import subprocess
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "scripts"))
from refio import write_ref  # noqa: E402
from tiny_llama import llama_config, logits_model  # noqa: E402

pipecut, runner, out = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
failures = []


def run(*args, want=0, contains=()):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    text = p.stdout + p.stderr
    if p.returncode != want or any(c not in text for c in contains):
        failures.append(f"{' '.join(map(str, args))}: exit {p.returncode} (wanted {want}), output:\n{text[-2000:]}")
    return text


def check(cond, what):
    if not cond:
        failures.append(what)


torch.manual_seed(0)
cfg = llama_config(layers=12, hidden=256, intermediate=512, heads=4, kv_heads=2, vocab=32000, max_positions=64)
model = logits_model(cfg).eval()
ids = torch.randint(0, 32000, (2, 16), dtype=torch.int64, generator=torch.Generator().manual_seed(1))
pt2 = os.path.join(out, "llama_vocab.pt2")
torch.export.save(torch.export.export(model, (ids,)), pt2)
with torch.no_grad():
    ref_out = model(ids)
ref = os.path.join(out, "llama_vocab.ref.safetensors")
write_ref(ref, [ids], [ref_out], {"model": "llama_vocab"})

# The brute force's units: every module the balancer may cut around, in order.
blocks = ["model.embed_tokens", "model.rotary_emb"] + [f"model.layers.{i}" for i in range(12)] + ["model.norm", "lm_head"]
tensors = dict(model.named_parameters())
tensors.update(dict(model.named_buffers()))
block_bytes = [sum(t.numel() * t.element_size() for n, t in tensors.items() if n.startswith(b + ".")) for b in blocks]


def heaviest(cuts):
    edges = [0, *cuts, len(blocks)]
    return max(sum(block_bytes[a:b]) for a, b in zip(edges, edges[1:]))


def stage_costs(text):
    return [float(m.group(2)) for m in re.finditer(r"^  stage (\d+): ([0-9.e+]+) (?:B|ms|FLOPs)[, ]", text, re.M)]


for n in (2, 3, 4):
    text = run(pipecut, "split", pt2, "--stages", n, "--balance", "params", "--preview")
    got = max(stage_costs(text) or [0])
    best = min(heaviest(c) for c in itertools.combinations(range(1, len(blocks)), n - 1))
    check(got == best, f"--balance params into {n}: heaviest stage {got} B, brute force finds {best} B\n{text}")
    # torchtitan's default: the layers dealt evenly, embedding first, head last.
    per = 12 // n
    even = [2 + per * k for k in range(1, n)]
    if n > 2 or heaviest(even) > best:  # with 2 stages the even split happens to be optimal here
        check(best < heaviest(even), f"--balance params into {n} does not beat the even split ({best} vs {heaviest(even)})")
    print(f"params, {n} stages: heaviest {got / 2**20:.2f} MiB (brute force {best / 2**20:.2f}, even by layers "
          f"{heaviest(even) / 2**20:.2f})")

# A real split: its spec, given back by hand, reproduces the very same manifest.
bal = os.path.join(out, "balanced4")
run(pipecut, "split", pt2, "--stages", 4, "--balance", "params", "-o", bal, "-q")
with open(os.path.join(bal, "manifest.json")) as f:
    spec = json.load(f)["split_spec"]
check("split_points" in json.loads(spec), f"the balanced spec is not split points: {spec}")
spec_file = os.path.join(out, "balanced4.json")
with open(spec_file, "w") as f:
    f.write(spec)
byhand = os.path.join(out, "byhand4")
run(pipecut, "split", pt2, "--spec", spec_file, "-o", byhand, "-q")
for name in ("manifest.json", "manifest.pb", "stage_000.pt", "stage_003.pt2"):
    with open(os.path.join(bal, name), "rb") as a, open(os.path.join(byhand, name), "rb") as b:
        check(a.read() == b.read(), f"{name} differs between --balance and its spec given by hand")
run(runner, bal, "--inputs", ref, "--check", ref, "-q")

# FLOPs: the head's 2 x 32000 x 256 per token is ~10 layers' worth.
def last_stage_layers(text):
    """Decoder layers in the last stage (a layer the cut splits counts once), from the preview's module list."""
    m = re.search(r"^  stage 1: \d+ nodes.*\n    modules:(.*)", text, re.M)
    return None if not m else len({mod.split(".")[2] for mod in m.group(1).split() if mod.startswith("model.layers.")})


# By time the head weighs less than by FLOPs (its one large product runs at
# the matrix units' best rate, a layer's attention and norms do not), but
# still several layers: the head's stage keeps fewer than the even split's 6.
FEW_LAYERS = 4


text = run(pipecut, "split", pt2, "--stages", 2, "--balance", "flops", "--preview")
check(last_stage_layers(text) in (0, 1), f"--balance flops into 2 should leave the head nearly alone:\n{text}")

# Time: profile the one-stage split, balance by it.
whole = os.path.join(out, "whole")
spec_whole = os.path.join(out, "whole.json")
with open(spec_whole, "w") as f:
    f.write('{"split_points": {}}')
run(pipecut, "split", pt2, "--spec", spec_whole, "-o", whole, "-q")
profile = os.path.join(out, "profile.json")
run(runner, whole, "--profile", profile, "--inputs", ref, "--threads", 1, "--iterations", 5, "-q")
if not os.path.exists(profile):
    print("\n\n".join(failures))
    sys.exit(1)
text = run(pipecut, "split", pt2, "--stages", 2, "--balance", "time", "--cost", profile, "--preview")
costs = stage_costs(text)
check(len(costs) == 2, f"--balance time printed no stage costs:\n{text}")
check(last_stage_layers(text) is not None and last_stage_layers(text) <= FEW_LAYERS,
      f"--balance time into 2 should leave the head with few layers:\n{text}")
print("time, 2 stages:", " / ".join(f"{c:.3f} ms" for c in costs))

# Transfers: the profile says what moving a MiB costs each side's CPU, and
# --balance time charges every stage for what it receives and sends, stage 0
# (rank 0) also for the final outputs it receives.
with open(profile) as f:
    prof = json.load(f)
tr = prof.get("transfer", {})
check(tr.get("method") == "loopback-tcp" and tr.get("send_ms_per_mib", 0) > 0 and tr.get("recv_ms_per_mib", 0) > 0,
      f"the CPU profile has no measured transfer: {tr}")
check("of it moving values" in text, f"--balance time shows no transfer cost:\n{text}")


def preview_with(name, profile_json):
    path = os.path.join(out, name + ".json")
    with open(path, "w") as f:
        json.dump(profile_json, f)
    return run(pipecut, "split", pt2, "--stages", 2, "--balance", "time", "--cost", path, "--preview")


# No compute, receiving only: stage 0 costs exactly the logits it receives
# (2 x 16 x 32000 float32), at 1 ms per MiB.
text = preview_with("receive_only", dict(prof, nodes=[dict(n, ms=0.0) for n in prof["nodes"]],
                                         transfer=dict(tr, send_ms_per_mib=0.0, recv_ms_per_mib=1.0)))
logits_mib = 2 * 16 * 32000 * 4 / 2**20
check(stage_costs(text)[:1] == [round(logits_mib, 3)], f"stage 0 should cost {logits_mib:.3f} ms:\n{text}")
# A profile without "transfer" (CUDA stages, or written before it) balances compute alone.
text = preview_with("no_transfer", {k: v for k, v in prof.items() if k != "transfer"})
check("moving values" not in text and last_stage_layers(text) is not None and last_stage_layers(text) <= FEW_LAYERS,
      f"a profile without transfer should balance compute only:\n{text}")
# Receiving the logits three times as dear as the whole forward: stage 0 is the
# heaviest wherever the cut goes, so the balancer can only shrink it, and every
# layer goes to the last stage. (At once the whole forward, the two stages tie
# within one layer's time and the measured noise decides.)
heavy = dict(tr, recv_ms_per_mib=3 * prof["total_ms"] / logits_mib)
text = preview_with("heavy_receive", dict(prof, transfer=heavy))
check(last_stage_layers(text) == 12, f"a dear receive should move every layer off stage 0:\n{text}")
bad_rate = os.path.join(out, "bad_rate.json")
with open(bad_rate, "w") as f:
    json.dump(dict(prof, transfer=dict(tr, recv_ms_per_mib=-1)), f)
run(pipecut, "split", pt2, "--stages", 2, "--balance", "time", "--cost", bad_rate, "--preview", want=2,
    contains=(bad_rate, "transfer.recv_ms_per_mib", "finite time >= 0"))

# Bad requests.
other = dict(prof, source_directory_sha256="0" * 64)
bad = os.path.join(out, "other_model.json")
with open(bad, "w") as f:
    json.dump(other, f)
run(pipecut, "split", pt2, "--stages", 2, "--balance", "time", "--cost", bad, "--preview", want=2,
    contains=(bad, "source_directory_sha256", "measured on another model"))
# A profile from before source_directory_sha256: checked by the whole file's hash.
old_style = {k: v for k, v in prof.items() if k != "source_directory_sha256"}
with open(bad, "w") as f:
    json.dump(dict(old_style, source_sha256="0" * 64), f)
run(pipecut, "split", pt2, "--stages", 2, "--balance", "time", "--cost", bad, "--preview", want=2,
    contains=(bad, "source_sha256", "measured on another model"))
with open(bad, "w") as f:
    json.dump(dict(old_style, source_sha256=hashlib.sha256(open(pt2, "rb").read()).hexdigest()), f)
run(pipecut, "split", pt2, "--stages", 2, "--balance", "time", "--cost", bad, "--preview")
missing = dict(prof, nodes=prof["nodes"][:-1])
with open(bad, "w") as f:
    json.dump(missing, f)
run(pipecut, "split", pt2, "--stages", 2, "--balance", "time", "--cost", bad, "--preview", want=2,
    contains=(bad, f"no time for node '{prof['nodes'][-1]['name']}'"))
run(pipecut, "split", pt2, "--stages", 0, "--balance", "params", "--preview", want=2, contains=("--stages", "at least 1"))
run(pipecut, "split", pt2, "--stages", 500, "--balance", "params", "--preview", want=2,
    contains=(pt2, "500 stages need 499 cuts"))
run(pipecut, "split", pt2, "--stages", 2, "--preview", want=1, contains=("--balance",))
run(pipecut, "split", pt2, "--stages", 2, "--balance", "speed", "--preview", want=1, contains=("speed",))
run(pipecut, "split", pt2, "--stages", 2, "--balance", "time", "--preview", want=1, contains=("--cost",))
run(pipecut, "split", pt2, "--stages", 2, "--balance", "params", "--spec", spec_whole, "--preview", want=1)

if failures:
    print("\n\n".join(failures))
    sys.exit(1)
print("balance_llama: ok")
