"""Chapter 1, why GPUs for inference: CPU vs GPU latency over batch sizes, and the notes' claims checked.

Here: ``inference_speed`` (latency/throughput sweeps with and without host↔device copies),
``claims`` (each circulating number against what was measured).
Core code the notebook uses: ``helpers.models.bert``, ``helpers.models.resnet``, ``helpers.perf.roofline``.

Serves: chapter 1.
"""
