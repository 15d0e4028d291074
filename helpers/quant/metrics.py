"""How far a quantized tensor is from the original: MSE, SQNR in dB, cosine similarity.

Serves: core — used by chapters 5–7, 10, 11 and lab 06.
"""

from __future__ import annotations

import numpy as np

from helpers.errors import InputError
from helpers.quant.core import Array, is_torch
from helpers.validation import require_array, require_nonempty


def _pair(ref: Array, approx: Array) -> tuple[np.ndarray, np.ndarray]:
    """Both arguments as float64 numpy arrays of the same shape."""
    for v, n in ((ref, "ref"), (approx, "approx")):
        require_array(v, n)
        require_nonempty(v, n)
    a = (ref.detach().cpu().numpy() if is_torch(ref) else np.asarray(ref)).astype(np.float64)
    b = (approx.detach().cpu().numpy() if is_torch(approx) else np.asarray(approx)).astype(np.float64)
    if a.shape != b.shape:
        raise InputError(f"ref and approx must have the same shape, got {a.shape} and {b.shape}.")
    return a, b


def mse(ref: Array, approx: Array) -> float:
    """Mean squared error."""
    a, b = _pair(ref, approx)
    return float(np.mean((a - b) ** 2))


def sqnr_db(ref: Array, approx: Array) -> float:
    """Signal-to-quantization-noise ratio in dB: 10 log10(sum ref² / sum (ref - approx)²); inf if exact."""
    a, b = _pair(ref, approx)
    noise = float(np.sum((a - b) ** 2))
    signal = float(np.sum(a**2))
    if noise == 0:
        return float("inf")
    return 10 * np.log10(signal / noise) if signal > 0 else float("-inf")


def cosine(ref: Array, approx: Array) -> float:
    """Cosine similarity of the flattened tensors (1.0 = same direction)."""
    a, b = _pair(ref, approx)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(np.dot(a.ravel(), b.ravel()) / (na * nb))


def error_report(ref: Array, approx: Array) -> dict[str, float]:
    """MSE, SQNR (dB), cosine and max |error| in one dict (a table row)."""
    a, b = _pair(ref, approx)
    return {"mse": mse(a, b), "sqnr_db": sqnr_db(a, b), "cosine": cosine(a, b),
            "max_abs_err": float(np.max(np.abs(a - b)))}
