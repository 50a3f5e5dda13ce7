#!/usr/bin/env python3
"""Chain a pipecut split directory's stages in Python and compare with references.

usage: check_stages.py OUTDIR WHOLE REF.safetensors [OUTDIR WHOLE REF ...] [--format torchscript|pt2|both] [--atol A]

Feeds every stage as manifest.json says (user inputs and other stages' outputs
to the stage inputs that name them), through torch.jit.load for the .pt stages
and torch.export.load for the .pt2 stages (whose every record must also match
the CRC-32 its zip directory states: pipecut copies weights' CRC-32s from the
source). The final outputs must be within a
per-dtype tolerance of REF (scripts/oracles.py; --atol overrides), and bit for
bit equal to those of WHOLE, the same program unsplit (a one-stage split of
`{}`) chained the same way here; WHOLE may be "-" to skip that.
Exit 0 when all agree, 1 on a mismatch, 2 when something cannot load.
"""
import argparse
import json
import os
import sys
import warnings
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracles import compare  # noqa: E402
from refio import read_ref  # noqa: E402

warnings.filterwarnings("ignore")


def load_stage(path, fmt):
    if fmt == "torchscript":
        m = torch.jit.load(path)
        m.eval()
        return m
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
    if bad is not None:
        raise RuntimeError(f"{path}: record {bad} does not match the CRC-32 of its directory entry")
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


def check(outdir, whole, ref_path, fmt, atol):
    inputs, outputs, meta = read_ref(ref_path)
    try:
        got = run_chain(outdir, inputs, fmt)
        twin = run_chain(whole, inputs, fmt) if whole != "-" else None
    except Exception as e:  # noqa: BLE001 - report any load/run failure
        print(f"error {outdir} [{fmt}]: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return 2
    ok, worst, why = compare(got, outputs, compute_dtype=meta.get("compute_dtype", ""), atol=atol)
    if not ok:
        print(f"mismatch {outdir} [{fmt}]: against {os.path.basename(ref_path)}: {why}")
        return 1
    note = ""
    if twin is not None:
        same, _, why = compare(got, twin, exact=True)
        if not same:
            print(f"mismatch {outdir} [{fmt}]: against the unsplit {whole}: {why}")
            return 1
        note = ", bitwise equal to the unsplit program"
    print(f"ok {outdir} [{fmt}]: {len(got)} outputs match (max abs err {worst:.3g}{note})")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("triples", nargs="+", help="OUTDIR WHOLE REF triples")
    ap.add_argument("--format", choices=["torchscript", "pt2", "both"], default="both")
    ap.add_argument("--atol", type=float, default=None, help="abs tolerance against REF (default: by dtype)")
    a = ap.parse_args()
    if len(a.triples) % 3:
        ap.error("give OUTDIR WHOLE REF triples")
    formats = ["torchscript", "pt2"] if a.format == "both" else [a.format]
    rc = 0
    for i in range(0, len(a.triples), 3):
        for fmt in formats:
            rc = max(rc, check(a.triples[i], a.triples[i + 1], a.triples[i + 2], fmt, a.atol))
    return rc


if __name__ == "__main__":
    sys.exit(main())
