"""Chapter 12's timings: a kernel at one shape and batch shown in two tables agrees (within 5 %) when one harness
timed both, or says which harnesses differ; every stored run of every card keeps that rule."""

from __future__ import annotations

import pytest

from helpers import reference
from helpers.chapters.ch12_language_models import experiments, tables, timing


def _row(key: str, us: float, harness: str = timing.HARNESS) -> dict:
    return {"key": key, "µs": us, "harness": harness}


def test_agreement_flags_a_disagreement_and_names_another_harness():
    rows = tables.agreement({"gemv": [_row("a 1x1", 10.0), _row("b 1x1", 10.0), _row("c 1x1", 3.0)],
                             "path": [_row("a 1x1", 10.4)], "batch": [_row("b 1x1", 10.6)],
                             "sweep": [_row("c 1x1", 3.9, "one at a time")]})
    got = {r["kernel and shape"]: r["agree"] for r in rows}
    assert got["a 1x1"] is True and got["b 1x1"] is False  # planted: 6 % apart in one harness
    assert got["c 1x1"] == f"another harness: {timing.HARNESS} vs one at a time"


def _disagreements(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["agree"] is False]


@pytest.mark.parametrize("card", [c for c in reference.SOURCES if c != "cpu"])
def test_every_stored_run_shows_one_timing_per_kernel_shape_and_batch(card):
    if not reference.load(card):
        pytest.skip(f"no stored {card} run")
    results = [e.run(stored=True, card=card) for e in (experiments.GEMV, experiments.PATH, experiments.SWEEP)]
    if not any(rows for res in results for rows in res.rows.values()):
        pytest.skip(f"the stored {card} run holds no chapter-12 timings")
    rows = experiments.agreement(*results)
    assert len(rows) >= 4, "a stored run shows at least four kernels in two tables (gemv, path, group, batch)"
    assert _disagreements(rows) == [], f"tables disagree by more than {timing.AGREE:.0%} in one harness"
    timed = [r for res in results for name, rs in res.rows.items() if name != "sweep" for r in rs if "µs" in r]
    assert all(r["spread"] and r["spread"]["rounds"] >= 5 and r["spread"]["min_us"] <= r["µs"] <=
               r["spread"]["max_us"] for r in timed), "every stored timing keeps >= 5 rounds and its spread"
