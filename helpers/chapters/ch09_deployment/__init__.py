"""Chapter 9, a full INT8 deployment.

Here: ``workloads`` (the BERT-base and ResNet-50 speed runs across backends; chapter 10 reuses them).
Core code the notebook uses: ``helpers.deploy`` (export, Q/DQ check, ONNX Runtime, PyTorch INT8,
Triton, TensorRT backends, parity, the ``python -m helpers.deploy`` command line).
Lab: ``lab08_deploy``.

Serves: chapter 9.
"""
