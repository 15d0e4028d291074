"""Quantized activations for language models: dynamic per-token INT8 (W8A8) and FP8 E4M3, from scratch.

    per token   s_x[m] = max|x[m, :]| / 127, computed on every call (dynamic), one scale per row (token)
    W8A8        y[m, n] = s_x[m] * s_w[n] * sum_k q_x[m, k] q_w[n, k]      (exact int32 sum)
    FP8 E4M3    x / s rounded to the E4M3 grid with s = max|x| / 448, per token (activations) and per
                output channel (weights), products summed in float32 as FP8 tensor cores do
A per-token scale never mixes tokens, so one token with a large value cannot spoil the others'
resolution; an outlier *channel* still does, inside every token (SmoothQuant's target).

Serves: core — used by chapter 12 and lab 10.
"""

from __future__ import annotations

import torch

from helpers.errors import InputError
from helpers.quant.fp8 import FORMATS
from helpers.quant.weight_only import W8Weight

FP8_MAX = FORMATS["e4m3"].max_value  # largest finite E4M3 ("fn") value, 448
MODES = ("per_token", "per_tensor")


def quantize_per_token(x: torch.Tensor, mode: str = "per_token") -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric INT8 codes of x (M, K) and their scales (M, 1): one per row, or one for all rows."""
    if not isinstance(x, torch.Tensor) or x.ndim != 2 or not x.is_floating_point():
        raise InputError(f"x must be a 2-D floating-point tensor (tokens, channels), got "
                         f"{type(x).__name__} {tuple(getattr(x, 'shape', ()))}.")
    if mode not in MODES:
        raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}.")
    amax = x.abs().amax(dim=1, keepdim=True).float()
    if mode == "per_tensor":
        amax = amax.amax().expand_as(amax)
    scale = torch.where(amax > 0, amax / 127, torch.ones_like(amax))
    return torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8), scale


def int_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Exact int32 a (M, K) @ b (N, K).T of int8 matrices (torch._int_mm, with a small-M pad on the CPU)."""
    if a.dtype != torch.int8 or b.dtype != torch.int8 or a.shape[1] != b.shape[1]:
        raise InputError(f"int_matmul multiplies int8 (M, K) by int8 (N, K), got {a.dtype} "
                         f"{tuple(a.shape)} and {b.dtype} {tuple(b.shape)}.")
    m = a.shape[0]
    pad = max(0, 17 - m) if a.is_cuda else 0  # cuBLASLt's int8 path wants M > 16
    if pad:
        a = torch.cat([a, a.new_zeros(pad, a.shape[1])])
    return torch._int_mm(a, b.T)[:m]  # b (N, K) row-major is b.T (K, N) column-major, as cuBLASLt wants


def w8a8_linear(x: torch.Tensor, w: W8Weight, mode: str = "per_token") -> torch.Tensor:
    """INT8 activations (dynamic, `mode`) times INT8 per-channel weights, rescaled to x's dtype."""
    shape = x.shape
    q, sx = quantize_per_token(x.reshape(-1, shape[-1]), mode)
    acc = int_matmul(q, w.q)
    y = acc.float() * sx * w.scale[None, :]
    return y.to(x.dtype).reshape(*shape[:-1], w.q.shape[0])


def fp8_quantize(x: torch.Tensor, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """E4M3 values (as float32, exactly on the grid) of x / s and the scales s = max|x| / 448 along `dim`."""
    amax = x.abs().amax(dim=dim, keepdim=True).float()
    scale = torch.where(amax > 0, amax / FP8_MAX, torch.ones_like(amax))
    return (x.float() / scale).to(torch.float8_e4m3fn).float(), scale


def fp8_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """FP8 E4M3 activations (per token) times FP8 weights (per output channel), float32 accumulation."""
    shape = x.shape
    xq, sx = fp8_quantize(x.reshape(-1, shape[-1]))
    wq, sw = fp8_quantize(w)
    y = (xq @ wq.T) * sx * sw.T
    return y.to(x.dtype).reshape(*shape[:-1], w.shape[0])
