"""Lab 4: per-channel symmetric INT8 weights and integer-only requantization.

Specs are helpers.quant's own functions. The visible cases are chosen so that each classic mistake
changes the answer: the wrong channel axis (non-square weights), a missing clamp (scales smaller
than max|w| / 127), rounding half away from zero (exact ties), a flipped zero-point sign, and
float rounding instead of the integer rounding shift.

Serves: lab04 (its exercises: spec, visible cases, hint).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.quant import core, intgemm


def spec_per_channel_scale(w: np.ndarray, axis: int = 0) -> np.ndarray:
    """max |w| over every axis but `axis`, divided by 127, as float32 (1.0 for an all-zero channel)."""
    scale, _ = core.params_for(w, axis=axis, symmetric=True)
    return np.asarray(scale, dtype=np.float32)


def spec_quantize_per_channel(w: np.ndarray, scales: np.ndarray, axis: int = 0) -> np.ndarray:
    """clamp(round_half_even(w / scale[channel]), -128, 127) as int8, channels along `axis`."""
    return core.quantize(w, scales, 0, axis=axis)


def spec_quantize_multiplier(m: float) -> tuple[int, int]:
    """(M0, shift) with m ~= M0 * 2**-(31 + shift) and 2**30 <= M0 < 2**31."""
    m0, shift = intgemm.quantize_multiplier(m)
    return int(m0), int(shift)


def spec_requantize(acc: np.ndarray, m0: int, shift: int, zero_point: int = 0) -> np.ndarray:
    """clamp(((acc * M0 + 2**(30 + shift)) >> (31 + shift)) + zero_point, -128, 127) as int8."""
    return intgemm.requantize_fixed(acc, m0, shift, zero_point)


def _w(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    """Weights whose channels (axis 0) have ranges spread over 100x."""
    rng = np.random.default_rng(seed)
    spread = np.geomspace(0.01, 1.0, shape[0]).reshape((-1,) + (1,) * (len(shape) - 1))
    return (rng.normal(size=shape) * spread).astype(np.float32)


def scale_cases() -> list[Case]:
    """Visible cases: a linear weight, a conv weight, channels along axis 1, an all-zero channel."""
    zero = _w(3, (4, 6))
    zero[2] = 0
    return [
        Case("linear weight 5x7, axis 0", (_w(1, (5, 7)), 0)),
        Case("conv weight 4x3x3x3, axis 0", (_w(2, (4, 3, 3, 3)), 0)),
        Case("channels along axis 1 (6x4)", (np.ascontiguousarray(_w(4, (4, 6)).T), 1)),
        Case("an all-zero channel gets scale 1.0", (zero, 0)),
    ]


def quantize_cases() -> list[Case]:
    """Visible cases: max scales, clipped scales (clamp matters), exact ties, axis 1."""
    w = _w(5, (4, 9))
    ties = np.array([[0.5, 1.5, 2.5, -0.5, -2.5], [0.25, 0.75, -0.25, 1.25, 3.0]], np.float32)
    return [
        Case("max scales, 4x9", (w, spec_per_channel_scale(w, 0), 0)),
        Case("scales at half the max: values must saturate", (w, spec_per_channel_scale(w, 0) / 2, 0)),
        Case("exact ties x / scale = k + 0.5", (ties, np.array([1.0, 0.5], np.float32), 0)),
        Case("channels along axis 1 (9x4)", (np.ascontiguousarray(w.T), spec_per_channel_scale(w, 0), 1)),
    ]


def multiplier_cases() -> list[Case]:
    """Visible multipliers: a power of two, typical small ones, one that rounds up to 2**31."""
    return [Case(f"m = {m!r}", (m,)) for m in (0.5, 0.0123, 3.1e-5, 0.75, 1 - 2**-33)]


def requantize_cases() -> list[Case]:
    """Visible accumulators: ties, saturation, zero points of both signs."""
    acc = np.array([-3, -1, 1, 3, 5, 10**6, -10**6], np.int32)
    big = np.random.default_rng(6).integers(-2**20, 2**20, (6, 5)).astype(np.int32)
    m0, shift = spec_quantize_multiplier(0.5)
    m0b, shiftb = spec_quantize_multiplier(0.00123)
    return [
        Case("m = 0.5: ties round up", (acc, m0, shift, 0)),
        Case("zero point +10", (acc, m0, shift, 10)),
        Case("zero point -20", (acc, m0, shift, -20)),
        Case("typical accumulators, m = 0.00123", (big, m0b, shiftb, 3)),
    ]


register(
    Exercise(
        id="lab04.per_channel_scale", title="per-channel symmetric scales", spec=spec_per_channel_scale,
        cases=scale_cases, compare="close", rtol=1e-6, atol=0.0,
        hint="reduce np.abs(w).max over every axis except `axis` (axis=tuple(...)), divide by 127, "
             "and use 1.0 where the maximum is 0; return float32.",
    ),
    Exercise(
        id="lab04.quantize_per_channel", title="per-channel INT8 quantization",
        spec=spec_quantize_per_channel, cases=quantize_cases,
        hint="reshape scales so they broadcast along `axis` (shape [1, ..., C, ..., 1]), then "
             "np.clip(np.rint(w / s), -128, 127).astype(np.int8): rint rounds ties to even.",
    ),
    Exercise(
        id="lab04.quantize_multiplier", title="fixed-point multiplier", spec=spec_quantize_multiplier,
        cases=multiplier_cases,
        hint="f, e = np.frexp(m) gives m = f * 2**e with 0.5 <= f < 1; M0 = round(f * 2**31), "
             "shift = -e; if M0 reaches 2**31, halve it and add 1 to e.",
    ),
    Exercise(
        id="lab04.requantize", title="integer-only requantization", spec=spec_requantize,
        cases=requantize_cases,
        hint="in int64: total = 31 + shift; r = (acc * M0 + (1 << (total - 1))) >> total; then "
             "ADD the zero point and clip to -128..127 before casting to int8.",
    ),
)
