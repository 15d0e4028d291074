"""Chapter 8, quantization-aware training: its measurements (``experiments``: 4-bit PTQ then QAT over seeds, and the
lecture notes' recipe, declared once and recorded under the stored names), its sentences (``readings``) and the
notes' claims (``notes``).

It builds on ``helpers.model_quant.qat``, ``helpers.model_quant.ptq``, ``helpers.quant.fake_quant`` (the
straight-through estimator), ``helpers.models`` and ``helpers.data``.

Serves: chapter 8.
"""
