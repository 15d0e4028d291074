"""Chapter 12's PDL table: its sentence says only what the rows' rounds resolve; no GPU, no rows; rows round-trip."""

from __future__ import annotations

import pytest

from helpers.chapters.ch12_language_models import decode_bench as db
from helpers.chapters.ch12_language_models import pdl_bench as pb
from helpers.chapters.ch12_language_models import tables
from helpers.device import has_gpu


def _row(path: str, launch: str, us: float, lo: float, hi: float, over: float) -> dict:
    return {"path": path, "launch": launch, "µs/step": us, "× plain": over,
            "spread": {"min_us": lo, "max_us": hi, "q1_us": us, "q3_us": us, "rounds": 7}}


def test_the_sentence_resolves_only_what_the_rounds_separate():
    rows = [_row("w4a16 fused (CUDA)", "plain", 2100.0, 2090.0, 2110.0, 1.0),
            _row("w4a16 fused (CUDA)", "PDL", 2000.0, 1995.0, 2008.0, 1.05),
            _row("fp16 fused (CUDA)", "plain", 4800.0, 4790.0, 4820.0, 1.0),
            _row("fp16 fused (CUDA)", "PDL", 4795.0, 4785.0, 4815.0, 1.001)]
    text = pb.sentence(rows)
    assert "W4A16 2000 µs a step with PDL against 2100 plain (1.050× the plain step's speed, faster)" in text
    assert "FP16 4795 µs a step with PDL against 4800 plain (1.001× the plain step's speed, not resolved" in text
    slower = pb.sentence([_row("w8a16 fused (CUDA)", "plain", 100.0, 99.0, 101.0, 1.0),
                          _row("w8a16 fused (CUDA)", "PDL", 110.0, 109.0, 111.0, 0.91)])
    assert "slower" in slower and "faster" not in slower
    assert pb.sentence([]).startswith("Programmatic dependent launch: no rows")


@pytest.mark.skipif(has_gpu(), reason="a GPU machine measures the rows (test_pdl_rows_on_a_gpu)")
def test_without_a_gpu_there_are_no_rows():
    assert pb.pdl_rows({}) == []


@pytest.mark.gpu
def test_pdl_rows_on_a_gpu():
    """Two layers with head dimension 128 (the course's attention kernel): both launches give the same logits (pdl_rows
    checks it first) and every path has both rows."""
    from helpers.kernels import pdl

    if not pdl.supported():
        pytest.skip("programmatic dependent launch needs a Hopper GPU")
    m = db.build(db.StackShape(layers=2, d=512, heads=4, ffn=1024, context=64, vocab=128))
    rows = pb.pdl_rows(m, rounds=3)
    assert {(r["path"], r["launch"]) for r in rows} == {(p, launch) for p in pb.PATHS for launch in pb.LAUNCHES}
    assert all(r["µs/step"] > 0 for r in rows)


def test_rows_round_trip_through_records():
    rows = [_row("w4a16 fused (CUDA)", "plain", 2100.0, 2090.0, 2110.0, 1.0),
            _row("w4a16 fused (CUDA)", "PDL", 2000.0, 1995.0, 2008.0, 1.05)]
    back = tables.PDL.stored_rows(tables.PDL.record(rows))
    assert [(r["path"], r["launch"], r["µs/step"]) for r in back] == [("w4a16 fused (CUDA)", "plain", 2100.0),
                                                                      ("w4a16 fused (CUDA)", "PDL", 2000.0)]
