"""Performance models and measurements: roofline, occupancy, memory access patterns, GPU specs, GEMM rates.

Serves: core — used by chapters 0–5, 9–12 and labs 01–03, 09, 11–13.
"""
