"""Chapter 5: the notes' INT8 claims and the interpretation sentences, computed from the numbers."""

from __future__ import annotations

import pytest

from helpers import bench, claims
from helpers.chapters.ch05_quantization_fundamentals import experiments, notes, readings  # noqa: F401


@pytest.fixture(autouse=True)
def _clean_session(monkeypatch):
    monkeypatch.setitem(bench._session, "records", [])


def test_bits_sentence_reports_the_measured_steps():
    text = readings.bits_sentence({"a": [1.0, 5.0, 11.0]}, [2, 3, 4])
    assert "a +4.0 … +6.0 dB (last step +6.00)" in text and "20·log10(2) = 6.02 dB" in text


def test_outlier_sentence_matches_the_experiment():
    rows = experiments.outlier_effect(outlier=20.0)
    text = readings.outlier_sentence(rows)
    ratio = rows[1]["scale"] / rows[0]["scale"]
    assert f"{ratio:.1f}× coarser" in text and 4 < ratio < 6


def test_per_channel_gain():
    text = readings.per_channel_gain({"per-tensor": [10.0, 20.0], "per-channel": [12.0, 40.0]}, [4, 8], at=8)
    assert "gain 20.0 dB" in text and "10.0× finer step" in text


def test_notes_claims():
    assert claims.judge(claims.get("ch05.fp32_vs_int8_precision"))["verdict"] == claims.FAILS
    speed = claims.get("ch05.int8_3_to_4x_faster")
    row = claims.judge(speed, {notes.COPY_GPU: 3.8, notes.INT_MM: 930.0, notes.BF16: 800.0})
    assert row["verdict"] == "depends: holds for a memory-bound copy" and "1.16×" in row["evidence"]
    assert claims.judge(claims.get("ch05.dp4a_conv_kernel"))["verdict"] == claims.FAILS
    assert claims.judge(claims.get("ch05.softmax_per_channel"))["verdict"].startswith("doesn't fit")
