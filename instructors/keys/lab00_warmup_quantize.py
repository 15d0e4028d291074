"""Lab 0 (warm-up): per-tensor symmetric INT8 scale, quantize and dequantize.

The specs are helpers.quant.core's own functions; the visible cases are small and chosen so that
each classic mistake changes the answer: a flipped zero-point sign, a missing clamp, rounding
half away from zero instead of to even, int8 overflow before the subtraction.

Serves: lab00 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.quant import core


def spec_scale(x: np.ndarray) -> float:
    """Symmetric INT8 scale of x: max|x| / 127 (1.0 for all-zero data)."""
    scale, _ = core.scale_zero_point(x.min(), x.max(), bits=8, symmetric=True)
    return float(scale)


def spec_quantize(x: np.ndarray, scale: float, zero_point: int = 0) -> np.ndarray:
    """clamp(round_half_even(x / scale) + zero_point, -128, 127) as int8."""
    return core.quantize(x, scale, zero_point, bits=8, rounding="half_even")


def spec_dequantize(q: np.ndarray, scale: float, zero_point: int = 0) -> np.ndarray:
    """(q - zero_point) * scale as float32."""
    return core.dequantize(q, np.float32(scale), zero_point)


def _f32(values: list[float]) -> np.ndarray:
    """A float32 array."""
    return np.asarray(values, dtype=np.float32)


def _weights(seed: int, shape: tuple[int, int] = (6, 8)) -> np.ndarray:
    """A small weight-like float32 matrix."""
    return (np.random.default_rng(seed).normal(0, 0.5, size=shape)).astype(np.float32)


def scale_cases() -> list[Case]:
    """Visible cases for the scale."""
    return [
        Case("largest value positive", (_f32([-1.0, 0.5, 0.25, 2.54]),)),
        Case("largest magnitude negative", (_f32([-3.81, 1.0, 0.0, 0.5]),)),
        Case("6x8 weights", (_weights(1),)),
        Case("all zeros (scale 0 would divide by zero: use 1.0)", (np.zeros(5, np.float32),)),
    ]


def quantize_cases() -> list[Case]:
    """Visible cases for quantize: grid points, ties, outliers, zero points, weights."""
    w = _weights(2)
    return [
        Case("values on the grid", (_f32([-1.5, -0.5, 0.0, 1.0, 2.5]), 0.5, 0)),
        Case("exact ties (x / scale = k + 0.5)",
             (_f32([0.125, 0.375, 0.625, -0.125, -0.375, 1.125, -0.625]), 0.25, 0)),
        Case("outliers beyond the grid", (_f32([-5.0, -1.28, 1.27, 3.0, 0.004, 1.3]), 0.01, 0)),
        Case("zero point 10", (_f32([-1.02, 0.0, 0.33, 0.71, 20.0, -20.0]), 0.1, 10)),
        Case("zero point -7", (_f32([-1.02, 0.0, 0.33, 0.71, 20.0, -20.0]), 0.1, -7)),
        Case("6x8 weights", (w, spec_scale(w), 0)),
    ]


def hidden_scale_cases() -> list[Case]:
    """Hidden cases for the scale."""
    rng = np.random.default_rng(2026)
    return [
        Case("hidden: one negative outlier", (np.array([0.1, -9.0, 3.0], np.float32),)),
        Case("hidden: 32x16 weights", ((rng.normal(0, 0.05, (32, 16))).astype(np.float32),)),
        Case("hidden: single tiny value", (np.array([-1e-6], np.float32),)),
    ]


def hidden_quantize_cases() -> list[Case]:
    """Hidden cases for quantize: a clipped scale, a far zero point, ties with a zero point."""
    rng = np.random.default_rng(7)
    x = (rng.standard_t(3, size=(24, 20)) * 0.3).astype(np.float32)
    clipped = float(np.percentile(np.abs(x), 99)) / 127
    return [
        Case("hidden: heavy tails, clipped (percentile) scale", (x, clipped, 0)),
        Case("hidden: zero point -100 pushes values off the grid", (x, 0.01, -100)),
        Case("hidden: ties with a zero point", (np.array([0.5, 1.5, 2.5, -3.5], np.float32), 1.0, 3)),
    ]


def hidden_dequantize_cases() -> list[Case]:
    """Hidden cases for dequantize: every code at both extreme zero points."""
    q = np.arange(-128, 128, dtype=np.int8)
    return [Case("hidden: every code, zero point 127", (q, 0.02, 127)),
            Case("hidden: every code, zero point -128", (q, 0.5, -128))]


def dequantize_cases() -> list[Case]:
    """Visible cases for dequantize: symmetric, zero points at the int8 edges, weights."""
    q = np.random.default_rng(3).integers(-128, 128, size=(6, 8)).astype(np.int8)
    return [
        Case("symmetric", (np.array([-128, -1, 0, 1, 127], np.int8), 0.5, 0)),
        Case("zero point -20", (np.array([-128, -20, 0, 100, 127], np.int8), 0.25, -20)),
        Case("zero point 5", (np.array([-128, -3, 5, 127], np.int8), 0.1, 5)),
        Case("6x8 codes", (q, 0.0125, 3)),
    ]


register(
    Exercise(
        id="lab00.scale", title="symmetric INT8 scale", spec=spec_scale, cases=scale_cases,
        hidden=hidden_scale_cases, compare="close", rtol=1e-6, atol=0.0,
        hint="The scale maps the largest magnitude of x, on either side of zero, to the top code 127.",
        hints=("Take the absolute value before the maximum, so that a large negative value counts; an "
               "all-zero input needs a special case, because a scale of 0 divides by zero later.",),
    ),
    Exercise(
        id="lab00.quantize", title="quantize to INT8", spec=spec_quantize, cases=quantize_cases,
        hidden=hidden_quantize_cases,
        hint="Divide by the scale, round to the nearest integer (ties to even), shift by the zero point, "
             "then keep the result inside the int8 range.",
        hints=("np.rint rounds ties to even. The zero point is added after rounding. Clip to [-128, 127] "
               "before converting with .astype(np.int8): the cast alone wraps around instead of saturating.",),
    ),
    Exercise(
        id="lab00.dequantize", title="dequantize INT8", spec=spec_dequantize, cases=dequantize_cases,
        hidden=hidden_dequantize_cases, compare="close", rtol=1e-6, atol=1e-7,
        hint="Undo the shift by the zero point, then multiply by the scale; the result is float32.",
        hints=("Convert q to float32 before subtracting the zero point: in int8, -128 - 5 wraps around to 123.",),
    ),
)
