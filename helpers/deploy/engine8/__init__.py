"""An 8-bit inference engine built the way TensorRT builds one: calibrated scales, FP8/INT8 GEMMs and convolutions
with the dequantize, bias, activation, residual and the next layer's quantize fused into their epilogues, LayerNorm
fused with the quantize, the whole forward replayed as one CUDA graph (``formats``, ``kernels``, ``encoder``,
``resnet``). On a machine without a GPU every kernel runs its exact PyTorch reference.

Serves: core — used by chapter 9.
"""
