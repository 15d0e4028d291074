"""Chapter 12's decode-attention table: its sentence says only what the rows' rounds resolve; its rows round-trip."""

from __future__ import annotations

from helpers.chapters.ch12_language_models import attention_bench as ab
from helpers.chapters.ch12_language_models import decode_bench as db
from helpers.chapters.ch12_language_models import tables


def _row(b: int, kernel: str, us: float, lo: float, hi: float, over: float) -> dict:
    return {"batch": b, "kernel": kernel, "µs": us, "cache GB/s": 1.0, "× PyTorch": over,
            "spread": {"min_us": lo, "max_us": hi, "q1_us": us, "q3_us": us, "rounds": 7}}


def test_the_sentence_resolves_only_what_the_rounds_separate():
    rows = [_row(1, "PyTorch SDPA", 9.0, 8.8, 9.3, 1.0), _row(1, "course kernel", 4.0, 3.9, 4.1, 2.25),
            _row(8, "PyTorch SDPA", 30.0, 29.0, 31.0, 1.0), _row(8, "course kernel", 29.5, 28.5, 30.5, 1.02)]
    text = ab.sentence(rows)
    assert "batch 1: 4.0 µs against 9.0 (2.25× PyTorch's speed)" in text
    assert "batch 8: 29.5 µs against 30.0 (1.02× PyTorch's speed, not resolved" in text
    assert ab.sentence([]) == "Decode attention: no rows."


def test_cache_bytes_are_keys_and_values_of_every_head():
    shape = db.StackShape()
    assert ab.cache_bytes(shape, 1) == 2 * 32 * 512 * 128 * 2
    assert ab.cache_bytes(shape, 8) == 8 * ab.cache_bytes(shape, 1)


def test_rows_round_trip_through_records():
    rows = [_row(1, "course kernel", 4.0, 3.9, 4.1, 2.25), _row(16, "PyTorch SDPA", 60.0, 59.0, 61.0, 1.0)]
    back = tables.ATTENTION.stored_rows(tables.ATTENTION.record(rows))
    assert [(r["batch"], r["kernel"], r["µs"]) for r in back] == [(1, "course kernel", 4.0), (16, "PyTorch SDPA", 60.0)]
