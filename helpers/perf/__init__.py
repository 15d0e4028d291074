"""Performance models and measurements: roofline, occupancy, memory access patterns, GPU specs, GEMM rates.

Serves: core — chapters 1–4, 10 and 11.
"""
