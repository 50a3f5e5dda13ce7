#!/usr/bin/env python3
"""Check a `.pt2` exported program against a reference file.

    check_pt2.py MODEL.pt2 REF.safetensors [MODEL2.pt2 REF2.safetensors ...] [--atol A]

Loads each model with torch.export.load, rebuilds (args, kwargs) from the
reference's flat inputs with the program's input spec, runs ep.module() and
compares the flattened outputs with the reference outputs: exactly (same dtype,
shape and values) by default, or max |a - b| <= A with --atol.

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


def max_abs_err(a, b):
    if a.numel() == 0:
        return 0.0
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return float((a != b).any())
    return float((a.double() - b.double()).abs().max())


def check_one(model_path, ref_path, atol):
    name = os.path.basename(model_path)
    try:
        inputs, ref_outputs, _meta = read_ref(ref_path)
    except Exception as e:
        print(f"error {name}: cannot read reference {ref_path}: {first_line(e)}")
        return 2
    try:
        ep = load_program(model_path)
    except Exception as e:
        print(f"error {name}: cannot load model: {first_line(e).removeprefix('RuntimeError: ')}")
        return 2
    try:
        args, kwargs = pytree.tree_unflatten(inputs, ep.call_spec.in_spec)
        outputs = ep.module()(*args, **kwargs)
        flat_out, _ = pytree.tree_flatten(outputs)
    except Exception as e:
        print(f"error {name}: cannot run model: {describe_load_error(e)}")
        return 2

    if len(flat_out) != len(ref_outputs):
        print(f"mismatch {name}: {len(flat_out)} outputs, reference has {len(ref_outputs)}")
        return 1
    worst = 0.0
    for j, (got, want) in enumerate(zip(flat_out, ref_outputs)):
        if not isinstance(got, torch.Tensor):
            print(f"mismatch {name}: output {j} is {type(got).__name__}, not a tensor")
            return 1
        got = got.detach()
        if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
            print(f"mismatch {name}: output {j} is {got.dtype}{list(got.shape)}, "
                  f"reference {want.dtype}{list(want.shape)}")
            return 1
        err = max_abs_err(got, want)
        worst = max(worst, err)
        if atol is None:
            if not torch.equal(got, want):
                print(f"mismatch {name}: output {j} differs (max abs err {err:.3g}, exact match required)")
                return 1
        elif not err <= atol:  # also catches NaN
            print(f"mismatch {name}: output {j} max abs err {err:.3g} > atol {atol:g}")
            return 1
    print(f"ok {name}: {len(flat_out)} outputs match (max abs err {worst:.3g})")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", metavar="MODEL.pt2 REF.safetensors")
    ap.add_argument("--atol", type=float, default=None, help="allowed max abs error (default: exact)")
    opts = ap.parse_args(argv)
    if len(opts.files) % 2:
        ap.error("expected MODEL.pt2 REF.safetensors pairs")
    worst = 0
    for model_path, ref_path in zip(opts.files[0::2], opts.files[1::2]):
        worst = max(worst, check_one(model_path, ref_path, opts.atol))
    return worst


if __name__ == "__main__":
    sys.exit(main())
