"""Chapter 7: the printed PTQ sentences follow the numbers, and every accuracy difference is judged by the
paired bootstrap over the test samples, not by a fixed dead band (planted per-sample results)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import TensorDataset

from helpers.chapters.ch07_ptq import readings
from helpers.errors import InputError
from helpers.findings import NOT_RESOLVED


def pair(n: int, a_only: int, b_only: int, both: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample correctness of two models on the same n samples: both right on `both`, one right on the others."""
    a, b = np.zeros(n, bool), np.zeros(n, bool)
    a[:both] = b[:both] = True
    a[both:both + a_only] = True
    b[both + a_only:both + a_only + b_only] = True
    return a, b


def rows_and_correct(fp32: np.ndarray, int8: np.ndarray) -> tuple[list[dict], dict]:
    """accuracy_table rows and the correctness dict it fills, for FP32 and one INT8 variant."""
    rows = [{"weights": "FP32", "calibrator": "-", "accuracy %": 100 * fp32.mean()},
            {"weights": "per-tensor", "calibrator": "max", "accuracy %": 100 * int8.mean()}]
    return rows, {readings.FP32: fp32, ("per-tensor", "max"): int8}


def test_a_small_difference_the_bootstrap_resolves_is_a_finding():
    """Old rule: |0.4| < VISIBLE_PTS = 0.5 printed 'no visible effect'."""
    a, b = pair(2000, a_only=8, b_only=0, both=1900)
    s = readings.gap(a, b)
    assert s.lo > 0 and "2000 test samples" in s.method
    text = readings.per_channel_gain(0.4, "8 bits", "MobileNet", spread=s)
    assert "beat per-tensor by 0.4 points" in text and NOT_RESOLVED not in text


def test_a_larger_difference_inside_the_spread_is_not_resolved():
    """Old rule: 0.8 >= 0.5 printed 'beat per-tensor by 0.8 points'."""
    a, b = pair(1000, a_only=60, b_only=52, both=800)
    s = readings.gap(a, b)
    assert s.contains(0.0) and s.lo < 0.8 < s.hi
    text = readings.per_channel_gain(0.8, "8 bits", "MobileNet", spread=s)
    assert NOT_RESOLVED in text and "beat" not in text and "在此噪声下无法分辨" in text
    assert "cannot say" in readings.per_channel_gain(0.8, "8 bits", "MobileNet", spread=None)
    big = readings.gap(*pair(1000, a_only=330, b_only=12, both=500))
    assert "beat per-tensor by 31.8" in readings.per_channel_gain(31.8, "4-bit weights", "MobileNet", spread=big)
    assert "lose to per-tensor" in readings.per_channel_gain(-31.8, "4-bit", "M", spread=readings.gap(
        *pair(1000, a_only=12, b_only=330, both=500)))


def test_ptq_cost_is_judged_by_the_paired_interval():
    fp32, int8 = pair(2000, a_only=8, b_only=0, both=1900)  # 0.4 points, resolved, under 1 point
    text = readings.ptq_cost(*rows_and_correct(fp32, int8), "ResNet")
    assert "costs almost nothing here: a resolved loss" in text and "8 test sample(s)" in text
    # 1.5 points below FP32 but inside the noise: the old dead band said "costs accuracy"
    fp32, int8 = pair(1000, a_only=80, b_only=65, both=800)
    text = readings.ptq_cost(*rows_and_correct(fp32, int8), "ResNet")
    assert NOT_RESOLVED in text and "costs accuracy" not in text and "1.5 points below FP32" in text
    fp32, int8 = pair(1000, a_only=60, b_only=0, both=900)  # 6 points, resolved above 1 point
    assert "costs accuracy here" in readings.ptq_cost(*rows_and_correct(fp32, int8), "ResNet")
    fp32, int8 = pair(4000, a_only=44, b_only=4, both=3800)  # 1.0 point: straddles the 1-point line
    assert f"more than 1 point is {NOT_RESOLVED}" in readings.ptq_cost(*rows_and_correct(fp32, int8), "R")
    fp32, int8 = pair(1000, a_only=0, b_only=3, both=900)
    assert "none is below FP32" in readings.ptq_cost(*rows_and_correct(fp32, int8), "ResNet")


def test_ptq_cost_says_what_is_missing():
    fp32, int8 = pair(100, 1, 0, 90)
    rows, correct = rows_and_correct(fp32, int8)
    with pytest.raises(InputError, match="FP32 and INT8"):
        readings.ptq_cost([], correct, "x")
    with pytest.raises(InputError, match="correct=dict"):
        readings.ptq_cost(rows, {readings.FP32: fp32}, "x")


def right_on(n: int, *firsts: int) -> list[np.ndarray]:
    """Per-sample correctness of models right on the first k of n samples, one array per k (nested: paired)."""
    return [np.arange(n) < k for k in firsts]


