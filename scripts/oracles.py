"""How pipecut's Python checks decide that outputs agree.

Two claims, never mixed (see lib/runtime/compare.h, which this mirrors):
- against committed references, made by PyTorch on some machine whose CPU
  kernels may round differently from this one's: within a per-dtype tolerance;
- a split against the same program unsplit, both run here by the same torch:
  bit for bit.
"""
import torch


def default_tolerance(dtype, compute_dtype=""):
    """(rtol, atol): torch.testing.assert_close's defaults; reduced-precision
    compute gets atol 1e-3 (values near zero come out of cancellations)."""
    if compute_dtype == "bfloat16" or dtype == torch.bfloat16:
        return 1.6e-2, 1e-3
    if compute_dtype == "float16" or dtype == torch.float16:
        return 1e-3, 1e-3
    if dtype in (torch.float32, torch.complex64):
        return 1.3e-6, 1e-5
    if dtype in (torch.float64, torch.complex128):
        return 1e-7, 1e-7
    return 0.0, 0.0


def same_bits(a, b):
    """Bitwise equality of two tensors (the bytes: -0 differs from +0, NaN payloads count)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    a, b = a.detach().cpu().contiguous(), b.detach().cpu().contiguous()
    if a.numel() == 0:
        return True
    return bytes(a.reshape(-1).view(torch.uint8).numpy()) == bytes(b.reshape(-1).view(torch.uint8).numpy())


def max_abs_err(a, b):
    if a.numel() == 0:
        return 0.0
    if a.dtype == torch.bool or b.dtype == torch.bool:
        return float((a != b).any())
    d = (a.double() - b.double()).abs()
    d = torch.where(a.double().isnan() & b.double().isnan(), torch.zeros_like(d), d)
    return float(d.max())


def compare(got, want, *, exact=False, compute_dtype="", atol=None, rtol=None):
    """Compare flat output lists. Returns (ok, worst_abs_err, message)."""
    if len(got) != len(want):
        return False, float("nan"), f"{len(got)} outputs, expected {len(want)}"
    worst = 0.0
    for j, (g, w) in enumerate(zip(got, want)):
        if not isinstance(g, torch.Tensor):
            return False, float("nan"), f"output {j} is {type(g).__name__}, not a tensor"
        g = g.detach().cpu()
        if g.dtype != w.dtype or tuple(g.shape) != tuple(w.shape):
            return False, float("nan"), f"output {j} is {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        err = max_abs_err(g, w)
        worst = max(worst, err) if err == err else err
        if exact:
            if not same_bits(g, w):
                return False, worst, f"output {j} differs bitwise (max abs err {err:.3g})"
            continue
        r, a = default_tolerance(w.dtype, compute_dtype)
        r = r if rtol is None else rtol
        a = a if atol is None else atol
        if w.numel() and not bool(((g.double() - w.double()).abs() <= a + r * w.double().abs()).all()):
            return False, worst, f"output {j} max abs err {err:.3g} exceeds atol {a:g} + rtol {r:g} x |expected|"
    return True, worst, ""
