#!/usr/bin/env python3
"""Check a pipecut-run training run against an eager reference.

    check_train.py REPORT.json REF.safetensors [--state STATE.safetensors] [--rtol 1e-5] [--atol A]
    check_train.py --batch LIST   (one check per line: NAME, REPORT, REF, STATE, ATOL, tab-separated)

REPORT.json: pipecut-run's `--json` output holding "losses": [float, ...] (one
per optimizer step). Either a single JSON document, or text whose last
non-empty line is the JSON object (e.g. the whole stdout of a run).

REF.safetensors: a reference from scripts/fixtures/train_refs.py: `losses`
(float64 [steps]) and `param.<fqn>` (the final state_dict of the eager model);
its `state_atol` metadata is the default --atol (1e-7 without it): AdamW
references declare a looser one, see testdata/train/README.md.

Losses: |got - ref| <= rtol * |ref| for every step (printed side by side), and
as many steps as the reference.
--state: a safetensors file of the merged final parameters (keys: the
original FQNs, no `param.` prefix); every `param.<fqn>` of the reference must
have STATE[fqn] of the same shape with |got - ref| <= atol + rtol * |ref|
elementwise, and STATE must hold no other key. The worst key (largest error
relative to its tolerance) is reported with its max abs and max rel error.

Exit status: 0 all match, 1 anything differs or cannot be read.
"""

import argparse
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from refio import read_tensors  # noqa: E402


class CheckError(Exception):
    pass


