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


def test_other_sentences_follow_the_numbers():
    curve = [{"kept in FP": k, "accuracy %": a} for k, a in ((0, 65.2), (1, 78.9), (2, 92.9), (10, 97.6))]
    assert "85% of the loss recovered by 2 of 10 layers" in readings.recovery(curve, 97.6)
    assert "nothing for mixed precision" in readings.recovery(
        [{"kept in FP": 0, "accuracy %": 98.0}, {"kept in FP": 2, "accuracy %": 98.0}], 97.9)
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
