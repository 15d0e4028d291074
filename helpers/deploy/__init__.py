"""Deploy an INT8 model: Q/DQ ONNX export, validation, backends, parity and speed.

- ``qdq_model``: insert TensorRT-style Q/DQ fake quantization from calibrated scales.
- ``export``: FP32 and Q/DQ ONNX export (opset 17, dynamic batch).
- ``qdq_check``: does a Q/DQ graph match what TensorRT's explicit quantization expects?
- ``base``, ``ort_backend``, ``tensorrt_backend``, ``torch_int8``, ``triton_int8``: backends behind one interface.
- ``registry``: the one table of those backends (the CLI's choices, chapter 9's ``deploy_all``, the environment
  probe and the tests read it). The libraries' own quirks (ONNX Runtime's, the TensorRT family's:
  ``trt_family``, ``trt_protocol``, ``trt_layers``) live in ``helpers.plugins``.
- ``parity``: accuracy parity and latency against the PyTorch fake-quant model.
- ``python -m helpers.deploy``: the same from a shell.

Serves: core — used by chapters 9–12 and labs 08, 09.
"""
