"""Chapter 6, calibration: its measurements (``experiments``: each calibrator's error, accuracy and cost, declared
once and recorded under the stored names), its sentences (``readings``) and the lecture notes' claims (``notes``).

It builds on ``helpers.quant.calibrators`` (max, percentile, MSE, entropy), chapter 5's ``experiments`` and
``figures``, ``helpers.models.digits_mlp`` and ``helpers.model_quant.activations``.

Serves: chapter 6.
"""
