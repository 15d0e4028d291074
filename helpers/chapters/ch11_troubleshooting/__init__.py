"""Chapter 11, troubleshooting: each common failure as a function that reproduces, explains and fixes it.

Here: ``arch_mismatch`` ("no kernel image is available"), ``accuracy_fix`` (accuracy dropped),
``perf_diagnose`` (INT8 is not faster), ``profiling`` (torch.profiler and Nsight Compute),
``int8_exports`` (two INT8 exports and how to judge them; lab 09 builds its broken deployment on it), and
``experiments``: what the notebook measures and records, declared once (``helpers.experiment``).

Serves: chapter 11 (its int8_exports also serve lab 9).
"""
