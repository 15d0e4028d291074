"""Chapter 1, why GPUs for inference: CPU vs GPU latency over batch sizes, and the notes' claims checked.

Here: ``inference_speed`` (latency/throughput sweeps with and without host↔device copies), ``tables`` and
``experiments`` (each measurement as an Experiment: the CPU ones run on every machine, the GPU ones on a GPU or
from the stored run; their rows recorded under ``ch01.*``),
``claims`` (the lecture notes' numbers, registered in ``helpers.claims`` and judged by the measurements),
``readings`` (the interpretation sentences, from this session's numbers or the stored run's).
Core code the notebook uses: ``helpers.models.bert``, ``helpers.models.resnet``, ``helpers.perf.roofline``.

Serves: chapter 1.
"""
