"""Chapter 2, GPU architecture: ``notes`` (the lecture notes' hardware figures, judged), ``tables`` and
``experiments`` (the GEMM sweep, dp4a against Tensor Cores and the roofline as Experiments: measured here when
this machine can, else the stored run; their rows recorded under ``ch02.*``, the headlines ``gemm.*``).

Its notebook uses the core performance package: ``helpers.perf.architecture`` (SM composition,
device query), ``helpers.perf.gemm`` (GEMM throughput per precision), ``helpers.perf.specs``
(datasheet peaks), ``helpers.perf.roofline``, and ``helpers.quant.intgemm`` (dp4a vs Tensor Core INT8).

Serves: chapter 2.
"""
