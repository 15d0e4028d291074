"""Chapter 7, post-training quantization: its measurements and its printed sentences.

``experiments`` declares what the chapter measures (its record tables in ``tables``) and runs it on any machine;
``readings`` turns this run's tables into sentences, every accuracy difference judged by a paired bootstrap
over the test samples (the right/wrong per sample comes from ``ptq.score`` and the mixed-precision curve).
Everything else comes from the core model-level package ``helpers.model_quant`` (``ptq``, ``sensitivity``,
``diagnose``, ``modelopt_ptq``), ``helpers.plugins.pq_compat``, ``helpers.models`` and ``helpers.data``.

Serves: chapter 7.
"""