def load_report(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CheckError(f"{path}: cannot read: {e}")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError:
        lines = [ln for ln in text.splitlines() if ln.strip()]
        if not lines:
            raise CheckError(f"{path}: empty report")
        try:
            doc = json.loads(lines[-1])
        except json.JSONDecodeError as e:
            raise CheckError(f"{path}: neither a JSON document nor text whose last non-empty line is JSON ({e})")
    if not isinstance(doc, dict):
        raise CheckError(f"{path}: the report is a JSON {type(doc).__name__}, not an object")
    if "losses" not in doc:
        raise CheckError(f"{path}: no \"losses\" in the report (keys: {', '.join(sorted(doc)) or 'none'})")
    losses = doc["losses"]
    if not isinstance(losses, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                               for v in losses):
        raise CheckError(f"{path}: \"losses\" is not a list of numbers: {json.dumps(losses)[:200]}")
    return [float(v) for v in losses]


def load_tensors(path, what):
    try:
        return read_tensors(path)
    except (OSError, ValueError, KeyError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckError(f"{what} {path}: cannot read: {e}")


def check_losses(got, ref_losses, rtol):
    ref = [float(v) for v in ref_losses.double().tolist()]
    ok = True
    print(f"{'step':>4}  {'reference':>20}  {'pipecut':>20}  {'rel err':>10}")
    for k in range(max(len(ref), len(got))):
        r = ref[k] if k < len(ref) else None
        g = got[k] if k < len(got) else None
        if r is None or g is None:
            ok = False
            print(f"{k + 1:>4}  {'-' if r is None else f'{r:.12g}':>20}  {'-' if g is None else f'{g:.12g}':>20}"
                  f"  {'MISSING':>10}")
            continue
        rel = abs(g - r) / abs(r) if r != 0 else (0.0 if g == 0 else math.inf)
        bad = not (abs(g - r) <= rtol * abs(r)) or math.isnan(g)
        ok = ok and not bad
        print(f"{k + 1:>4}  {r:>20.12g}  {g:>20.12g}  {rel:>10.3g}{'  > rtol' if bad else ''}")
    msgs = []
    if len(got) != len(ref):
        msgs.append(f"the report has {len(got)} losses, the reference {len(ref)} steps")
    elif not ok:
        msgs.append(f"losses differ beyond rtol {rtol:g}")
    return msgs


def check_state(state, ref, rtol, atol, non_persistent):
    msgs = []
    want = {k[len("param."):]: v for k, v in ref.items() if k.startswith("param.")}
    missing = sorted(set(want) - set(state))
    extra = sorted(set(state) - set(want))
    if missing:
        msgs.append(f"{len(missing)} reference parameter(s) missing from the state: {', '.join(missing[:10])}"
                    + (" ..." if len(missing) > 10 else ""))
    if extra:
        notes = [f"{k} (a non-persistent buffer: not in state_dict())" if k in non_persistent else k
                 for k in extra[:10]]
        msgs.append(f"{len(extra)} key(s) in the state that the reference lacks: {', '.join(notes)}"
                    + (" ..." if len(extra) > 10 else ""))

    worst = None  # (ratio, key, max_abs, max_rel)
    bad_keys = []
    for key in sorted(set(want) & set(state)):
        r, g = want[key], state[key]
        if tuple(r.shape) != tuple(g.shape):
            bad_keys.append(key)
            msgs.append(f"{key}: shape {list(g.shape)} != reference {list(r.shape)}")
            continue
        if not g.dtype.is_floating_point:
            bad_keys.append(key)
            msgs.append(f"{key}: dtype {g.dtype} is not floating point (reference {r.dtype})")
            continue
        r64, g64 = r.double(), g.double()
        diff = (g64 - r64).abs()
        if diff.numel() == 0:
            continue
        if not torch.isfinite(g64).all():
            bad_keys.append(key)
            msgs.append(f"{key}: non-finite values in the state")
            continue
        ratio = float((diff / (atol + rtol * r64.abs())).max())
        max_abs = float(diff.max())
        max_rel = float((diff / r64.abs().clamp(min=1e-30)).max())
        if worst is None or ratio > worst[0]:
            worst = (ratio, key, max_abs, max_rel)
        if ratio > 1.0:
            bad_keys.append(key)
    n = len(set(want) & set(state))
    if worst is not None:
        ratio, key, max_abs, max_rel = worst
        print(f"state: {n} tensors compared (rtol {rtol:g}, atol {atol:g}); worst {key}: "
              f"max abs err {max_abs:.3g}, max rel err {max_rel:.3g} ({ratio:.3g}x the tolerance)")
    else:
        print(f"state: {n} tensors compared")
    mismatched = [k for k in bad_keys if not any(m.startswith(k + ":") for m in msgs)]
    if mismatched:
        msgs.append(f"{len(mismatched)} parameter(s) differ beyond rtol {rtol:g} / atol {atol:g}: "
                    + ", ".join(mismatched[:10]) + (" ..." if len(mismatched) > 10 else ""))
    return msgs


def check_one(report, ref_path, state_path, rtol, atol):
    """Checks one run; prints the comparison; returns 0 (match) or 1."""
    msgs = []
    try:
        ref, meta = load_tensors(ref_path, "reference")
        if "losses" not in ref:
            raise CheckError(f"reference {ref_path}: no `losses` tensor (is it a train_refs.py reference?)")
        got = load_report(report)
        desc = " ".join(f"{k}={meta[k]}" for k in ("model", "optimizer", "steps", "microbatches") if k in meta)
        print(f"reference {os.path.basename(ref_path)}: {desc}")
        if "optimizer_flags" in meta:
            print(f"  optimizer flags: {meta['optimizer_flags']}")
        msgs += check_losses(got, ref["losses"], rtol)
        if state_path:
            if atol is None:
                atol = float(meta.get("state_atol", "1e-7"))
            state, _ = load_tensors(state_path, "state")
            try:
                non_persistent = set(json.loads(meta.get("non_persistent_buffers", "[]")))
            except json.JSONDecodeError:
                non_persistent = set()
            msgs += check_state(state, ref, rtol, atol, non_persistent)
    except CheckError as e:
        print(f"check_train: FAIL: {e}", file=sys.stderr)
        return 1
    if msgs:
        for m in msgs:
            print(f"check_train: FAIL: {m}", file=sys.stderr)
        return 1
    print("check_train: OK" + (" (losses and state)" if state_path else " (losses)"))
    return 0


def check_batch(path, rtol):
    """--batch FILE: one check per line, `NAME<TAB>REPORT<TAB>REF<TAB>STATE<TAB>ATOL` (STATE and ATOL may be
    empty), in one process (importing torch once instead of per run). Prints `PASS NAME` or `FAIL NAME` per
    line after that line's details; returns 1 if any failed."""
    failed = 0
    with open(path, encoding="utf-8") as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip()]
    for ln in lines:
        name, report, ref, state, atol = (ln.split("\t") + [""] * 5)[:5]
        rc = check_one(report, ref, state or None, rtol, float(atol) if atol else None)
        sys.stdout.flush()
        print(f"{'PASS' if rc == 0 else 'FAIL'} {name}", flush=True)
        failed += rc
    return 1 if failed else 0


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--batch":
        return check_batch(sys.argv[2], 1e-5)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 epilog=__doc__.split("\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", metavar="REPORT.json")
    ap.add_argument("ref", metavar="REF.safetensors")
    ap.add_argument("--state", metavar="STATE.safetensors")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=None,
                    help="state tolerance; default: the reference's state_atol metadata, else 1e-7")
    a = ap.parse_args()
    return check_one(a.report, a.ref, a.state, a.rtol, a.atol)


if __name__ == "__main__":
    sys.exit(main())
