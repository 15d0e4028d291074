"""Chapter 9, a full INT8 deployment.

Here: ``workloads`` (the BERT-base and ResNet-50 speed runs across backends; chapter 10 reuses them),
``bert_view`` (the BERT bars, live or stored), ``fusion`` (what ORT's CPU optimizer fuses per Q/DQ
dialect), ``trt_rtx`` and ``trt_rtx_view`` (TensorRT-RTX builds of the course's exports) and ``notes``
(the lecture notes' claims).
Core code the notebook uses: ``helpers.deploy`` (export, Q/DQ check, ONNX Runtime, PyTorch INT8,
Triton, TensorRT backends, parity, the ``python -m helpers.deploy`` command line).

Serves: chapter 9.
"""
