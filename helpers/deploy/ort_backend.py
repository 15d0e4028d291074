"""ONNX Runtime backend: CPU by default, CUDA / TensorRT execution providers when installed.

The default CPU INT8 deployment is ONNX Runtime's own ``quantize_static`` (Q/DQ format,
per-channel int8 weights, uint8 activations) at graph optimization level ALL: ORT fuses
``DQ -> Conv -> Q`` into QLinearConv and runs it with VNNI integer kernels. A TensorRT-style
Q/DQ export (int8 activations, no Q after each conv) never fuses on ORT's CPU: every layer
dequantizes to float, runs the float kernel, and pays the Q/DQ on top, so it is slower than FP32.

Serves: core — used by chapters 9–12 and labs 08, 09.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from helpers.deploy.base import Backend, DeployJob, require_export, require_input
from helpers.errors import InputError
from helpers.plugins import ort_compat

GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
# Op types ONNX Runtime runs after its optimizer: integer kernels, float compute kernels, Q/DQ left over.
INTEGER_KERNELS = ("QLinearConv", "QLinearMatMul", "QGemm", "ConvInteger", "MatMulInteger", "QAttention",
                   "DynamicQuantizeLinear", "MatMulIntegerToFloat", "FusedConv_QLinear", "NhwcQLinearConv")
FLOAT_KERNELS = ("Conv", "Gemm", "MatMul", "FusedConv", "FusedGemm", "FusedMatMul")
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


def available_providers() -> list[str]:
    """ONNX Runtime's execution providers installed here."""
    return ort_compat.providers()


class OrtBackend(Backend):
    """An ONNX model in an ONNX Runtime session."""

    name = "onnxruntime"

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        precision: str = "fp32",
        provider: str = "cpu",
        threads: int | None = None,
        opt_level: str = "all",
    ):
        ort = ort_compat.onnxruntime()
        self.path = require_export(path)
        wanted = {
            "cpu": ["CPUExecutionProvider"],
            "cuda": ["CUDAExecutionProvider", "CPUExecutionProvider"],
            "tensorrt": [
                "TensorrtExecutionProvider",
                "CUDAExecutionProvider",
                "CPUExecutionProvider",
            ],
        }
        if provider not in wanted:
            raise InputError(f"provider must be one of {', '.join(wanted)}; got {provider!r}.")
        if wanted[provider][0] not in available_providers():
            raise InputError(
                f"ONNX Runtime here has no {wanted[provider][0]} (it has "
                f"{', '.join(available_providers())}). Use provider='cpu', or install "
                "onnxruntime-gpu on a machine with a GPU."
            )
        levels = {
            "none": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }
        if opt_level not in levels:
            raise InputError(f"opt_level must be one of {', '.join(levels)}; got {opt_level!r}.")
        so = ort.SessionOptions()
        so.graph_optimization_level = levels[opt_level]
        so.log_severity_level = 3
        if threads:
            so.intra_op_num_threads = int(threads)
        self.session = ort.InferenceSession(str(self.path), so, providers=wanted[provider])
        self.provider = self.session.get_providers()[0]
        self.precision = precision
        inp = self.session.get_inputs()[0]
        self.input_name = inp.name
        self.sample_shape = [d if isinstance(d, int) else None for d in inp.shape[1:]]

    def run(self, x: np.ndarray) -> np.ndarray:
        """Logits for a float32 batch."""
        require_input(x, self.sample_shape, self.input_name)
        return self.session.run(None, {self.input_name: np.ascontiguousarray(x, dtype=np.float32)})[
            0
        ]

    def run_named(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """Run with explicitly named inputs (a wrong name raises a clear InputError)."""
        names = [i.name for i in self.session.get_inputs()]
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise InputError(
                f"the model has no input named {unknown[0]!r}; its inputs are {names}."
            )
        return self.run(feeds[self.input_name])

    def size_mb(self) -> float:
        """Model file size in MB."""
        return self.path.stat().st_size / 1e6


class _Reader:
    """ORT's CalibrationDataReader over a list of numpy batches."""

    def __init__(self, input_name: str, batches: Sequence[np.ndarray]):
        self.items = iter(
            [{input_name: np.ascontiguousarray(b, dtype=np.float32)} for b in batches]
        )

    def get_next(self) -> dict | None:
        """The next feed dict, or None at the end."""
        return next(self.items, None)


def quantize_static_qdq(
    fp32_path: str | os.PathLike,
    out_path: str | os.PathLike,
    calib_batches: Iterable[np.ndarray],
    *,
    per_channel: bool = True,
    uint8_activations: bool = True,
) -> Path:
    """ONNX Runtime's own static INT8 (Q/DQ, per-channel weights; uint8 activations by default)."""
    q = ort_compat.quantization()
    src = require_export(fp32_path)
    batches = [np.asarray(b) for b in calib_batches]
    if not batches:
        raise InputError(
            "quantize_static_qdq needs calibration batches (a few batches of real inputs)."
        )
    import onnx

    input_name = onnx.load(str(src), load_external_data=False).graph.input[0].name
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)

    with ort_compat.quiet_root_logger():  # ORT's quantizer logs a pre-processing hint on the root logger
        q.quantize_static(
            str(src),
            str(out),
            _Reader(input_name, batches),
            quant_format=q.QuantFormat.QDQ,
            per_channel=per_channel,
            activation_type=q.QuantType.QUInt8 if uint8_activations else q.QuantType.QInt8,
            weight_type=q.QuantType.QInt8,
            calibrate_method=q.CalibrationMethod.MinMax,
        )
    return out


