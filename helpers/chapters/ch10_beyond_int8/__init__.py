"""Chapter 10, beyond INT8: sparsity, dynamic quantization, FP8, mixed precision, layouts, pipelines.

Here: ``sparsity`` (2:4), ``dynamic_quant`` (dynamic vs static INT8, running scales), ``fp8_study``
(FP8 vs INT8), ``mixed_precision`` (keep the sensitive layers in float), ``layouts`` (NCHW vs NHWC),
``pipeline`` (CPU–GPU overlap); ``tables`` and ``experiments`` declare what the notebook measures and shows.
Every speed ratio is timed by ``helpers.bench.interleaved`` (the course's one interleaved-rounds harness):
the ratio is the median of the rounds' ratios, with their spread (p10..p90, min..max under 5 rounds).

Serves: chapter 10.
"""

ROUNDS, PER_ROUND = 5, 4  # GPU speed ratios: interleaved rounds; timed calls of each function per round (their median)
