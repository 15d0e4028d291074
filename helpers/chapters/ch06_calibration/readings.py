"""The sentences chapter 6 prints about its calibrators, computed from this run's numbers.

Serves: chapter 6.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from helpers.errors import InputError


def accuracy_spread(acc_rows: Sequence[dict], fp32_acc: float) -> str:
    """How far the calibrators' accuracies lie from FP32 and from each other."""
    if not acc_rows:
        raise InputError("accuracy_spread needs the per-calibrator accuracy rows.")
    accs = [r["accuracy %"] for r in acc_rows]
    worst = max(fp32_acc - a for a in accs)
    spread = max(accs) - min(accs)
    tight = "little separates the calibrators on this easy model" if spread < 1 else \
        "the choice of calibrator matters here"
    return (f"Across the calibrators the accuracy spans {min(accs):.1f}–{max(accs):.1f}% (a {spread:.1f}-point "
            f"spread), at most {worst:.1f} points below FP32 ({fp32_acc:.1f}%): {tight}.")


def collapse(pixels: np.ndarray, collapsed: float, skipped: float) -> str:
    """What the NaN-argmin collapse does to the input range, from the pixel values and the two amax."""
    levels = np.unique(np.asarray(pixels))
    if levels.size == 0:
        raise InputError("collapse needs the pixel values.")
    top = float(np.abs(levels).max())
    step = float(np.min(np.diff(levels))) if levels.size > 1 else top
    return (f"The pixels take {levels.size} distinct values, {step:g} apart, up to {top:g}. pytorch-quantization's "
            f"entropy search returns amax {collapsed:.4g} ({collapsed / step:.3g}× the step between grey levels), so "
            f"{1 - collapsed / top:.0%} of the range "
            f"saturates. Skipping the NaN candidates gives amax {skipped:.4g}.")


def layer_sqnr(rows: Sequence[dict], layer: str, method: str) -> tuple[float, float, float]:
    """(SQNR of `method`, best SQNR of any other method, % clipped by `method`) on one layer."""
    mine = [r for r in rows if r["layer"] == layer and r["method"] == method]
    others = [r["SQNR dB"] for r in rows if r["layer"] == layer and r["method"] != method]
    if not mine or not others:
        raise InputError(f"no rows for layer {layer!r} with method {method!r} and at least one other method.")
    return float(mine[0]["SQNR dB"]), float(max(others)), float(mine[0]["clipped %"])
