"""Chapter 9: deploy an INT8 model: Q/DQ ONNX export, validation, backends, parity and speed.

- ``qdq_model``: insert TensorRT-style Q/DQ fake quantization from calibrated scales.
- ``export``: FP32 and Q/DQ ONNX export (opset 17, dynamic batch).
- ``qdq_check``: does a Q/DQ graph match what TensorRT's explicit quantization expects?
- ``base``, ``ort_backend``, ``tensorrt_backend``, ``torch_int8``: backends behind one interface.
- ``parity``: accuracy parity and latency against the PyTorch fake-quant model.
- ``workloads``: the chapter's experiments (ORT on the CPU, BERT-base and ResNet-50 on the GPU).
- ``python -m helpers.deploy``: the same from a shell.

Serves: core — chapter 9 and lab08 (deployment), reused by chapters 10 and 11.
"""
