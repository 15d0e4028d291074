"""Model-level quantization: PTQ and QAT with pytorch-quantization, sensitivity, diagnosis, ModelOpt.

Tensor-level maths lives in ``helpers.quant``; every pytorch-quantization
workaround in ``helpers.plugins.pq_compat``, ModelOpt's in ``helpers.plugins.modelopt_compat``.

Serves: core — used by chapters 5–12 and labs 06–09.
"""
