"""Chapter 6: the printed sentences follow the numbers, and the notes' 99% rule is judged by the SQNR gap."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import claims
from helpers.chapters.ch06_calibration import notes, readings
from helpers.errors import InputError


def test_accuracy_spread_says_whether_calibrators_differ():
    close = [{"accuracy %": 96.5}, {"accuracy %": 96.7}]
    far = [{"accuracy %": 80.0}, {"accuracy %": 96.7}]
    assert "little separates" in readings.accuracy_spread(close, 96.7)
    assert "matters here" in readings.accuracy_spread(far, 96.7) and "16.7 points below" in \
        readings.accuracy_spread(far, 96.7)
    with pytest.raises(InputError):
        readings.accuracy_spread([], 96.7)


def test_collapse_sentence_is_computed_from_the_pixels():
    pixels = np.arange(17) / 16
    text = readings.collapse(pixels, 0.0625, 1.0)
    assert "17 distinct values, 0.0625 apart" in text and "94%" in text and "1× the step" in text


def test_layer_sqnr_picks_the_method_and_the_best_other():
    rows = [{"layer": "4", "method": "percentile 99", "SQNR dB": 32.9, "clipped %": 1.0},
            {"layer": "4", "method": "mse", "SQNR dB": 44.8, "clipped %": 0.003},
            {"layer": "2", "method": "mse", "SQNR dB": 50.0, "clipped %": 0.0}]
    assert readings.layer_sqnr(rows, "4", "percentile 99") == (32.9, 44.8, 1.0)
    with pytest.raises(InputError):
        readings.layer_sqnr(rows, "2", "percentile 99")


def test_the_notes_99_percent_rule_is_judged_by_the_sqnr_gap():
    claim = claims.get("ch06.cover_99")
    names = claim.needs
    tight = claims.judge(claim, dict(zip(names, (32.9, 44.8, 1.0))))
    assert tight["verdict"] == claims.FAILS and "far too tight" in tight["evidence"]
    close = claims.judge(claim, dict(zip(names, (44.0, 44.8, 0.01))))
    assert close["verdict"] == claims.HOLDS and "too tight" not in close["evidence"]
    assert claims.judge(claim, {})["verdict"] == claims.NOT_MEASURED
    assert notes.CLAIMS
