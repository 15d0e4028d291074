"""Quantization from scratch: integer grids, scales, calibrators, fake quantization, integer GEMM.

The most used names are re-exported here; each lives in the module named after what it does:
core (quantize/dequantize), fp8 (FP8 and INT4 emulation), fake_quant (autograd STE),
metrics (MSE, SQNR, cosine), sizes (bytes), intgemm (int8 GEMM, requantization, dp4a.cu),
calibrators (max, percentile, MSE, entropy). Chapters 5-6 also use demo_model (a tiny digits
MLP), activations (layer inputs, quantized copies of a model), experiments (tables) and figures.

Serves: core — chapters 5–11 and their labs (tensor-level quantization).
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
