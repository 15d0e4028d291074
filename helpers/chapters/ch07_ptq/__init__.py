"""Chapter 7, post-training quantization: no experiment code of its own.

Its notebook uses the core model-level package ``helpers.model_quant`` (``ptq``, ``sensitivity``,
``diagnose``, ``modelopt_ptq``), ``helpers.plugins.pq_compat``, ``helpers.models`` and ``helpers.data``.

Serves: chapter 7.
"""
