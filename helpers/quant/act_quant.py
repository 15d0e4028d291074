"""Quantized activations for language models: dynamic per-token INT8 (W8A8) and FP8 E4M3, from scratch.

    per token   s_x[m] = max|x[m, :]| / 127, computed on every call (dynamic), one scale per row (token)
    W8A8        y[m, n] = s_x[m] * s_w[n] * sum_k q_x[m, k] q_w[n, k]      (exact int32 sum)
    FP8 E4M3    x / s rounded to the E4M3 grid with s = max|x| / 448, per token (activations) and per
                output channel (weights), products summed in float32 as FP8 tensor cores do
A per-token scale never mixes tokens, so one token with a large value cannot spoil the others'
resolution; an outlier *channel* still does, inside every token (SmoothQuant's target).
A NaN or Inf in x is propagated, never hidden: its row's scale (every row's, per tensor) becomes NaN or
Inf, and so does that row of the output.

Serves: core — used by chapter 12 and lab 10.
"""

from __future__ import annotations

import torch

from helpers.errors import InputError
from helpers.quant.fp8 import FORMATS
from helpers.quant.weight_only import W8Weight
from helpers.validation import (normalize_axis, require_activations, require_choice, require_finite,
                                require_float_tensor, require_instance, require_tensor)

FP8_MAX = FORMATS["e4m3"].max_value  # largest finite E4M3 ("fn") value, 448
MODES = ("per_token", "per_tensor")


def quantize_per_token(x: torch.Tensor, mode: str = "per_token") -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric INT8 codes of x (M, K) and their scales (M, 1): one per row, or one for all rows."""
    require_float_tensor(x, "x", (2,), "a 2-D floating-point tensor (tokens, channels)")
    require_choice(mode, MODES, "mode")
    amax = x.abs().amax(dim=1, keepdim=True).float()
    if mode == "per_tensor":
        amax = amax.amax().expand_as(amax)
    scale = _scale(amax, 127)
    return torch.round(x.float() / scale).clamp(-127, 127).to(torch.int8), scale


def _scale(amax: torch.Tensor, qmax: float) -> torch.Tensor:
    """amax / qmax, with 1.0 where amax is 0 (an all-zero row); a NaN or Inf amax stays NaN or Inf."""
    return torch.where(amax == 0, torch.ones_like(amax), amax / qmax)


def int_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Exact int32 a (M, K) @ b (N, K).T of int8 matrices (torch._int_mm, with a small-M pad on the GPU)."""
    require_tensor(a, "a")
    require_tensor(b, "b")
    if a.dtype != torch.int8 or b.dtype != torch.int8 or a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] \
            or not a.numel() or not b.numel():
        raise InputError(f"int_matmul multiplies non-empty int8 (M, K) by int8 (N, K), got {a.dtype} "
                         f"{tuple(a.shape)} and {b.dtype} {tuple(b.shape)}; quantize both first (quantize_per_token, "
                         "quantize_w8).")
    if a.device != b.device:
        raise InputError(f"a is on {a.device} and b on {b.device}; move both to one device with .to(...).")
    if a.is_cuda and (a.shape[1] % 8 or b.shape[0] % 8):
        raise InputError(f"the GPU's int8 matmul needs K and N multiples of 8, got K={a.shape[1]}, N={b.shape[0]}; "
                         "pad them with zeros.")
    m = a.shape[0]
    pad = max(0, 17 - m) if a.is_cuda else 0  # cuBLASLt's int8 path wants M > 16
    if pad:
        a = torch.cat([a, a.new_zeros(pad, a.shape[1])])
    return torch._int_mm(a, b.T)[:m]  # b (N, K) row-major is b.T (K, N) column-major, as cuBLASLt wants


def w8a8_linear(x: torch.Tensor, w: W8Weight, mode: str = "per_token") -> torch.Tensor:
    """INT8 activations (dynamic, `mode`) times INT8 per-channel weights, rescaled to x's dtype."""
    _check_linear(x, w, W8Weight, "quantize_w8(weight)")
    shape = x.shape
    q, sx = quantize_per_token(x.reshape(-1, shape[-1]), mode)
    acc = int_matmul(q, w.q)
    y = acc.float() * sx * w.scale[None, :]
    return y.to(x.dtype).reshape(*shape[:-1], w.q.shape[0])


def fp8_quantize(x: torch.Tensor, dim: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """E4M3 values (as float32, exactly on the grid) of x / s and the scales s = max|x| / 448 along `dim`."""
    require_float_tensor(x, "x", tuple(range(1, 9)), "a floating-point tensor with at least one axis")
    dim = normalize_axis(dim, x.ndim, "dim")
    amax = x.abs().amax(dim=dim, keepdim=True).float()
    scale = _scale(amax, FP8_MAX)
    return (x.float() / scale).to(torch.float8_e4m3fn).float(), scale


def fp8_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """FP8 E4M3 activations (per token) times FP8 weights (per output channel), float32 accumulation."""
    _check_linear(x, w, torch.Tensor, "the layer's float weight (N, K)")
    shape = x.shape
    xq, sx = fp8_quantize(x.reshape(-1, shape[-1]))
    wq, sw = fp8_quantize(w)
    y = (xq @ wq.T) * sx * sw.T
    return y.to(x.dtype).reshape(*shape[:-1], w.shape[0])


def _check_linear(x: torch.Tensor, w: object, kind: type, fix: str) -> None:
    """x (..., K) floating point, and a weight of `kind` that reads K inputs (a float weight: finite, 2-D)."""
    require_instance(w, kind, "w", f"pass {fix}.")
    if kind is torch.Tensor:
        require_float_tensor(w, "w", (2,), "a 2-D floating-point weight (out, in)")
        require_finite(w, "w")
    require_activations(x, w.shape[1] if kind is torch.Tensor else w.q.shape[1])
