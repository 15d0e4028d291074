"""Chapter 6, calibration: no experiment code of its own.

Its notebook uses ``helpers.quant.calibrators`` (max, percentile, MSE, entropy), chapter 5's
``experiments`` and ``figures``, ``helpers.models.digits_mlp`` and ``helpers.model_quant.activations``.

Serves: chapter 6.
"""
