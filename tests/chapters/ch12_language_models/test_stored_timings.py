"""Chapter 12's stored H200 timings: a kernel timed in two tables of one run must agree within 5 %."""

from __future__ import annotations

from helpers import reference
from helpers.bench import Record
from helpers.chapters.ch12_language_models import timing


def _rec(key: str, table: str, us: float) -> Record:
    return Record(f"ch12.{table}.{key}", us, "µs", "x", "d", extra={"key": key, "table": table})


def test_agreement_flags_a_disagreement_and_passes_an_agreement():
    rows = timing.agreement([_rec("a 1x1", "gemv", 10.0), _rec("a 1x1", "path", 10.4),
                             _rec("b 1x1", "gemv", 10.0), _rec("b 1x1", "batch", 10.6), _rec("c 1x1", "gemv", 3.0)])
    assert {r["kernel and shape"]: r["agree"] for r in rows} == {"a 1x1": True, "b 1x1": False}


def test_stored_tables_timing_the_same_kernel_and_shape_agree():
    recs = [r for r in reference.load("h200") if r.name.startswith("ch12.")]
    rows = timing.agreement(recs)
    assert len(rows) >= 4, "the stored H200 run should time at least four kernels in two tables (gemv, path, batch, group)"
    bad = [r for r in rows if not r["agree"]]
    assert not bad, f"tables disagree by more than {timing.AGREE:.0%}: {bad}"
    assert all(r.extra.get("rounds", 0) >= 5 and r.extra["min_us"] <= r.value <= r.extra["max_us"]
               for r in recs if r.extra.get("table")), "every stored timing keeps >= 5 rounds and its spread"
