"""Lab 4: per-channel symmetric INT8 weights and integer-only requantization.

Specs are helpers.quant's own functions. The visible cases are chosen so that each classic mistake
changes the answer: the wrong channel axis (non-square weights), a missing clamp (scales smaller
than max|w| / 127), rounding half away from zero (exact ties), a flipped zero-point sign, and
float rounding instead of the integer rounding shift.

Serves: lab04 (its answer key: specs, visible and hidden cases, hints).
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


def hidden_scale_cases() -> list[Case]:
    """Hidden: a conv weight, and a negative axis."""
    rng = np.random.default_rng(404)
    return [Case("hidden: conv 8x4x3x3", (rng.normal(size=(8, 4, 3, 3)).astype(np.float32), 0)),
            Case("hidden: axis -1", (rng.normal(size=(3, 5)).astype(np.float32), -1))]


def hidden_quantize_cases() -> list[Case]:
    """Hidden: 3-D weights, clipped scales, channels on the last axis."""
    w = np.random.default_rng(405).normal(size=(6, 2, 3)).astype(np.float32)
    return [Case("hidden: 3-D, axis 0, clipped", (w, np.full(6, 0.005, np.float32), 0)),
            Case("hidden: 3-D, axis 2", (w, np.array([0.01, 0.02, 0.5], np.float32), 2))]


def hidden_requantize_cases() -> list[Case]:
    """Hidden: large accumulators, the lowest zero point."""
    acc = np.random.default_rng(406).integers(-2**24, 2**24, 50).astype(np.int32)
    return [Case("hidden: large accumulators", (acc, 1518500250, 7, 0)),
            Case("hidden: zero point -128", (acc, 1518500250, 7, -128))]


register(
    Exercise(
        id="lab04.per_channel_scale", title="per-channel symmetric scales", spec=spec_per_channel_scale,
        cases=scale_cases, hidden=hidden_scale_cases, compare="close", rtol=1e-6, atol=0.0,
        hint="One symmetric scale per channel: the largest magnitude within that channel, mapped to 127.",
        hints=("Reduce over every axis except `axis` (np.max accepts a tuple of axes); a channel of zeros gets "
               "1.0; return float32.",),
    ),
    Exercise(
        id="lab04.quantize_per_channel", title="per-channel INT8 quantization",
        spec=spec_quantize_per_channel, cases=quantize_cases, hidden=hidden_quantize_cases,
        hint="Divide each channel by its own scale, round ties to even, and saturate to the int8 range.",
        hints=("Give the scales a shape that broadcasts along `axis` (size 1 on every other axis). Clip before "
               "the int8 cast.",),
    ),
    Exercise(
        id="lab04.quantize_multiplier", title="fixed-point multiplier", spec=spec_quantize_multiplier,
        cases=multiplier_cases, hidden=lambda: [Case(f"hidden: m = {m}", (m,)) for m in (0.25, 0.1, 1e-7, 0.999)],
        hint="Split m into a mantissa in [0.5, 1) and a power of two, then store the mantissa as a 31-bit integer.",
        hints=("np.frexp does the split. Rounding the mantissa can reach 2**31 exactly: then halve it and move "
               "the exponent by one.",),
    ),
    Exercise(
        id="lab04.requantize", title="integer-only requantization", spec=spec_requantize,
        cases=requantize_cases, hidden=hidden_requantize_cases,
        hint="Multiply by M0, then divide by a power of two with a right shift that rounds to nearest, "
             "add the output zero point, and saturate.",
        hints=("Work in int64: the product needs 62 bits. Adding half of the divisor before the shift makes it "
               "round; add (do not subtract) the zero point; clip before the int8 cast.",),
    ),
)
