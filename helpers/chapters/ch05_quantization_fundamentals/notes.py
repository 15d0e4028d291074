"""What the lecture notes say about INT8 precision, speed and the dp4a kernel, judged by chapter 5.

Registered in ``helpers.claims``; notebooks 05 and 05b show each as a callout where the topic comes up.

Serves: chapter 5.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, combine, in_range

COPY_GPU = "ch05.copy.fp32_over_int8_time.gpu"
INT_MM = "ch05.gemm.int_mm_tops"
FP32_GEMM = "ch02.gemm_tflops.fp32.n8192"  # chapter 2's FP32 GEMM at the same size: the notes' baseline
INT8_OVER_BF16 = "gemm.int8_over_bf16"  # the one record of INT8 ÷ BF16 GEMM speed that every chapter prints


def _h200() -> Any:
    """The H200 row of the datasheet table (the stored runs' GPU)."""
    from helpers.perf import specs

    return next(s for s in specs.SPECS if s.name == "H200 SXM")


def _precision(_: Values) -> tuple[str, str]:
    fp32 = float(np.finfo(np.float32).eps)
    int8 = 1 / 127
    orders = math.log10(int8 / fp32)
    return (f"FP32 spacing relative to a value: 2^-23 = {fp32:.2g}; INT8 step relative to the largest value: "
            f"1/127 = {int8:.2g}: {orders:.1f} orders of magnitude apart, and of different kinds (FP32's error "
            "scales with each value, INT8's is one step for all)"), FAILS if abs(orders - 3) > 0.5 else HOLDS


def _speed(m: Values) -> tuple[str, str]:
    copy, mm, over_bf16, f32 = m.get(COPY_GPU), m.get(INT_MM), m.get(INT8_OVER_BF16), m.get(FP32_GEMM)
    h = _h200()
    paper = h.int8 / h.fp32
    fmt = lambda v: "–" if v is None else f"{v:.2f}×"  # noqa: E731
    ratio = lambda a, b: None if a is None or b is None else a / b  # noqa: E731
    parts = {"a memory-bound copy": in_range(copy, 3, 4), "the math (datasheet INT8 ÷ FP32)": in_range(paper, 3, 4)}
    return (f"GPU copy of the same values, FP32 time ÷ INT8 time: {fmt(copy)}; on paper (H200) INT8 Tensor Cores "
            f"÷ FP32 = {paper:.1f}× (÷ TF32 Tensor Cores {h.int8 / h.tf32:.1f}×); measured at 8192³ INT8 GEMM ÷ "
            f"FP32 GEMM {fmt(ratio(mm, f32))}, INT8 ÷ BF16 GEMM {fmt(over_bf16)} (chapter 2's record): against FP32 the math gains far "
            "more than 3–4× on Tensor Cores, and most of it is the Tensor Cores, not the 8 bits"), combine(parts)


def _speed_zh(m: Values) -> str:
    copy, h = m.get(COPY_GPU), _h200()
    fits = {HOLDS: "（符合 3–4 倍）", FAILS: "（不符合 3–4 倍）"}.get(in_range(copy, 3, 4), "")
    return (f"GPU 拷贝：FP32 用时 ÷ INT8 用时 = {'–' if copy is None else f'{copy:.2f}'} 倍{fits}；"
            f"矩阵运算按数据手册 INT8 ÷ FP32 = {h.int8 / h.fp32:.0f} 倍，远超 3–4 倍，主要来自张量核心")


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
        "FP32 has 23 mantissa bits and INT8 only 8: the precision differs by three orders of magnitude.",
        "FP32 有 23 位尾数，INT8 只有 8 位，精度差了三个数量级。",
        _precision, "IEEE 754 binary32 (numpy.finfo); the symmetric INT8 grid of this chapter",
        baseline="FP32's relative spacing (2^-23) against INT8's step relative to its largest value (1/127)",
        summary_zh=lambda m: (f"FP32 相对间隔 {float(np.finfo(np.float32).eps):.2g}，INT8 步长 1/127："
                              f"相差约 {math.log10((1 / 127) / float(np.finfo(np.float32).eps)):.1f} 个数量级，"
                              "且误差性质不同")),
    registry.Claim(
        "ch05.int8_3_to_4x_faster", 5, "notes 3 §1",
        "Going from FP32 to INT8 makes the model 4× smaller, needs 4× less bandwidth and is in theory 3–4× faster.",
        "从 FP32 转为 INT8 后，模型缩小 4 倍，带宽需求降低 4 倍，理论计算速度提升 3–4 倍。",
        _speed, "this chapter's GPU copy and 8192³ GEMMs (dp4a, torch._int_mm, BF16); chapter 2's FP32 GEMM; "
        "NVIDIA H200 datasheet", (COPY_GPU, INT_MM, INT8_OVER_BF16, FP32_GEMM),
        baseline="FP32, the notes' starting point (the same copy and the same GEMM size in FP32)",
        summary_zh=_speed_zh),
    registry.Claim(
        "ch05.dp4a_conv_kernel", 5, "notes 3 §2.1",
        "The int8_conv example calls __dp4a on *(int4*)&input[i] and writes sum * scale to the int32 output.",
        "讲义的 int8_conv 示例对 *(int4*)&input[i] 调用 __dp4a，并把 sum * scale 写入 int32 输出。",
        _dp4a_code, "CUDA C++ Programming Guide, integer intrinsics (__dp4a); helpers/quant/intgemm.py",
        baseline="the CUDA signature of __dp4a (32-bit words of four int8) and an int8 output",
        summary_zh="__dp4a 的参数是各装 4 个 int8 的 32 位字，int4 是 16 字节向量，示例无法编译，"
                   "输出也没有取整和饱和到 int8"),
    registry.Claim(
        "ch05.softmax_per_channel", 5, "notes 1 §1.3.2",
        "A Transformer fell from 92% (FP32) to 85% in INT8 because its softmax outputs were too concentrated; "
        "per-channel quantization brought it back to 91.5%.",
        "某 Transformer 的 FP32 准确率为 92%，INT8 后降到 85%，原因是 Softmax 输出分布过于集中；"
        "改用逐通道量化后回到 91.5%。",
        _softmax_per_channel, "TensorRT Developer Guide, explicit quantization (per-channel scales for weights)",
        baseline="what per-channel quantization means (one scale per output channel of a weight)",
        summary_zh="逐通道量化是权重每个输出通道一个缩放因子；Softmax 输出是激活值，TensorRT 对激活值每个张量一个缩放因子，"
                   "所以这个修复不适用"),
)
