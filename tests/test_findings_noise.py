"""Noise in every comparison: helpers.spread intervals, stored with the record, and helpers.findings
refusing to print a difference inside the spread as a finding (planted cases)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import bench, findings, spread
from helpers.errors import InputError


@pytest.fixture(autouse=True)
def _clean_session(monkeypatch):
    """An empty session record for each test."""
    monkeypatch.setitem(bench._session, "records", [])


def test_spread_is_stored_with_the_record_and_read_back():
    s = spread.of_samples([1.00, 1.02, 1.05, 0.97, 1.01], what="rounds")
    rec = bench.record("x.noisy_ratio", 1.01, "ratio", **s.extra())
    assert rec.to_json()["extra"]["lo"] == s.lo and "rounds" in rec.to_json()["extra"]["spread"]
    assert spread.of_record(bench.Record.from_json(rec.to_json())) == s
    m = findings.get("x.noisy_ratio")
    assert m is not None and m.spread == s


def test_a_timing_spread_uses_benchs_percentiles_and_a_decreasing_map_swaps_the_ends():
    t = bench.Timing((0.010, 0.011, 0.012, 0.013, 0.020, 0.011, 0.012), "cpu")
    s = spread.of_timing(t)
    assert (s.lo, s.hi) == (t.percentile_s(10), t.percentile_s(90)) and "7 timed samples" in s.method
    gb = spread.of_timing(t, lambda sec: bench.bandwidth_gbs(8e9, sec))
    assert gb.lo == pytest.approx(8 / t.percentile_s(90)) and gb.hi == pytest.approx(8 / t.percentile_s(10))
    assert gb.contains(bench.bandwidth_gbs(8e9, t.median_s))


def test_a_difference_inside_the_spread_is_not_a_finding():
    # planted: a 4 % "speed-up" whose rounds straddle 1.0; the old tolerance verdict called it "faster"
    bench.record("x.inside", 1.04, "ratio", **spread.Spread(0.95, 1.12, "p10..p90 of 7 rounds").extra())
    bench.record("x.outside", 1.04, "ratio", **spread.Spread(1.02, 1.06, "p10..p90 of 7 rounds").extra())
    assert findings.ratio_sentence("x.inside", "A", "B").startswith(f"A runs at 1.04× B: {findings.NOT_RESOLVED}.")
    assert "faster" in findings.ratio_sentence("x.outside", "A", "B")
    assert findings.compare(1.04, above="up", below="down") == "up"  # without a spread: the tolerance rule
    assert findings.compare(1.04, spread=spread.Spread(0.9, 1.1, "m"), above="up", below="down") == \
        findings.NOT_RESOLVED


def test_threshold_straddled_by_the_spread_is_not_resolved():
    bench.record("x.gain", 0.02, "ratio", **spread.Spread(-0.05, 0.08, "min..max of 3 runs").extra())
    verdict = findings.threshold("g", 0.0, above="it helped", below="it lost")
    assert findings.sentence("{verdict}", {"g": "x.gain"}, verdict).startswith(findings.NOT_RESOLVED)
    assert findings.NOT_RESOLVED_ZH  # the Chinese wording exists for the bilingual callouts


def test_bootstrap_resolves_large_differences_and_not_small_ones():
    rng = np.random.default_rng(0)
    a = rng.normal(2.30, 0.5, 192)                  # per-window log-losses of one scheme
    b = a + rng.normal(0.003, 0.05, 192)            # a second scheme, nearly the same
    c = a + 0.2                                     # a clearly worse one
    small, large = spread.bootstrap_paired(b, a, what="windows"), spread.bootstrap_paired(c, a)
    assert small.contains(0.0) and not large.contains(0.0)
    s = spread.bootstrap(a, what="windows")
    assert s.lo < a.mean() < s.hi and "192 windows" in s.method


def test_bad_spreads_say_what_is_wrong():
    with pytest.raises(InputError, match="lo <= hi"):
        spread.Spread(2.0, 1.0, "x")
    with pytest.raises(InputError, match="at least 2"):
        spread.of_samples([1.0])
    with pytest.raises(InputError, match="same items"):
        spread.bootstrap_paired([1.0, 2.0], [1.0])


def test_chapter_10_video_overlap_says_it_lost_and_why():
    """Old behaviour: '-42%' printed with no verdict under prose saying the overlap 'does help'."""
    from helpers.chapters.ch10_beyond_int8 import readings

    bench.record(readings.VIDEO, -0.42, "ratio", bound=0.27)
    assert "the overlap lost (the bound for these two stage times: +27%)" in readings.video_sentence()
    bench.record(readings.VIDEO_SLOWDOWN, 1.9, "ratio")
    assert "1.9× its time alone" in readings.video_sentence()
    bench.record(readings.VIDEO, 0.02, "ratio", bound=0.27, **spread.Spread(-0.04, 0.06, "rounds").extra())
    assert findings.NOT_RESOLVED in readings.video_sentence()
    bench.record(readings.VIDEO, 0.2, "ratio", bound=0.27, **spread.Spread(0.15, 0.23, "rounds").extra())
    assert "the overlap helped" in readings.video_sentence()


def test_chapter_10_pipeline_stores_its_spread_and_times_the_cpu_stage():
    from helpers.chapters.ch10_beyond_int8 import pipeline

    row = pipeline.split_pipeline_gain("cpu", size=32, batch=2, repeats=2)
    extra = row["gain spread"].extra()
    assert extra["lo"] <= row["gain"] <= extra["hi"] and row["CPU stage slowdown"] > 0
    assert pipeline.split_pipeline_gain("cpu", size=32, batch=2, repeats=1)["gain spread"] is None


def test_a_target_inside_the_spread_is_not_met_nor_missed():
    # planted: numba's copy at 0.9235 of D2D against its 0.92 target, with rounds from 0.91 to 0.935
    bench.record("copy.numba_over_d2d", 0.9235, "ratio", **spread.Spread(0.91, 0.935, "p10..p90").extra())
    text = findings.against_target("copy.numba_over_d2d", "numba copy ÷ D2D")
    assert findings.NOT_RESOLVED in text and ": met" not in text
    bench.record("copy.numba_over_d2d", 0.95, "ratio", **spread.Spread(0.94, 0.96, "p10..p90").extra())
    assert "target >= 0.92: met" in findings.against_target("copy.numba_over_d2d", "numba copy ÷ D2D")


def test_qat_gain_inside_the_seed_spread_is_not_a_finding():
    from helpers.chapters.ch08_qat import readings

    row = {"bits": "W4A8", "FP32 %": 98.8, "PTQ %": 98.3, "QAT % (median)": 98.6, "QAT % per seed": "98.1 / 98.6 / 98.9"}
    text = readings.qat_summary([row])
    assert findings.NOT_RESOLVED in text and "won back" not in text


def test_paired_ratio_is_the_median_of_each_rounds_ratio_with_their_spread():
    """Shared by chapter 9's ORT comparison and chapter 10's rounds: per-round ratios, not a ratio of medians."""
    import pytest

    from helpers import spread
    from helpers.errors import InputError

    r, s = spread.paired_ratio([2.0, 4.0, 3.0], [1.0, 1.0, 2.0])  # rounds' ratios 2, 4, 1.5
    assert r == 2.0 and (s.lo, s.hi) == (1.5, 4.0) and "interleaved rounds" in s.method
    assert spread.paired_ratio([2.0], [1.0]) == (2.0, None)
    with pytest.raises(InputError, match="one sample per round"):
        spread.paired_ratio([1.0, 2.0], [1.0])
