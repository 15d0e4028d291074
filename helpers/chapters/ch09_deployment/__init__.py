"""Chapter 9, a full INT8 deployment.

Here: ``workloads`` (the ONNX Runtime CPU comparison, deployment to every backend, the small-batch BERT paths;
chapter 10 reuses them), ``engine``, ``engine_tune``, ``engine_bench`` and ``engine_view`` (the 8-bit engine's
Experiments, its tuner, its GPU measurements and how the notebook shows them), ``fusion`` (what ORT's CPU optimizer fuses per Q/DQ
dialect), ``trt_rtx`` and ``trt_rtx_view`` (TensorRT-RTX builds of the course's exports) and ``notes``
(the lecture notes' claims).
Core code the notebook uses: ``helpers.deploy`` (export, Q/DQ check, ONNX Runtime, PyTorch INT8,
Triton, TensorRT backends, parity, the ``python -m helpers.deploy`` command line).

Serves: chapter 9.
"""
