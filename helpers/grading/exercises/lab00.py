"""Lab 0 (warm-up): per-tensor symmetric INT8 scale, quantize and dequantize.

The specs are helpers.quant.core's own functions; the visible cases are small and chosen so that
each classic mistake changes the answer: a flipped zero-point sign, a missing clamp, rounding
half away from zero instead of to even, int8 overflow before the subtraction.

Serves: lab00 (its exercises: spec, visible cases, hint).
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
        hint="scale = max(|x|) / 127, the largest magnitude on either side; if that is 0, return 1.0.",
        compare="close", rtol=1e-6, atol=0.0,
    ),
    Exercise(
        id="lab00.quantize", title="quantize to INT8", spec=spec_quantize, cases=quantize_cases,
        hint="q = clip(np.rint(x / scale) + zero_point, -128, 127).astype(np.int8): np.rint rounds "
             "ties to even, the zero point is added, and the clip comes before the cast.",
    ),
    Exercise(
        id="lab00.dequantize", title="dequantize INT8", spec=spec_dequantize, cases=dequantize_cases,
        hint="x_hat = (q.astype(np.float32) - zero_point) * scale: convert to float first, "
             "or q - zero_point overflows int8.",
        compare="close", rtol=1e-6, atol=1e-7,
    ),
)
