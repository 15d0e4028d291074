"""A quantized KV cache (键值缓存): keys and values stored in INT8 or FP8, one scale per token and head.

During decoding every new token's key and value vectors are written once and read by every later
token, so the cache's bytes grow with context length and batch: at long contexts they rival the
weights. `fake_quant_kv` returns what attention reads back from such a cache; storing each
(token, head) vector with its own scale makes this the same numbers as quantizing at write time.

Serves: core — used by chapter 12 and lab 10.
"""

from __future__ import annotations

import torch

from helpers.errors import InputError
from helpers.quant.act_quant import fp8_quantize

KINDS = {"int8": 1, "fp8": 1, "int4": 0.5, "fp16": 2}  # bytes per element


def fake_quant_kv(t: torch.Tensor, kind: str = "int8") -> torch.Tensor:
    """Keys or values (batch, heads, T, head_dim) after a round trip through a `kind` cache."""
    if kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}.")
    if t.ndim != 4 or not t.is_floating_point():
        raise InputError(f"expected keys/values of shape (batch, heads, T, head_dim), got {tuple(t.shape)}.")
    if kind == "fp16":
        return t.half().to(t.dtype)
    if kind == "fp8":
        values, s = fp8_quantize(t)  # one scale per (token, head) vector
        return (values * s).to(t.dtype)
    amax = t.abs().amax(dim=-1, keepdim=True).float()
    qmax = 127 if kind == "int8" else 7
    s = torch.where(amax > 0, amax / qmax, torch.ones_like(amax))
    return (torch.round(t.float() / s).clamp(-qmax - 1, qmax) * s).to(t.dtype)


def kv_bytes_per_token(layers: int, d_model: int, kind: str = "fp16", head_dim: int = 128) -> float:
    """Cache bytes one token adds: keys and values of every layer, plus an FP16 scale per head if quantized."""
    if kind not in KINDS:
        raise InputError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}.")
    scales = 0 if kind == "fp16" else 2 * (d_model // head_dim)
    return 2 * layers * (d_model * KINDS[kind] + scales)
