"""Chapter 8, quantization-aware training: no experiment code of its own.

Its notebook uses ``helpers.model_quant.qat``, ``helpers.model_quant.ptq``,
``helpers.quant.fake_quant`` (the straight-through estimator), ``helpers.models`` and ``helpers.data``.

Serves: chapter 8.
"""
