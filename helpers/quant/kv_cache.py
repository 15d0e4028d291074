"""A quantized KV cache (键值缓存): keys and values stored in INT8 or FP8, one scale per token and head.

During decoding every new token's key and value vectors are written once and read by every later
token, so the cache's bytes grow with context length and batch: at long contexts they rival the
weights. `fake_quant_kv` returns what attention reads back from such a cache; storing each
(token, head) vector with its own scale makes this the same numbers as quantizing at write time.
A NaN or Inf in a vector is propagated (its whole vector reads back NaN), never hidden.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import torch

from helpers.errors import InputError
from helpers.quant.act_quant import fp8_quantize
from helpers.validation import require_choice, require_float_tensor, require_size

KINDS = {"int8": 1, "fp8": 1, "int4": 0.5, "fp16": 2}  # bytes per element


def fake_quant_kv(t: torch.Tensor, kind: str = "int8") -> torch.Tensor:
    """Keys or values (batch, heads, T, head_dim) after a round trip through a `kind` cache."""
    require_choice(kind, tuple(KINDS), "kind")
    require_float_tensor(t, "t", (4,), "keys or values of shape (batch, heads, T, head_dim)")
    if kind == "fp16":
        return t.half().to(t.dtype)
    if kind == "fp8":
        values, s = fp8_quantize(t)  # one scale per (token, head) vector
        return (values * s).to(t.dtype)
    amax = t.abs().amax(dim=-1, keepdim=True).float()
    qmax = 127 if kind == "int8" else 7
    s = torch.where(amax == 0, torch.ones_like(amax), amax / qmax)  # NaN/Inf amax: NaN out, not hidden
    return (torch.round(t.float() / s).clamp(-qmax - 1, qmax) * s).to(t.dtype)


def kv_bytes_per_token(n_layers: int, d_model: int, kind: str = "fp16", head_dim: int = 128) -> float:
    """Cache bytes one token adds: keys and values of every layer, plus an FP16 scale per head if quantized.

    With a ``helpers.models.shapes.TransformerShape`` s: ``kv_bytes_per_token(s.n_layers, s.kv_dim, kind, s.head_dim)``
    (``kv_dim`` is ``d_model`` without grouped-query attention).
    """
    require_choice(kind, tuple(KINDS), "kind")
    n_layers, d_model, head_dim = require_size(n_layers, "n_layers"), require_size(d_model, "d_model"), \
        require_size(head_dim, "head_dim")
    if d_model % head_dim:
        raise InputError(f"d_model={d_model} is not a whole number of heads of head_dim={head_dim}; "
                         "pass the model's head_dim (d_model = heads x head_dim).")
    scales = 0 if kind == "fp16" else 2 * (d_model // head_dim)
    return 2 * n_layers * (d_model * KINDS[kind] + scales)
