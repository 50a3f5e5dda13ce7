#!/usr/bin/env python3
"""Chain a pipecut split directory's stages in Python and compare with references.

usage: check_stages.py OUTDIR REF.safetensors [--format torchscript|pt2|both] [--atol A]
       (several OUTDIR REF pairs may follow one another)

Feeds every stage as manifest.json says (user inputs and other stages' outputs
to the stage inputs that name them), through torch.jit.load for the .pt stages
and torch.export.load for the .pt2 stages. Exit 0 when every final output is
within atol of the reference, 1 on a mismatch, 2 when something cannot load.
"""
import argparse
import json
import os
import sys
import warnings

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refio import read_ref  # noqa: E402

warnings.filterwarnings("ignore")


def load_stage(path, fmt):
    if fmt == "torchscript":
        m = torch.jit.load(path)
        m.eval()
        return m
    ep = torch.export.load(path)
    return ep.module()


def run_chain(outdir, inputs, fmt):
    with open(os.path.join(outdir, "manifest.json")) as f:
        manifest = json.load(f)
    results = []
    for stage in manifest["stages"]:
        files = [f for f in stage["files"] if f["format"] == fmt]
        if not files:
            raise RuntimeError(f"stage {stage.get('index', 0)} has no {fmt} file")
        module = load_stage(os.path.join(outdir, files[0]["path"]), fmt)
        args = []
        for inp in stage.get("inputs", []):
            src = inp["source"]
            if "user_input" in src:
                args.append(inputs[int(src["user_input"])])
            else:
                ref = src["stage_output"]
                args.append(results[int(ref.get("stage", 0))][int(ref.get("output", 0))])
        with torch.inference_mode():
            out = module(*args)
        results.append(list(out) if isinstance(out, (tuple, list)) else [out])
    finals = []
    for o in manifest["outputs"]:
        src = o["source"]
        if "user_input" in src:
            finals.append(inputs[int(src["user_input"])])
        else:
            ref = src["stage_output"]
            finals.append(results[int(ref.get("stage", 0))][int(ref.get("output", 0))])
    return finals


def check(outdir, ref_path, fmt, atol):
    inputs, outputs, _ = read_ref(ref_path)
    try:
        got = run_chain(outdir, inputs, fmt)
    except Exception as e:  # noqa: BLE001 - report any load/run failure
        print(f"error {outdir} [{fmt}]: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return 2
    worst = 0.0
    for j, (g, w) in enumerate(zip(got, outputs)):
        if g.shape != w.shape or g.dtype != w.dtype:
            print(f"mismatch {outdir} [{fmt}]: output {j} is {g.dtype}{list(g.shape)}, reference {w.dtype}{list(w.shape)}")
            return 1
        err = (g.double() - w.double()).abs().max().item() if w.numel() else 0.0
        worst = max(worst, err)
        if not err <= atol:
            print(f"mismatch {outdir} [{fmt}]: output {j} max abs error {err:.3g} > {atol}")
            return 1
    if len(got) != len(outputs):
        print(f"mismatch {outdir} [{fmt}]: {len(got)} outputs, reference has {len(outputs)}")
        return 1
    print(f"ok {outdir} [{fmt}]: {len(got)} outputs match (max abs err {worst:.3g})")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pairs", nargs="+", help="OUTDIR REF pairs")
    ap.add_argument("--format", choices=["torchscript", "pt2", "both"], default="both")
    ap.add_argument("--atol", type=float, default=1e-5)
    a = ap.parse_args()
    if len(a.pairs) % 2:
        ap.error("give OUTDIR REF pairs")
    formats = ["torchscript", "pt2"] if a.format == "both" else [a.format]
    rc = 0
    for i in range(0, len(a.pairs), 2):
        for fmt in formats:
            rc = max(rc, check(a.pairs[i], a.pairs[i + 1], fmt, a.atol))
    return rc


if __name__ == "__main__":
    sys.exit(main())
