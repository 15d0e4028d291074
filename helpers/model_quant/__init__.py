"""Model-level quantization: PTQ and QAT with pytorch-quantization, sensitivity, diagnosis, ModelOpt.

Tensor-level maths lives in ``helpers.quant``; every pytorch-quantization
workaround in ``helpers.plugins.pq_compat``, ModelOpt's in ``helpers.plugins.modelopt_compat``.

Serves: core — chapters 5–11 and labs 06, 07.
"""
