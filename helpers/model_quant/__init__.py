"""Model-level quantization: PTQ and QAT with pytorch-quantization, sensitivity, diagnosis, ModelOpt.

Tensor-level maths lives in ``helpers.quant``; every pytorch-quantization workaround in ``pq_compat``.

Serves: core — chapters 5–11 and labs 06, 07.
"""
