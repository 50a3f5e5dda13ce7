#!/usr/bin/env python3
"""Check a `.pt2` exported program against a reference file.

    check_pt2.py MODEL.pt2 REF.safetensors [MODEL2.pt2 REF2.safetensors ...] [--exact] [--atol A]
    check_pt2.py --twins MODEL.pt2 TWIN.pt2 REF.safetensors [...]

Loads each model with torch.export.load, rebuilds (args, kwargs) from the
reference's flat inputs with the program's input spec, runs ep.module() and
compares the flattened outputs with the reference outputs within a per-dtype
tolerance (scripts/oracles.py; --atol overrides), or bit for bit with --exact
(only for references computed on this machine).

With --twins, each MODEL is also run next to TWIN (e.g. the program pipecut
rewrote, and the original), both here, and their outputs must agree bit for bit.

Exit status (worst over all pairs): 0 all match, 1 an output mismatched,
2 a model or reference could not be loaded or run.
"""

import argparse
import logging
import os
import sys

import torch
import torch.utils._pytree as pytree

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from oracles import compare  # noqa: E402
from refio import read_ref  # noqa: E402


def first_line(exc):
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def describe_load_error(exc):
    msg = first_line(exc)
    cause = exc.__cause__ or exc.__context__
    if cause is not None:
        msg += f" (caused by {first_line(cause)})"
    return msg


class _Capture(logging.Handler):
    """Collects the exceptions torch.export.load logs (and swallows) before raising."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.excs = []

    def emit(self, record):
        if record.exc_info and record.exc_info[1] is not None:
            self.excs.append(record.exc_info[1])


def load_program(path):
    """torch.export.load, but failures name the real error instead of 'see the warnings above'."""
    logger = logging.getLogger("torch.export")
    cap = _Capture()
    old = (logger.propagate, logger.level)
    logger.addHandler(cap)
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    try:
        return torch.export.load(path)
    except Exception as e:
        msg = describe_load_error(e)
        for logged in cap.excs:
            root = logged
            while root.__cause__ is not None or root.__context__ is not None:
                root = root.__cause__ or root.__context__
            detail = first_line(logged)
            if len(detail) > 160:
                detail = detail[:157] + "..."
            msg += f" [{detail}"
            if root is not logged:
                msg += f"; root cause {first_line(root)}"
            msg += "]"
        raise RuntimeError(msg) from e
    finally:
        logger.removeHandler(cap)
        logger.propagate, _ = old
        logger.setLevel(old[1])


def run_program(path, inputs):
    """Returns (flat outputs, None) or (None, error message)."""
    try:
        ep = load_program(path)
    except Exception as e:
        return None, f"cannot load model: {first_line(e).removeprefix('RuntimeError: ')}"
    try:
        args, kwargs = pytree.tree_unflatten(inputs, ep.call_spec.in_spec)
        flat, _ = pytree.tree_flatten(ep.module()(*args, **kwargs))
    except Exception as e:
        return None, f"cannot run model: {describe_load_error(e)}"
    return [t.detach() if isinstance(t, torch.Tensor) else t for t in flat], None


def check_one(model_path, ref_path, twin_path, exact, atol):
    name = os.path.basename(model_path)
    try:
        inputs, ref_outputs, meta = read_ref(ref_path)
    except Exception as e:
        print(f"error {name}: cannot read reference {ref_path}: {first_line(e)}")
        return 2
    got, err = run_program(model_path, inputs)
    if err:
        print(f"error {name}: {err}")
        return 2
    ok, worst, why = compare(got, ref_outputs, exact=exact, compute_dtype=meta.get("compute_dtype", ""), atol=atol)
    if not ok:
        print(f"mismatch {name}: against {os.path.basename(ref_path)}: {why}")
        return 1
    note = ""
    if twin_path:
        twin, err = run_program(twin_path, inputs)
        if err:
            print(f"error {os.path.basename(twin_path)}: {err}")
            return 2
        same, _, why = compare(got, twin, exact=True)
        if not same:
            print(f"mismatch {name}: against {os.path.basename(twin_path)} run here: {why}")
            return 1
        note = f", bitwise equal to {os.path.basename(twin_path)}"
    print(f"ok {name}: {len(got)} outputs match (max abs err {worst:.3g}{note})")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="MODEL.pt2 [TWIN.pt2] REF.safetensors")
    ap.add_argument("--twins", action="store_true", help="files come as MODEL TWIN REF triples")
    ap.add_argument("--exact", action="store_true", help="bitwise against REF (computed on this machine)")
    ap.add_argument("--atol", type=float, default=None, help="allowed abs error against REF (default: by dtype)")
    opts = ap.parse_args(argv)
    group = 3 if opts.twins else 2
    if len(opts.files) % group:
        ap.error("expected MODEL TWIN REF triples" if opts.twins else "expected MODEL.pt2 REF.safetensors pairs")
    worst = 0
    for k in range(0, len(opts.files), group):
        model_path, ref_path = opts.files[k], opts.files[k + group - 1]
        twin = opts.files[k + 1] if opts.twins else None
        worst = max(worst, check_one(model_path, ref_path, twin, opts.exact, opts.atol))
    return worst


if __name__ == "__main__":
    sys.exit(main())
