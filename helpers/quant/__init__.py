"""Quantization from scratch: integer grids, scales, calibrators, fake quantization, integer GEMM.

The most used names are re-exported here; each lives in the module named after what it does:
core (quantize/dequantize), fp8 (FP8 and INT4 emulation), fake_quant (autograd STE),
metrics (MSE, SQNR, cosine), sizes (bytes), intgemm (int8 GEMM, requantization, dp4a.cu),
calibrators (max, percentile, MSE, entropy); for language models weight_only (W8A16, W4A16),
act_quant (per-token INT8 and FP8 activations), smoothing (SmoothQuant, AWQ-style scales) and
kv_cache. Models and their quantized copies live in helpers.models and helpers.model_quant;
chapter 5's tables and figures in helpers.chapters.ch05_quantization_fundamentals.

Serves: core — used by chapters 1, 2, 5–12 and labs 00, 01, 04–13.
"""

from helpers.quant.core import (
    dequantize,
    fake_quantize,
    min_max,
    params_for,
    quant_range,
    quantize,
    quantize_per_channel,
    quantize_per_group,
    quantize_per_tensor,
    roundtrip,
    scale_zero_point,
)

__all__ = [
    "dequantize", "fake_quantize", "min_max", "params_for", "quant_range", "quantize",
    "quantize_per_channel", "quantize_per_group", "quantize_per_tensor", "roundtrip",
    "scale_zero_point",
]
