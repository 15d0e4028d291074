"""The sentences chapter 7 prints about its PTQ results, computed from this run's tables.

Serves: chapter 7.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from helpers.errors import InputError

VISIBLE_PTS = 0.5  # a difference of accuracy smaller than this is within a handful of test samples
ALMOST_FREE_PTS = 1.0  # INT8 "costs almost nothing" when no variant is further than this below FP32


def ptq_cost(rows: Sequence[dict], n_test: int, model: str) -> str:
    """How far the INT8 rows of ptq.accuracy_table lie from FP32, in points and in test samples."""
    fp32 = next((r["accuracy %"] for r in rows if r["weights"] == "FP32"), None)
    int8 = [r["accuracy %"] for r in rows if r["weights"] != "FP32"]
    if fp32 is None or not int8 or n_test <= 0:
        raise InputError("ptq_cost needs accuracy_table rows (FP32 and INT8) and the test-set size.")
    worst = fp32 - min(int8)
    sample = 100 / n_test
    verdict = ("INT8 PTQ costs almost nothing here" if worst <= ALMOST_FREE_PTS else
               "INT8 PTQ costs accuracy here: look for the cause (section 5)")
    below = (f"the worst is {worst:.1f} points below FP32, {worst / sample:.0f} test sample(s) of "
             f"{sample:.2g} points each" if worst > 0 else "none is below FP32")
    return (f"{model}: the INT8 variants score {min(int8):.1f}–{max(int8):.1f}% against FP32 {fp32:.1f}%; "
            f"{below}: {verdict}.")


def per_channel_gain(gain: float, bits: str, model: str) -> str:
    """Whether per-channel weights beat per-tensor by a visible margin."""
    if abs(gain) < VISIBLE_PTS:
        return (f"At {bits} per-channel weights change the {model}'s accuracy by {gain:+.1f} points: no visible "
                "effect at this precision.")
    better = "beat" if gain > 0 else "lose to"
    return f"At {bits} per-channel weights {better} per-tensor by {abs(gain):.1f} points on the {model}."


def recovery(curve: Sequence[dict], fp32_acc: float, k: int = 2) -> str:
    """How much of the all-quantized loss keeping the k most sensitive layers in float wins back."""
    by_kept = {r["kept in FP"]: r["accuracy %"] for r in curve}
    if 0 not in by_kept or k not in by_kept:
        raise InputError(f"the curve needs the points with 0 and {k} layers kept in floating point.")
    lost = fp32_acc - by_kept[0]
    if lost <= 0:
        return "Quantizing every layer lost nothing here: there is nothing for mixed precision to recover."
    back = (by_kept[k] - by_kept[0]) / lost
    return (f"All layers quantized: {by_kept[0]:.1f}% (FP32 {fp32_acc:.1f}%). Keeping the {k} most sensitive "
            f"layers in floating point gives {by_kept[k]:.1f}%: {back:.0%} of the loss recovered by "
            f"{k} of {max(by_kept)} layers.")


def range_ratio_rows(ratios: Mapping[str, float]) -> list[dict]:
    """Table rows of the largest ÷ median per-channel weight range per layer, widest first."""
    return [{"layer": k, "largest ÷ median channel range": v}
            for k, v in sorted(ratios.items(), key=lambda kv: -kv[1])]
