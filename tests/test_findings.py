"""helpers.findings and helpers.claims: sentences and verdicts computed from the record, live before stored."""

from __future__ import annotations

import pytest

from helpers import bench, claims, findings, reference
from helpers.errors import InputError


@pytest.fixture(autouse=True)
def _clean_session(monkeypatch):
    """An empty session record for each test."""
    monkeypatch.setitem(bench._session, "records", [])


def test_live_values_win_over_stored_ones():
    stored = next((r for s in findings.default_sources()[1:] if (r := reference.lookup("gemm.int8_over_bf16", s))), None)
    if stored is not None:
        m = findings.get("gemm.int8_over_bf16")
        assert m is not None and m.stored and m.where() == f"stored reference: {stored.device}, {stored.date}"
    bench.record("gemm.int8_over_bf16", 0.5, "ratio")
    m = findings.get("gemm.int8_over_bf16")
    assert m is not None and m.value == 0.5 and not m.stored and m.where() == "measured here"


def test_ratio_sentence_computes_its_verdict():
    bench.record("x.fast", 1.3, "ratio")
    bench.record("x.slow", 0.92, "ratio")
    bench.record("x.same", 1.01, "ratio")
    assert findings.ratio_sentence("x.fast", "INT8", "FP16") == "INT8 runs at 1.30× FP16: faster. (measured here)"
    assert findings.ratio_sentence("x.slow", "INT8", "FP16") == "INT8 runs at 0.92× FP16: slower. (measured here)"
    assert "about as fast" in findings.ratio_sentence("x.same", "INT8", "FP16")


def test_mixed_sources_are_labelled_per_value():
    bench.record("ch01.cpu_bandwidth_all_cores_gbs", 20.0, "GB/s")
    if reference.lookup("ch01.gpu_bandwidth_gbs") is None:
        pytest.skip("no stored GPU bandwidth")
    text = findings.sentence("{cpu:.0f} vs {gpu:.0f}", {"cpu": "ch01.cpu_bandwidth_all_cores_gbs",
                                                      "gpu": "ch01.gpu_bandwidth_gbs"})
    assert "cpu: measured here" in text and "gpu: stored reference: NVIDIA" in text


def test_missing_numbers_give_no_conclusion():
    assert "nothing to conclude" in findings.sentence("{a}", {"a": "no.such.name"})
    assert findings.sentence("{a}", {"a": "no.such.name"}, missing="not yet") == "not yet"
    with pytest.raises(InputError):
        findings.sentence("{a}", {})
    with pytest.raises(InputError):
        findings.get("gemm.int8_over_bf16", sources=("a100",))


def test_against_target():
    bench.record("gemm.int8_over_bf16", 1.2, "ratio")
    assert findings.against_target("gemm.int8_over_bf16", "INT8 ÷ BF16") == \
        "INT8 ÷ BF16: 1.2 (target >= 1.15: met, no spread stored). (measured here)"
    bench.record("gemm.int8_over_bf16", 1.0, "ratio")
    assert "not met" in findings.against_target("gemm.int8_over_bf16", "INT8 ÷ BF16")


def test_compare_has_a_dead_band():
    assert findings.compare(1.1, above="up", below="down") == "up"
    assert findings.compare(0.9, above="up", below="down") == "down"
    assert findings.compare(1.01, above="up", below="down") == "about the same"


def _claim(judge, needs=("t.x",), cid="ch09.test"):
    return claims.Claim(cid, 9, "notes 2 §1.1", "x is between 1 and 2", "x 在 1 到 2 之间", judge, "a test", needs)


def test_a_registered_claim_is_judged_from_the_record():
    claims.register(_claim(lambda m: (f"x = {m['t.x']}", claims.in_range(m["t.x"], 1, 2))))
    try:
        assert claims.judge(claims.get("ch09.test"))["verdict"] == claims.NOT_MEASURED
        bench.record("t.x", 1.5, "ratio")
        row = claims.judge(claims.get("ch09.test"))
        assert row["verdict"] == claims.HOLDS and row["from"] == "measured here"
        bench.record("t.x", 3.0, "ratio")
        assert claims.judge(claims.get("ch09.test"))["verdict"] == claims.FAILS
        text = claims.callout_text("ch09.test")
        assert "notes 2 §1.1" in text and "x 在 1 到 2 之间" in text and "Verdict — doesn't hold" in text
    finally:
        claims._REGISTRY.pop("ch09.test")


def test_claims_must_name_their_chapter_and_notes():
    with pytest.raises(InputError, match="ch09"):
        claims.register(_claim(lambda m: ("", ""), cid="ch01.wrong"))
    bad = claims.Claim("ch09.x", 9, "my blog", "a", "甲", lambda m: ("", ""), "s")
    with pytest.raises(InputError, match="seed"):
        claims.register(bad)
    with pytest.raises(InputError, match="registered"):
        claims.get("ch09.never")


def test_range_and_combine():
    assert claims.in_range(250, 200, 300) == claims.HOLDS
    assert claims.in_range(150, 200, 300) == claims.FAILS
    assert claims.in_range(None, 200, 300) == claims.NOT_MEASURED
    assert claims.combine({"a": claims.FAILS, "b": claims.FAILS}) == claims.FAILS
    assert claims.combine({"a": "holds", "b": claims.FAILS}) == "depends: holds for a"
    assert claims.combine({"a": "holds", "b": claims.NOT_MEASURED}) == "holds (partly measured)"
    with pytest.raises(InputError):
        claims.in_range(1, 5, 2)


def test_stored_numbers_of_one_sentence_come_from_one_run(monkeypatch):
    """A sentence comparing two stored numbers takes both from the first run that holds both, never one from each
    (one run's numbers are compared with each other); a number measured here still wins."""
    from helpers.records import Record

    runs = {"h100": [Record("a.x", 1.0, "ratio", device="NVIDIA H100", date="2026-12-06")],
            "h200": [Record("a.x", 2.0, "ratio", device="NVIDIA H200", date="2026-12-02"),
                     Record("a.y", 4.0, "ratio", device="NVIDIA H200", date="2026-12-02")],
            "cpu": []}
    monkeypatch.setattr(reference, "load", lambda source="h200": tuple(runs.get(source, ())))
    sources = ("here", "h100", "h200", "cpu")
    text = findings.sentence("{x:.0f} of {y:.0f}", {"x": "a.x", "y": "a.y"}, sources=sources)
    assert text.startswith("2 of 4") and "H100" not in text, text
    assert findings.sentence("{x:.0f}", {"x": "a.x"}, sources=sources).startswith("1 "), "nearest run first"
    bench.record("a.y", 8.0, "ratio")
    text = findings.sentence("{x:.0f} of {y:.0f}", {"x": "a.x", "y": "a.y"}, sources=sources)
    assert text.startswith("1 of 8") and "measured here" in text, text
