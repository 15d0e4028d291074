"""Chapter 3: the notes' memory claims and the interpretation sentences follow the model and the numbers."""

from __future__ import annotations

import pytest

from helpers import bench, claims
from helpers.chapters.ch03_memory_hierarchy import notes, readings  # noqa: F401  - notes registers the claims


@pytest.fixture(autouse=True)
def _clean_session(monkeypatch):
    monkeypatch.setitem(bench._session, "records", [])


def test_model_fraction_is_one_eighth_from_stride_8():
    assert readings.model_fraction(1) == 1.0 and readings.model_fraction(2) == 0.5
    assert readings.model_fraction(8) == readings.model_fraction(32) == 0.125


def test_stride_gap_says_whether_the_model_explains_the_curve():
    bench.record("ch03.stride_gbs.s1", 2600.0, "GB/s")
    bench.record("ch03.stride_gbs.s32", 170.0, "GB/s")
    text = readings.stride_gap(32)
    assert "keeps 0.065 of its stride-1 bandwidth (about 1/15)" in text and "keeps falling past the model" in text
    bench.record("ch03.stride_gbs.s32", 325.0, "GB/s")
    assert "the model explains it" in readings.stride_gap(32)


def test_dram_traffic_compares_bytes_moved_with_useful_bytes():
    for name, v in (("ch11.ncu.copy_stride32.dram_gbs", 2720.0), ("ch03.stride_gbs.s32", 170.0),
                    ("ch11.ncu.copy_simple.dram_gbs", 2600.0), ("ch03.stride_gbs.s1", 2600.0)):
        bench.record(name, v, "GB/s")
    text = readings.dram_traffic(32)
    assert "16 bytes of DRAM traffic per useful byte where the sector model counts 8" in text
    assert "(at stride 1 the same comparison gives 1.0)" in text


def test_misalignment_verdict_follows_the_ratio():
    bench.record("ch03.offset_gbs_cupy.o0", 100.0, "GB/s")
    bench.record("ch03.offset_gbs_cupy.o1", 96.0, "GB/s")
    text = readings.misalignment(1)
    assert "5 sectors instead of 4 (25% more" in text and "L2 cache" in text
    bench.record("ch03.offset_gbs_cupy.o1", 80.0, "GB/s")
    assert "cost DRAM bandwidth" in readings.misalignment(1)


def test_notes_claims():
    byte = claims.judge(claims.get("ch03.byte_stride_kernel"))
    assert byte["verdict"] == claims.FAILS and "25% of what it moves" in byte["evidence"]
    ldg = claims.get("ch03.ldg_read_only_cache")
    assert claims.judge(ldg, {"ch03.readonly_gbs.plain": 100.0, "ch03.readonly_gbs.ldg": 94.0,
                              "ch03.readonly_gbs.restrict": 100.0})["verdict"] == claims.FAILS
    assert claims.judge(ldg, {"ch03.readonly_gbs.plain": 100.0, "ch03.readonly_gbs.ldg": 120.0,
                              "ch03.readonly_gbs.restrict": None})["verdict"] == claims.HOLDS


def test_ldg_gain_inside_the_timings_noise_is_not_resolved():
    # the fresh H100 run of 2026-12-07: ldg 1.03x plain, but the two timings' spreads span 0.91..1.09
    from helpers.findings import NOT_RESOLVED, Values
    from helpers.spread import Spread

    ldg = claims.get("ch03.ldg_read_only_cache")
    names = ("ch03.readonly_gbs.plain", "ch03.readonly_gbs.ldg", "ch03.readonly_gbs.restrict")
    noisy = Values(dict(zip(names, (1662.7, 1712.8, 1759.0))),
                   {names[0]: Spread(1593.3, 1784.6, "p10..p90"), names[1]: Spread(1620.5, 1743.1, "p10..p90")})
    got = claims.judge(ldg, noisy)
    assert got["verdict"] == NOT_RESOLVED and "(0.91..1.09 from the two timings' spreads)" in got["evidence"]
    tight = Values(dict(zip(names, (1769.0, 1694.4, 1777.6))),  # the stored H100 run: slower, resolved
                   {names[0]: Spread(1743.6, 1853.5, "p10..p90"), names[1]: Spread(1678.3, 1697.5, "p10..p90")})
    assert claims.judge(ldg, tight)["verdict"] == claims.FAILS
    shared = claims.judge(claims.get("ch03.shared_memory_size"))
    assert shared["verdict"].startswith("outdated") and "228 KiB per SM" in shared["evidence"]
