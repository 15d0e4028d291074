"""Lab 12's GPU timings carry their noise: every lab12.* record stores the spread of its interleaved rounds, and
a speed-up whose spread holds 1 is printed "not resolved", never as a speed-up (planted timings, no GPU)."""

from __future__ import annotations

import pytest

from helpers import bench, findings, reference
from helpers.kernels import histogram
from helpers.labs.lab12_histogram_kernels import kit

N = 1 << 24
CLEAR = {"global": (8e-3, 8.1e-3, 7.9e-3, 8.2e-3, 8e-3), "shared": (2e-4, 2.1e-4, 1.9e-4, 2e-4, 2.2e-4),
         "torch_histc": (1.4e-3, 1.5e-3, 1.4e-3, 1.6e-3, 1.5e-3)}
# shared vs global: round ratios 1.05, 0.95, 1.02, 0.97, 1.04 -> median 1.02, and the spread holds 1
STRADDLE = {"global": (1.05e-3, 0.95e-3, 1.02e-3, 0.97e-3, 1.04e-3), "shared": (1e-3,) * 5,
            "torch_histc": (1.5e-3,) * 5}


@pytest.fixture(autouse=True)
def _session(monkeypatch):
    """An empty session record, nothing written to a results file."""
    monkeypatch.setitem(bench._session, "records", [])
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)


def _measure(monkeypatch, seconds):
    """Run kit.measure_and_show with histogram.measure replaced by planted interleaved rounds."""
    monkeypatch.setattr(histogram, "measure", lambda kernels, **kw: histogram.Timed(N, seconds))
    return kit.measure_and_show(histogram.hist_global, histogram.hist_shared)


def test_every_lab12_record_stores_the_spread_of_its_rounds(monkeypatch, capsys):
    out = _measure(monkeypatch, CLEAR)
    recs = {r.name: r for r in bench.session_records()}
    assert set(recs) == {"lab12.global_gvals", "lab12.shared_gvals", "lab12.torch_histc_gvals",
                         "lab12.shared_over_global", "lab12.shared_over_histc"}
    for r in recs.values():  # the old records held the bare value only
        assert r.extra["lo"] <= r.value <= r.extra["hi"] and r.extra["spread"] == "p10..p90 of 5 interleaved rounds"
    assert out["lab12.shared_over_global"] == pytest.approx(40.0)
    assert recs["lab12.shared_over_global"].ratio_of == ["shared", "global"]
    text = capsys.readouterr().out
    assert "runs at 40.00× the speed of the global-atomics kernel: faster (interleaved rounds:" in text


def test_a_speedup_inside_the_noise_is_printed_not_resolved(monkeypatch, capsys):
    _measure(monkeypatch, STRADDLE)
    text = capsys.readouterr().out
    line = next(s for s in text.splitlines() if "global-atomics" in s)
    assert f"runs at 1.02× the speed of the global-atomics kernel: {findings.NOT_RESOLVED}" in line
    assert "faster" not in line and "(measured here)" in line


def test_stored_speedups_without_a_spread_say_the_noise_is_unknown(monkeypatch, capsys):
    bare = bench.Record("lab12.shared_over_global", 46.5, "ratio", "NVIDIA H200", "2026-12-02")
    monkeypatch.setattr(reference, "lookup", lambda name, source="h200": bare if source == "h200" and
                        name == bare.name else None)
    lines = kit.speedup_sentences()
    assert "faster by the bare number; no spread is stored" in lines[0] and "stored reference: NVIDIA H200" in lines[0]
    assert lines[1].startswith("Not measured here")
