"""Chapter 5, quantization fundamentals (and 05b, the explorer).

Here: ``experiments`` (error vs bits, outliers, per-channel tables), ``figures`` (the grid, clipped
histograms, calibration curves; chapter 6 draws with them too), ``explorer`` (the interactive
quantization explorer of notebook 05b), ``readings`` (sentences computed from the experiments and the
record), ``notes`` (the lecture notes' claims on INT8 precision, speed and the dp4a kernel, judged),
``measurements`` (the timed copies and GEMMs as Experiments, their record tables declared once).
Core code the notebook uses: ``helpers.quant`` (scales, rounding, integer GEMM, FP8, sizes),
``helpers.models.digits_mlp``, ``helpers.model_quant.activations``.

Serves: chapter 5.
"""
