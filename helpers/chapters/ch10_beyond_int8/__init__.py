"""Chapter 10, beyond INT8: sparsity, dynamic quantization, FP8, mixed precision, layouts, pipelines.

Here: ``sparsity`` (2:4), ``dynamic_quant`` (dynamic vs static INT8, running scales), ``fp8_study``
(FP8 vs INT8), ``mixed_precision`` (keep the sensitive layers in float), ``layouts`` (NCHW vs NHWC),
``pipeline`` (CPU–GPU overlap).

Serves: chapter 10.
"""
