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
    row = claims.judge(speed, {notes.COPY_GPU: 3.8, notes.INT_MM: 930.0, notes.INT8_OVER_BF16: 1.24})
    assert row["verdict"] == "depends: holds for a memory-bound copy" and "INT8 ÷ BF16 GEMM 1.24×" in row["evidence"]


def test_the_int8_over_bf16_ratio_is_read_from_chapter_2s_record_only(monkeypatch):
    """Old: chapter 5 divided its own INT8 and BF16 GEMMs (940 ÷ 795 = 1.18×) while chapter 2 printed its record
    gemm.int8_over_bf16 (1.24×) for the same ratio; both now read that record."""
    from helpers import bench, findings

    monkeypatch.setitem(bench._session, "records", [])
    for name, value in (("ch05.gemm.dp4a_tops", 93.0), ("ch05.gemm.int_mm_tops", 940.0), ("ch05.gemm.bf16_tops", 795.0),
                        ("ch05.copy.fp32_over_int8_time.gpu", 3.9), ("gemm.int8_over_bf16", 1.24)):
        bench.record(name, value, "ratio")
    text = readings.gpu_int8()
    assert "1.24× the BF16 GEMM" in text and "1.18" not in text
    assert findings.ratio_sentence("gemm.int8_over_bf16", "INT8", "BF16").startswith("INT8 runs at 1.24×")
    assert "INT8 ÷ BF16 GEMM 1.24×" in claims.judge(claims.get("ch05.int8_3_to_4x_faster"))["evidence"]
    assert claims.judge(claims.get("ch05.dp4a_conv_kernel"))["verdict"] == claims.FAILS
    assert claims.judge(claims.get("ch05.softmax_per_channel"))["verdict"].startswith("doesn't fit")
