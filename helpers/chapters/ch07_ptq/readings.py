"""The sentences chapter 7 prints about its PTQ results, computed from this run's tables.

Every accuracy difference is judged by its noise: a paired bootstrap over the test samples that both
models scored (``gap``). A difference whose interval holds 0 is "not resolved at this noise", never a finding.

Serves: chapter 7.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from helpers.errors import InputError
from helpers.findings import NOT_RESOLVED, NOT_RESOLVED_ZH
from helpers.spread import Spread, bootstrap_paired

ALMOST_FREE_PTS = 1.0  # INT8 "costs almost nothing" when no variant is further than this below FP32
UNRESOLVED = f"{NOT_RESOLVED} ({NOT_RESOLVED_ZH})"
FP32 = ("FP32", "-")  # the FP32 row's key in ptq.accuracy_table(..., correct=...)


def gap(a: Sequence[bool], b: Sequence[bool]) -> Spread:
    """Paired-bootstrap 95 % interval of accuracy(a) − accuracy(b) in points, a and b right or wrong on the same
    test samples (``helpers.model_quant.ptq.score``, or ``accuracy_table(..., correct=...)``)."""
    points = [(100 * np.asarray(x, dtype=float)).tolist() for x in (a, b)]
    return bootstrap_paired(points[0], points[1], what="test samples")


def _cost_verdict(s: Spread) -> str:
    """What an interval of FP32 − INT8 (points) says: no resolved loss, a small one, a real one, or unresolved."""
    if s.contains(0.0):
        return f"the difference is {UNRESOLVED}: INT8 PTQ costs no accuracy this test set can resolve"
    if s.hi < 0:
        return "INT8 PTQ costs nothing here: it is resolved above FP32"
    if s.hi <= ALMOST_FREE_PTS:
        return f"INT8 PTQ costs almost nothing here: a resolved loss, under {ALMOST_FREE_PTS:g} point"
    if s.lo > ALMOST_FREE_PTS:
        return "INT8 PTQ costs accuracy here: look for the cause (section 5)"
    return f"whether INT8 PTQ costs more than {ALMOST_FREE_PTS:g} point is {UNRESOLVED}"


def ptq_cost(rows: Sequence[dict], correct: Mapping[tuple[str, str], Sequence[bool]], model: str) -> str:
    """How far the INT8 rows of ptq.accuracy_table lie from FP32, in points and in test samples, judged by the
    paired-bootstrap interval of FP32 − the worst INT8 variant over the same test samples (`correct`)."""
    fp32 = next((r["accuracy %"] for r in rows if r["weights"] == "FP32"), None)
    int8 = [r for r in rows if r["weights"] != "FP32"]
    if fp32 is None or not int8:
        raise InputError("ptq_cost needs accuracy_table rows (FP32 and INT8).")
    worst_row = min(int8, key=lambda r: r["accuracy %"])
    key = (worst_row["weights"], worst_row["calibrator"])
    if FP32 not in correct or key not in correct:
        raise InputError(f"ptq_cost needs the per-sample correctness of FP32 and of {key}: pass the dict that "
                         "ptq.accuracy_table(..., correct=dict) filled.")
    s = gap(correct[FP32], correct[key])
    worst, n_test = fp32 - worst_row["accuracy %"], len(correct[FP32])
    accs = [r["accuracy %"] for r in int8]
    sample = 100 / n_test
    below = (f"the worst ({' '.join(key)}) is {worst:.1f} points below FP32, {worst / sample:.0f} test sample(s) "
             f"of {sample:.2g} points each" if worst > 0 else "none is below FP32")
    return (f"{model}: the INT8 variants score {min(accs):.1f}–{max(accs):.1f}% against FP32 {fp32:.1f}%; "
            f"{below} (paired bootstrap over the {n_test} test samples: {s.lo:+.1f} to {s.hi:+.1f} points): "
            f"{_cost_verdict(s)}.")


def per_channel_gain(gain: float, bits: str, model: str, *, spread: Spread | None) -> str:
    """Whether per-channel weights beat per-tensor by more than the noise: `spread` is the paired-bootstrap
    interval of the gain (``gap``); without one the sentence says the noise is unknown."""
    if spread is None:
        return (f"At {bits} per-channel weights change the {model}'s accuracy by {gain:+.1f} points; no spread was "
                "measured, so this cannot say whether that is more than the noise.")
    interval = f"paired bootstrap over the test samples: {spread.lo:+.1f} to {spread.hi:+.1f} points"
    if spread.contains(0.0):
        return (f"At {bits} per-channel weights change the {model}'s accuracy by {gain:+.1f} points ({interval}): "
                f"{UNRESOLVED}, no visible effect at this precision.")
    better = "beat" if gain > 0 else "lose to"
    return f"At {bits} per-channel weights {better} per-tensor by {abs(gain):.1f} points on the {model} ({interval})."


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
