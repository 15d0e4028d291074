"""Chapter 11, troubleshooting: each common failure as a function that reproduces, explains and fixes it.

Here: ``arch_mismatch`` ("no kernel image is available"), ``accuracy_fix`` (accuracy dropped),
``perf_diagnose`` (INT8 is not faster), ``profiling`` (torch.profiler and Nsight Compute),
``lab_deployment`` (the broken deployment of lab09).

Serves: chapter 11 (and lab09).
"""
