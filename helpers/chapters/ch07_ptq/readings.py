"""The sentences chapter 7 prints about its PTQ results, computed from this run's tables.

Every accuracy difference is judged by its noise: a paired bootstrap over the test samples that both
models scored (``gap``, that is ``helpers.model_quant.diagnose.accuracy_gap``). A difference whose interval
holds 0 is "not resolved at this noise", never a finding; a stored accuracy carries its own bootstrap
interval (``accuracy_interval``).

Serves: chapter 7.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from helpers.errors import InputError
from helpers.findings import NOT_RESOLVED, NOT_RESOLVED_ZH
from helpers.model_quant.diagnose import accuracy_gap as gap
from helpers.spread import Spread, bootstrap

ALMOST_FREE_PTS = 1.0  # INT8 "costs almost nothing" when no variant is further than this below FP32
UNRESOLVED = f"{NOT_RESOLVED} ({NOT_RESOLVED_ZH})"
FP32 = ("FP32", "-")  # the FP32 row's key in ptq.accuracy_table(..., correct=...)
# The headline name (fixed by the course's list of measurements) reads "per-tensor minus per-channel", but its
# meaning there is the accuracy gain of per-channel over per-tensor weights: per-channel − per-tensor. The meaning
# rules: a positive value is a gain of per-channel weights.
PER_CHANNEL_GAIN = "ptq.per_tensor_minus_per_channel_pts"


def accuracy_interval(correct: Sequence[bool]) -> Spread:
    """Bootstrap 95 % interval of one model's accuracy in %, from its right/wrong per test sample."""
    return bootstrap((100 * np.asarray(correct, dtype=float)).tolist(), what="test samples")


def _pct(correct: Sequence[bool]) -> float:
    """Accuracy in % from right/wrong per test sample."""
    return 100 * float(np.mean(np.asarray(correct, dtype=float)))


def _interval(s: Spread, short: bool = False) -> str:
    """'paired bootstrap 95% over 1000 test samples: +1.2 to +3.4 points', or 'interval +1.2 to +3.4' when short."""
    return f"interval {s.lo:+.1f} to {s.hi:+.1f}" if short else f"{s.method}: {s.lo:+.1f} to {s.hi:+.1f} points"


def _verdict(s: Spread, above: str = "a resolved loss", below: str = "a resolved gain") -> str:
    """What an interval of x − y (points) says: `above` when resolved above 0, `below` under it, else unresolved."""
    if s.contains(0.0):
        return UNRESOLVED
    return above if s.lo > 0 else below


def versus(label: str, ref: Sequence[bool], other: Sequence[bool], ref_name: str = "FP32") -> str:
    """'<label>: 21.9% against FP32 98.1%, 76.2 points below (paired bootstrap …): a resolved loss.', from the
    right/wrong of both models on the same test samples."""
    s, a, b = gap(ref, other), _pct(ref), _pct(other)
    side = "below" if a > b else "above" if b > a else "from"
    return (f"{label}: {b:.1f}% against {ref_name} {a:.1f}%, {abs(a - b):.1f} points {side} ({_interval(s)}): "
            f"{_verdict(s)}.")


def unchanged(ref: Sequence[bool], other: Sequence[bool], label: str, ref_name: str) -> str:
    """Whether a model meant to compute the same function scores the same: same answers on every test sample,
    or the difference judged by its paired interval (``versus``)."""
    r, o = np.asarray(ref, dtype=bool), np.asarray(other, dtype=bool)
    if r.shape != o.shape or r.size == 0:
        raise InputError(f"both models must be scored on the same test samples: got {r.size} and {o.size}.")
    if (r == o).all():
        return (f"{label}: FP32 accuracy unchanged, {_pct(r):.1f}%, right and wrong on the same "
                f"{r.size} test samples as {ref_name}.")
    return versus(f"{label} ({int((r != o).sum())} of {r.size} test samples answered differently)", r, o, ref_name)


def fix_step(label: str, fp32: Sequence[bool], before: Sequence[bool], after: Sequence[bool]) -> str:
    """One step of the fix: its gain over the step before and what is left below FP32, each by its paired interval."""
    won, left = gap(after, before), gap(fp32, after)
    won_txt = _verdict(won, "a resolved gain", "a resolved loss")
    left_txt = (f"within the noise of FP32, {UNRESOLVED}" if left.contains(0.0)
                else _verdict(left, "a resolved loss", "resolved above FP32"))
    return (f"{label}: {_pct(after):.1f}%; {_pct(after) - _pct(before):+.1f} points over the step before "
            f"({_interval(won)}: {won_txt}); {abs(_pct(fp32) - _pct(after)):.1f} points "
            f"{'below' if _pct(fp32) >= _pct(after) else 'above'} FP32 "
            f"({_interval(left, short=True)}: {left_txt}).")


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


def per_channel_gain_pts(correct: Mapping[tuple[str, str], Sequence[bool]], calibrator: str = "max"
                         ) -> tuple[float, Spread]:
    """The accuracy gain of per-channel over per-tensor weights with one calibrator (per-channel − per-tensor,
    points) and its paired-bootstrap interval: what ``PER_CHANNEL_GAIN`` holds, whatever its name says."""
    key = ("per-channel", calibrator), ("per-tensor", calibrator)
    missing = [k for k in key if k not in correct]
    if missing:
        raise InputError(f"per_channel_gain_pts needs the right/wrong lists of {missing} "
                         "(ptq.accuracy_table(..., correct=...) fills them).")
    pc, pt = correct[key[0]], correct[key[1]]
    return _pct(pc) - _pct(pt), gap(pc, pt)


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


def recovery(fp32: Sequence[bool], quantized: Sequence[bool], kept: Sequence[bool], k: int, layers: int) -> str:
    """How much of the all-quantized loss keeping the k most sensitive layers in float wins back, each difference
    judged by its paired interval over the same test samples (right/wrong of FP32, all layers quantized, k kept)."""
    if not 0 < k <= layers:
        raise InputError(f"k must be in 1..{layers} (the number of quantized layers), got {k}.")
    lost, won, left = gap(fp32, quantized), gap(kept, quantized), gap(fp32, kept)
    f, q, kk = _pct(fp32), _pct(quantized), _pct(kept)
    head = f"All layers quantized: {q:.1f}% (FP32 {f:.1f}%; {_interval(lost)})"
    if lost.lo <= 0:
        what = f"the loss is {UNRESOLVED}" if lost.contains(0.0) else "no loss"
        return f"{head}: {what}. There is no resolved loss for mixed precision to recover."
    gained = f"Keeping the {k} most sensitive layers in floating point gives {kk:.1f}% ({_interval(won, True)})"
    if won.lo <= 0:
        return f"{head}. {gained}: " + (f"the gain is {UNRESOLVED}." if won.contains(0.0) else "a resolved loss.")
    rest = (f"what is left below FP32 is {UNRESOLVED}" if left.contains(0.0) else
            f"{f - kk:.1f} points stay lost, a resolved loss" if left.lo > 0 else "it is resolved above FP32")
    return (f"{head}. {gained}: {(kk - q) / (f - q):.0%} of the loss recovered by {k} of {layers} layers; "
            f"{rest} ({_interval(left, True)}).")


def range_ratio_rows(ratios: Mapping[str, float]) -> list[dict]:
    """Table rows of the largest ÷ median per-channel weight range per layer, widest first."""
    return [{"layer": k, "largest ÷ median channel range": v}
            for k, v in sorted(ratios.items(), key=lambda kv: -kv[1])]
