"""Deploy an INT8 model: Q/DQ ONNX export, validation, backends, parity and speed.

- ``qdq_model``: insert TensorRT-style Q/DQ fake quantization from calibrated scales.
- ``export``: FP32 and Q/DQ ONNX export (opset 17, dynamic batch).
- ``qdq_check``: does a Q/DQ graph match what TensorRT's explicit quantization expects?
- ``base``, ``ort_backend``, ``tensorrt_backend``, ``torch_int8``, ``triton_int8``: backends behind one interface.
- ``trt_family``, ``trt_protocol``, ``trt_layers``: TensorRT 10/11 or TensorRT-RTX, whichever is installed
  (finding the module, the typed protocol both satisfy, per-layer precisions).
- ``parity``: accuracy parity and latency against the PyTorch fake-quant model.
- ``python -m helpers.deploy``: the same from a shell.

Serves: core — chapter 9 and lab08 (deployment), reused by chapters 10 and 11.
"""
