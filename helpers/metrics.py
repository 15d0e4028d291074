"""The course's headline measurements, declared once: name, unit, meaning and target (``Metric``).

Tools outside the notebooks read these names (the stored runs' summary, the site, the report's name check),
and ``helpers.reference.TARGETS`` is this list. A chapter's ``helpers.experiment.Experiment`` names the
headlines it records; their values come from its measured rows (``derive``), never from a literal.

    from helpers.metrics import BY_NAME
    m = BY_NAME["gemm.int8_over_bf16"]
    m.met(1.21), m.text          # (True, '>= 1.15')

Serves: core — used by chapters 0–12 and labs 06, 08, 11–13.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

from helpers.errors import InputError

OPS = (">=", "<=", "reported")


@dataclass(frozen=True)
class Metric:
    """A headline measurement: its name, comparison and target value, meaning and unit; `only_on` names the one
    card the target applies to (elsewhere the value is reported without a verdict)."""

    name: str
    op: str  # ">=", "<=" or "reported"
    value: float | None
    meaning: str
    unit: str = "ratio"
    only_on: str = ""

    def __post_init__(self) -> None:
        if self.op not in OPS or (self.op != "reported" and self.value is None):
            raise InputError(f"Metric {self.name!r}: op must be one of {OPS} (with a value unless 'reported').")

    def met(self, measured: float | None, device: str = "") -> bool | None:
        """True/False against the target; None when there is no target or no measurement, or the measurement
        comes from another card than the one the target is for."""
        if measured is None or self.op == "reported" or self.value is None:
            return None
        if self.only_on and device and self.only_on not in device:
            return None
        return {">=": operator.ge, "<=": operator.le}[self.op](measured, self.value)

    def straddled(self, s: Any) -> bool:
        """True when a measured spread (helpers.spread.Spread, or None) contains the target value: not resolved."""
        return s is not None and self.op != "reported" and self.value is not None and s.contains(self.value)

    @property
    def text(self) -> str:
        """'>= 0.92', '>= 0.5 on an H200', or 'reported' for a measurement without a target."""
        if self.op == "reported" or self.value is None:
            return "reported"
        return f"{self.op} {self.value:g}" + (f" on an {self.only_on}" if self.only_on else "")


def _gemm(kind: str, m: int, target: float) -> Metric:
    return Metric(f"llm.gemm.{kind}_over_fp16.m{m}", ">=", target,
                  f"{kind.upper()} (g128) ÷ cuBLAS FP16 at LLaMA-7B shapes (geometric mean), M = {m} tokens, "
                  "the fastest course kernel for that M")


HEADLINES: tuple[Metric, ...] = (
    Metric("copy.cupy_over_d2d", ">=", 0.92, "best cupy copy kernel ÷ torch device-to-device copy"),
    Metric("copy.numba_over_d2d", ">=", 0.92, "best numba copy kernel ÷ torch device-to-device copy"),
    Metric("copy.stride32_over_stride1", "<=", 0.15, "strided copy, stride 32 ÷ stride 1"),
    Metric("transpose.padded_over_copy", ">=", 0.90, "padded shared-memory transpose ÷ copy"),
    Metric("transpose.naive_over_copy", "reported", None, "naive transpose ÷ copy"),
    Metric("gemm.bf16_over_spec", ">=", 0.70, "best BF16 GEMM ÷ dense spec peak"),
    Metric("gemm.int8_over_bf16", ">=", 1.15, "INT8 tensor-core GEMM ÷ BF16 GEMM"),
    Metric("gemm.fp8_over_bf16", ">=", 1.6, "FP8 GEMM ÷ BF16 GEMM"),
    Metric("gemm.dp4a_over_int8_tc", "reported", None, "dp4a INT8 GEMM ÷ tensor-core INT8 GEMM"),
    Metric("bert_base.int8_over_fp16", ">=", 1.4, "BERT-base seq128 b32: best INT8 ÷ best FP16 throughput"),
    Metric("bert_base.best8_over_fp16", ">=", 1.4,
           "BERT-base seq128 b32: best 8-bit path (INT8 or FP8) ÷ best FP16 path (compiled or the engine in FP16, "
           "CUDA graphs)"),
    Metric("bert_base.gemm8_over_fp16", ">=", 1.6, "FP16 GEMM time ÷ 8-bit GEMM time at BERT-base shapes"),
    Metric("bert_base.engine_over_torchao", ">=", 1.0,
           "the course's best 8-bit BERT ÷ torchao's best 8-bit path, same run"),
    Metric("resnet50.best8_over_fp16", ">=", 1.3, "ResNet-50 batch 256 images/s: best 8-bit ÷ best FP16 path"),
    Metric("bert_base.int8_over_fp32_eager", ">=", 5.0, "BERT-base: best INT8 ÷ FP32 eager PyTorch"),
    Metric("resnet50.best_over_mlperf_h200", ">=", 0.5,
           "best ResNet-50 images/s ÷ 94,620 (MLPerf v4.1 H200 TensorRT, per GPU)", only_on="H200"),
    Metric("ort_cpu.int8_over_fp32", ">=", 2.5, "ONNX Runtime INT8 ÷ FP32 throughput, CNN, batch 32"),
    Metric("ptq.best_int8_delta_pts", "<=", 1.0, "FP32 − best INT8 PTQ accuracy (points)", "pts"),
    Metric("ptq.per_tensor_minus_per_channel_pts", "reported", None,
           "accuracy gain of per-channel over per-tensor weights (points)", "pts"),
    Metric("qat.delta_pts", "<=", 0.3, "FP32 − QAT accuracy (points)", "pts"),
    Metric("suite.cpu_test_minutes", "<=", 15.0, "wall minutes of the full README test command", "min"),
    Metric("suite.gpu_report_minutes", "<=", 8.0, "wall minutes of the whole GPU reference run", "min"),
    Metric("llm.gemv.w8a16_over_fp16", ">=", 1.8, "batch-1 GEMV at LLM shapes: INT8 weights ÷ FP16"),
    Metric("llm.gemv.w4a16_over_fp16", ">=", 2.7, "batch-1 GEMV at LLM shapes: INT4 per-group weights ÷ FP16"),
    Metric("llm.gemv.w4a16_over_tinygemm", ">=", 1.5,
           "the course's W4A16 GEMV ÷ PyTorch's tinygemm INT4 (_weight_int4pack_mm), same shapes, same run"),
    Metric("llm.gemv.best_over_d2d", ">=", 0.85, "best weight-only GEMV bandwidth ÷ torch D2D copy bandwidth"),
    _gemm("w4a16", 4, 2.5),
    _gemm("w4a16", 8, 2.0),
    _gemm("w4a16", 16, 1.5),
    _gemm("w8a16", 8, 1.6),
    Metric("llm.decode.w4a16_over_fp16", ">=", 2.3,
           "decode tokens/s of an LLM-shaped stack at batch 1, W4A16 ÷ the course's FP16"),
    Metric("llm.decode.w4a16_over_fp16.b8", ">=", 1.8,
           "decode tokens/s of an LLM-shaped stack at batch 8, W4A16 ÷ the course's FP16"),
    Metric("llm.decode.w8a16_over_fp16", ">=", 1.7,
           "decode tokens/s of an LLM-shaped stack at batch 1, W8A16 ÷ the course's FP16"),
    Metric("trt_rtx.int8_over_fp32_engine_size", "reported", None,
           "TensorRT-RTX engine size, INT8 Q/DQ ÷ FP32, ResNet-50"),
    Metric("suite.fresh_clone_to_lab_minutes", "reported", None,
           "wall minutes from a fresh clone to JupyterLab serving via `make lab`", "min"),
)
BY_NAME = {m.name: m for m in HEADLINES}
