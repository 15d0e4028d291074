"""Chapter 12: quantizing a language model (the quality table, outliers, GEMV/decode benchmarks, batch sweep).

Serves: chapter 12.
"""