def test_recovery_judges_each_difference_by_its_paired_interval():
    """Old rule: 'X% of the loss recovered' printed from two accuracies, whatever the noise."""
    fp32, quantized, kept = right_on(1000, 950, 700, 940)
    text = readings.recovery(fp32, quantized, kept, k=2, layers=10)
    assert "All layers quantized: 70.0% (FP32 95.0%" in text and "96% of the loss recovered by 2 of 10" in text
    assert "1.0 points stay lost, a resolved loss" in text and NOT_RESOLVED not in text
    fp32, quantized, kept = right_on(1000, 950, 700, 948)  # 0.2 points left: 2 samples, inside the noise
    assert f"what is left below FP32 is {NOT_RESOLVED}" in readings.recovery(fp32, quantized, kept, 2, 10)
    fp32, quantized, kept = right_on(1000, 950, 700, 701)  # +0.1 point won: 1 sample
    text = readings.recovery(fp32, quantized, kept, 2, 10)
    assert f"the gain is {NOT_RESOLVED}" in text and "recovered" not in text
    fp32, quantized, kept = right_on(1000, 950, 948, 950)  # a 0.2-point loss is no loss to recover
    text = readings.recovery(fp32, quantized, kept, 2, 10)
    assert f"the loss is {NOT_RESOLVED}" in text and "no resolved loss for mixed precision" in text
    with pytest.raises(InputError, match="k must be"):
        readings.recovery(fp32, quantized, kept, 0, 10)


def test_versus_unchanged_and_fix_steps_follow_the_intervals():
    fp32, entropy, same = right_on(1000, 950, 220, 950)
    text = readings.versus("entropy calibration", fp32, entropy)
    assert "22.0% against FP32 95.0%, 73.0 points below" in text and text.endswith("a resolved loss.")
    assert NOT_RESOLVED in readings.versus("max calibration", fp32, right_on(1000, 948)[0])
    assert "unchanged, 95.0%, right and wrong on the same 1000" in readings.unchanged(fp32, same, "fragile", "the ResNet")
    flipped = same.copy()
    flipped[[0, 999]] = ~flipped[[0, 999]]  # two answers change, accuracy does not
    text = readings.unchanged(fp32, flipped, "fragile", "the ResNet")
    assert "2 of 1000 test samples answered differently" in text and NOT_RESOLVED in text and "unchanged" not in text
    with pytest.raises(InputError, match="same test samples"):
        readings.unchanged(fp32, fp32[:10], "fragile", "the ResNet")
    fp32, naive, fixed = right_on(1000, 950, 700, 940)
    text = readings.fix_step("per-channel", fp32, naive, fixed)
    assert "94.0%; +24.0 points over the step before" in text and "a resolved gain" in text
    assert "1.0 points below FP32" in text and text.endswith("a resolved loss).")
    text = readings.fix_step("kept in FP", fp32, fixed, right_on(1000, 948)[0])
    assert "+0.8 points" in text and f"within the noise of FP32, {NOT_RESOLVED}" in text
    assert "0.1 points above FP32" in readings.fix_step("kept in FP", fp32, fixed, right_on(1000, 951)[0])


def test_a_stored_accuracy_carries_its_bootstrap_interval():
    s = readings.accuracy_interval(right_on(1000, 900)[0])
    assert s.lo < 90 < s.hi and s.hi - s.lo < 5 and s.extra()["spread"] == "bootstrap 95% over 1000 test samples"


def test_other_sentences_follow_the_numbers():
    assert [r["layer"] for r in readings.range_ratio_rows({"a": 2.0, "b": 9.0})] == ["b", "a"]


def test_score_gives_evaluates_accuracy_and_the_per_sample_correctness():
    pytest.importorskip("pytorch_quantization")
    from helpers.model_quant import ptq
    from helpers.models.train import evaluate

    x, y = torch.randn(50, 4), torch.randint(0, 3, (50,))
    model = torch.nn.Linear(4, 3).eval()
    acc, right = ptq.score(model, TensorDataset(x, y))
    assert acc == evaluate(model, TensorDataset(x, y))
    assert right.dtype == bool and right.shape == (50,) and right.sum() == (model(x).argmax(1) == y).sum()


def test_the_per_channel_headline_holds_the_gain_of_per_channel_over_per_tensor():
    """The headline's name reads per-tensor − per-channel; its meaning (and now its one computation) is the gain
    of per-channel over per-tensor weights, and chapter 7 records it through that computation alone (its
    Experiment derives it; the notebook never spells the name)."""
    import inspect
    import json
    from pathlib import Path

    from helpers.chapters.ch07_ptq import experiments
    from helpers.reference import TARGETS_BY_NAME

    right = [True] * 90 + [False] * 10
    worse = [True] * 80 + [False] * 20
    gain, spread = readings.per_channel_gain_pts({("per-channel", "max"): right, ("per-tensor", "max"): worse})
    assert gain == pytest.approx(10.0) and spread.lo > 0
    assert "gain of per-channel over per-tensor" in TARGETS_BY_NAME[readings.PER_CHANNEL_GAIN].meaning
    with pytest.raises(InputError, match="per-tensor"):
        readings.per_channel_gain_pts({("per-channel", "max"): right})
    nb = Path(__file__).resolve().parents[3] / "notebooks" / "07_ptq.ipynb"
    code = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
    assert '"ptq.per_tensor_minus_per_channel_pts"' not in code and "per_channel_gain_pts(" in code
    source = inspect.getsource(experiments)
    assert '"ptq.per_tensor_minus_per_channel_pts"' not in source
    assert "readings.PER_CHANNEL_GAIN:" in source and "readings.per_channel_gain_pts(" in source
