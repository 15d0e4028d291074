"""What the lecture notes say about INT8 precision, speed and the dp4a kernel, judged by chapter 5.

Registered in ``helpers.claims``; notebooks 05 and 05b show each as a callout where the topic comes up.

Serves: chapter 5.
"""

from __future__ import annotations

import math

import numpy as np

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, combine, in_range

COPY_GPU = "ch05.copy.fp32_over_int8_time.gpu"
INT_MM, BF16 = "ch05.gemm.int_mm_tops", "ch05.gemm.bf16_tops"


def _precision(_: Values) -> tuple[str, str]:
    fp32 = float(np.finfo(np.float32).eps)
    int8 = 1 / 127
    orders = math.log10(int8 / fp32)
    return (f"FP32 spacing relative to a value: 2^-23 = {fp32:.2g}; INT8 step relative to the largest value: "
            f"1/127 = {int8:.2g}: {orders:.1f} orders of magnitude apart, and of different kinds (FP32's error "
            "scales with each value, INT8's is one step for all)"), FAILS if abs(orders - 3) > 0.5 else HOLDS


def _speed(m: Values) -> tuple[str, str]:
    copy, mm, bf = m.get(COPY_GPU), m.get(INT_MM), m.get(BF16)
    gemm = mm / bf if mm is not None and bf is not None else None
    parts = {"a memory-bound copy": in_range(copy, 3, 4), "a compute-bound GEMM": in_range(gemm, 3, 4)}
    fmt = lambda v: "–" if v is None else f"{v:.2f}×"  # noqa: E731
    return (f"GPU copy of the same values, FP32 time ÷ INT8 time: {fmt(copy)}; INT8 GEMM ÷ BF16 GEMM at "
            f"8192³: {fmt(gemm)}"), combine(parts)


def _dp4a_code(_: Values) -> tuple[str, str]:
    return ("__dp4a(int a, int b, int c) takes 32-bit words that each pack four int8 values; int4 is a 16-byte "
            "vector of four ints, so the call does not compile, &input[i] steps one byte at a time, and the "
            "int32 sum times a float scale is stored without rounding or saturating to int8. The course's dp4a "
            "GEMM (helpers.quant.intgemm) packs the words first and is checked against the integer reference "
            "bit for bit (section 7 on a GPU, and its tests)"), FAILS


def _softmax_per_channel(_: Values) -> tuple[str, str]:
    return ("per-channel scales are one scale per output channel of a weight; TensorRT applies per-channel "
            "scales to weights only and one scale per activation tensor, and a softmax output is an "
            "activation in [0, 1]"), "doesn't fit: per-channel does not apply to softmax outputs"


registry.register(
    registry.Claim(
        "ch05.fp32_vs_int8_precision", 5, "notes 1 §1.3.2",
        "FP32 has 23 mantissa bits and INT8 only 8, so INT8 is about three orders of magnitude less precise.",
        "FP32 有 23 位尾数，INT8 只有 8 位，所以 INT8 的精度差了大约三个数量级。",
        _precision, "IEEE 754 binary32 (numpy.finfo); the symmetric INT8 grid of this chapter"),
    registry.Claim(
        "ch05.int8_3_to_4x_faster", 5, "notes 3 §1",
        "Going from FP32 to INT8 makes the model 4× smaller, needs 4× less bandwidth and is in theory 3–4× faster.",
        "从 FP32 转为 INT8 后，模型缩小 4 倍，带宽需求降低 4 倍，理论计算速度提升 3–4 倍。",
        _speed, "this chapter's GPU copy and 8192³ GEMMs (dp4a, torch._int_mm, BF16)", (COPY_GPU, INT_MM, BF16)),
    registry.Claim(
        "ch05.dp4a_conv_kernel", 5, "notes 3 §2.1",
        "The int8_conv example calls __dp4a on *(int4*)&input[i] and writes sum * scale to the int32 output.",
        "讲义的 int8_conv 示例对 *(int4*)&input[i] 调用 __dp4a，并把 sum * scale 写入 int32 输出。",
        _dp4a_code, "CUDA C++ Programming Guide, integer intrinsics (__dp4a); helpers/quant/intgemm.py"),
    registry.Claim(
        "ch05.softmax_per_channel", 5, "notes 1 §1.3.2",
        "A Transformer lost accuracy in its softmax outputs, and per-channel quantization won it back.",
        "某 Transformer 的 Softmax 输出量化后精度下降，改用逐通道量化后精度恢复。",
        _softmax_per_channel, "TensorRT Developer Guide, explicit quantization (per-channel scales for weights)"),
)