def optimized_op_counts(path: str | os.PathLike) -> Counter:
    """The op types ONNX Runtime actually runs on the CPU after its optimizations (level ALL).

    QLinearConv / QGemm / QLinearAdd are integer kernels; FusedConv, Conv and Gemm are float
    kernels, and every QuantizeLinear / DequantizeLinear left over is extra work.
    """
    import tempfile

    import onnx

    ort = ort_compat.onnxruntime()
    src = require_export(path)
    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.optimized_model_filepath = str(Path(tmp) / "optimized.onnx")
        so.log_severity_level = 3
        ort.InferenceSession(str(src), so, providers=["CPUExecutionProvider"])
        return Counter(n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node)


def fusion_counts(path: str | os.PathLike) -> dict[str, int]:
    """After ORT's CPU optimizer: how many integer kernels, float conv/GEMM kernels and Q/DQ nodes run."""
    ops = optimized_op_counts(path)
    return {"integer kernels": sum(ops[o] for o in INTEGER_KERNELS),
            "float conv/GEMM kernels": sum(ops[o] for o in FLOAT_KERNELS),
            "Q/DQ nodes left": sum(ops[o] for o in QDQ_OPS)}


def deploy_cpu_int8(
    fp32_path: str | os.PathLike,
    out_path: str | os.PathLike,
    calib_batches: Iterable[np.ndarray],
    threads: int | None = None,
) -> OrtBackend:
    """The default CPU INT8 deployment: quantize_static Q/DQ (uint8 activations), optimization ALL."""
    path = quantize_static_qdq(fp32_path, out_path, calib_batches)
    return OrtBackend(path, precision="int8", provider="cpu", threads=threads, opt_level="all")


def deploy_variants(job: DeployJob) -> dict[str, Backend]:
    """deploy_all's ONNX Runtime deployments: FP32, ORT's own INT8 (default CPU path), the TensorRT-style Q/DQ."""
    int8 = job.work / "model_int8_ort.onnx"
    job.paths.update({"ORT FP32": job.fp32_onnx, "ORT on TensorRT-style Q/DQ": job.qdq_onnx})
    out: dict[str, Backend] = {"ORT FP32": OrtBackend(job.fp32_onnx)}
    out["ORT INT8 (default CPU path)"] = deploy_cpu_int8(job.fp32_onnx, int8, [b.numpy() for b in job.calib])
    job.paths["ORT INT8 (default CPU path)"] = int8
    out["ORT on TensorRT-style Q/DQ"] = OrtBackend(job.qdq_onnx, precision="int8")
    return out
