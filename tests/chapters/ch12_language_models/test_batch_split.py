"""The batched decode step split into its GEMMs (timed alone) and the part both paths share."""

from __future__ import annotations

import pytest

from helpers.chapters.ch12_language_models import batch_split

SHAPES = ("12288x4096", "4096x4096", "22016x4096", "4096x11008")


def _rows(fp16_ms: float, w4_ms: float, gemm_us: float, layers: int = 8, batch: int = 8):
    steps = [{"batch": batch, "path": "fp16 (cuBLAS)", "ms/step": fp16_ms, "layers": layers},
             {"batch": batch, "path": "w4a16 GEMM (CUDA)", "ms/step": w4_ms, "layers": layers}]
    launches = [{"scheme": "w4a16", "shape": s, "M": batch, "µs": gemm_us} for s in SHAPES]
    return steps, launches


def test_the_shared_part_dilutes_the_gemms_ratio():
    steps, launches = _rows(2.0, 1.25, 15.625)  # 32 GEMMs of 15.625 us = 0.5 ms; shared 0.75 ms; FP16 GEMMs 1.25 ms
    s = batch_split.split(steps, launches)
    assert s["gemms"] == pytest.approx(0.5) and s["shared"] == pytest.approx(0.75)
    assert s["fp16 gemms"] == pytest.approx(1.25)
    text = batch_split.sentence(steps, launches, target=1.8)
    assert "2.50× the W4A16 GEMMs, diluted to 1.60×" in text
    # 1.8 = (1.25 + x) / (0.5 + x) -> x = 0.4375 ms; 1.8 = 2.0 / (g + 0.75) -> g = 0.361 ms
    assert "the shared part at 0.43" in text and "ms with these GEMMs or W4A16 GEMMs of 0.361 ms with this shared" in text
    assert "要达到目标 1.8 倍" in text.splitlines()[1]
    assert "would need" not in batch_split.sentence(steps, launches, target=1.5)


def test_no_split_without_every_launch_or_when_the_gemms_exceed_the_step():
    steps, launches = _rows(2.0, 1.25, 15.625)
    assert batch_split.split(steps, launches[:3]) is None
    assert "not split" in batch_split.sentence(steps, launches[:3])
    assert batch_split.split(*_rows(2.0, 1.25, 60.0)) is None  # 32 x 60 us = 1.92 ms > the 1.25 ms step
    assert batch_split.split(steps, launches, batch=4) is None


def test_a_target_out_of_reach_of_either_part_alone():
    # GEMMs 2x apart and a shared part so large that 3x needs both to change
    steps, launches = _rows(2.0, 1.5, 15.625)  # gemms 0.5, shared 1.0, fp16 gemms 1.0 -> 2x, diluted to 1.33x
    text = batch_split.sentence(steps, launches, target=3.0)
    assert "The target 3× needs both faster." in text
