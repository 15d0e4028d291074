"""Chapter 1, why GPUs for inference: CPU vs GPU latency over batch sizes, and the notes' claims checked.

Here: ``inference_speed`` (latency/throughput sweeps with and without host↔device copies),
``claims`` (the lecture notes' numbers, registered in ``helpers.claims`` and judged by the measurements),
``readings`` (the interpretation sentences, from this session's numbers or the stored run's).
Core code the notebook uses: ``helpers.models.bert``, ``helpers.models.resnet``, ``helpers.perf.roofline``.

Serves: chapter 1.
"""
