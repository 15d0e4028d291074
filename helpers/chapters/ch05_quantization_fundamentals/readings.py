"""Chapter 5's interpretation sentences, computed from the experiments' numbers and the record.

Serves: chapter 5 (and notebook 05b).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from helpers import findings

DB_PER_BIT = 20 * math.log10(2)  # halving the step quarters the noise power: 6.02 dB


def bits_sentence(curves: Mapping[str, Sequence[float]], bits: Sequence[int]) -> str:
    """For each sample set: the dB gained per added bit, against the 6.02 dB of the uniform-noise rule."""
    parts = []
    for name, sqnr in curves.items():
        steps = np.diff(np.asarray(sqnr, dtype=float))
        parts.append(f"{name} {steps.min():+.1f} … {steps.max():+.1f} dB (last step {steps[-1]:+.2f})")
    return (f"dB gained per added bit from {bits[0]} to {bits[-1]} bits: " + "; ".join(parts)
            + f". The rule of thumb is 20·log10(2) = {DB_PER_BIT:.2f} dB per bit.")


def outlier_sentence(rows: Sequence[Mapping[str, float]]) -> str:
    """How much one outlier coarsens the per-tensor step, and what it costs the other values in dB."""
    clean, dirty = rows[0], rows[1]
    return (f"With the outlier the step is {dirty['scale'] / clean['scale']:.1f}× coarser; the other values use "
            f"{dirty['levels used']} levels instead of {clean['levels used']} and lose "
            f"{clean['SQNR of the others (dB)'] - dirty['SQNR of the others (dB)']:.1f} dB of SQNR.")


def per_channel_gain(sqnr: Mapping[str, Sequence[float]], bits: Sequence[int], at: int = 8) -> str:
    """The per-channel gain in dB at one bit width, and the range ratio that gain corresponds to."""
    i = list(bits).index(at)
    gain = sqnr["per-channel"][i] - sqnr["per-tensor"][i]
    return (f"At {at} bits per-channel scales gain {gain:.1f} dB over one per-tensor scale: a {10 ** (gain / 20):.1f}× "
            "finer step for a typical channel.")


def gpu_int8() -> str:
    """dp4a and the INT8 Tensor Cores against BF16, and the INT8 copy, from the record."""
    return findings.sentence(
        "GEMM 8192³: dp4a {dp4a:.0f} TOPS, INT8 Tensor Cores {tc:.0f} TOPS; copying "
        "the same values as INT8 instead of FP32 takes 1/{copy:.2f} of the time: {verdict}.",
        {"dp4a": "ch05.gemm.dp4a_tops", "tc": "ch05.gemm.int_mm_tops", "r": "gemm.int8_over_bf16",
         "copy": "ch05.copy.fp32_over_int8_time.gpu"},
        lambda v: (f"the Tensor Cores run INT8 {v['tc'] / v['dp4a']:.0f}× faster than dp4a, and the INT8 GEMM runs "
                   f"at {v['r']:.2f}× the BF16 GEMM (chapter 2's record); the copy gains "
                   f"{'nearly the full 4×' if v['copy'] > 3.5 else 'less than 4×'} because it is bandwidth-bound"),
        zh="8192³ GEMM：dp4a {dp4a:.0f} TOPS，INT8 张量核心 {tc:.0f} TOPS；把同样的数值按 INT8 而不是 FP32 拷贝，"
           "用时是原来的 1/{copy:.2f}：{verdict}。",
        verdict_zh=lambda v: (f"张量核心上的 INT8 比 dp4a 快 {v['tc'] / v['dp4a']:.0f} 倍，INT8 GEMM 的速度是 BF16 GEMM 的 "
                              f"{v['r']:.2f} 倍（第 2 章的记录）；拷贝受带宽限制，所以"
                              f"{'几乎得到完整的 4 倍' if v['copy'] > 3.5 else '不到 4 倍'}"))
