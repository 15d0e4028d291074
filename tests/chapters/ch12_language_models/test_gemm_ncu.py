"""Chapter 12's Nsight Compute view of the tensor-core GEMM: ncu's CSV read into rows, and the verdict it supports.

The fixture is real ncu output (gemm_ncu.profile on an H100, 2026-12-07, the first of that day's two stored runs of
notebook 12; reference/h100 now holds the second), trimmed to the counters the module reads."""

from pathlib import Path

import pytest

from helpers.chapters.ch12_language_models import gemm_ncu
from helpers.errors import InputError

CSV = (Path(__file__).parent / "data" / "ncu_gemm_h100.csv").read_text(encoding="utf-8")


def test_the_csv_becomes_one_row_per_profiled_kernel_in_launch_order():
    rows = gemm_ncu.parse(CSV, {"gemm_w4a16_m4": "config c, split 3"})
    assert [(r["kernel"], r["M"]) for r in rows] == [(k, m) for _, k, m in gemm_ncu.ranges()]
    w4 = rows[2]
    assert (w4["kernel"], w4["M"], w4["launch"]) == ("W4A16 GEMM", 4, "config c, split 3")
    assert w4["registers"] == 156 and w4["DRAM % of peak"] == pytest.approx(39.95)
    assert w4["ncu µs"] == pytest.approx(17.664)  # ncu reports ns
    assert w4["grid warps / SM"] == pytest.approx(258 * 128 / 32 / 132)  # grid x block threads, in warps, per SM
    assert w4["instructions / tile"] == pytest.approx(128.62, abs=0.01)  # warp instructions ÷ (N K / 1024)
    assert w4["cycles / instruction"] == pytest.approx(4.6) and w4["of which load wait"] == pytest.approx(0.53)
    gemv = rows[-1]
    assert gemv["kernel"] == gemm_ncu.GEMV and gemv["achieved occupancy %"] == pytest.approx(42.0)
    assert gemm_ncu.parse(CSV, sms=66)[2]["grid warps / SM"] == pytest.approx(2 * w4["grid warps / SM"])


def test_each_range_launches_the_kernel_its_row_names():
    assert [gemm_ncu.runs(k) for _, k, _ in gemm_ncu.ranges()] == \
        [("gemm", s) for _ in gemm_ncu.BATCHES for s in gemm_ncu.SCHEMES] + [("gemv", "w4a16")]


def test_a_split_k_finishing_pass_is_not_taken_for_the_next_kernel():
    header, *lines = CSV.splitlines()[1:]
    # every kernel's ID doubled, and after each a separate finishing pass (what a split-K launch without the fused
    # finish adds) with an odd ID
    moved = [f'"{2 * int(line.split(",")[0].strip(chr(34)))}",' + line.split(",", 1)[1] for line in lines]
    finishes = [f'"{2 * i + 1}","wo_gemm_finish","x","Duration","ns","1,000"' for i in range(9)]
    rows = gemm_ncu.parse("\n".join([header, *moved, *finishes]))
    assert [r["registers"] for r in rows] == [r["registers"] for r in gemm_ncu.parse(CSV)]


def test_the_verdict_says_whether_the_warps_wait_for_memory_or_issue():
    rows = gemm_ncu.parse(CSV)
    text = gemm_ncu.sentence(rows)
    assert "M = 4" in text and "40 %" in text and "53 %" in text and "0.5 are a wait" in text
    assert "not starved of bytes" in text and "too few warps" in text

    def gemm_m4(**change):
        return [dict(r, **change) if (r["kernel"], r["M"]) == ("W4A16 GEMM", 4) else r for r in rows]

    waiting = gemm_ncu.sentence(gemm_m4(**{"of which load wait": 3.0}))  # 3.0 of 4.6 cycles: memory
    assert "waits for loads" in waiting and "not starved" not in waiting
    assert "do not single out one limit" in gemm_ncu.sentence(gemm_m4(**{"issue slots busy %": 85.0}))
    assert "no counts" in gemm_ncu.sentence(rows[:2])
    assert "no counts" in gemm_ncu.sentence(gemm_m4(**{"instructions / tile": None}))


def test_profiling_without_ncu_says_what_to_install(monkeypatch):
    monkeypatch.setattr(gemm_ncu.shutil, "which", lambda name: None)
    with pytest.raises(InputError, match="ncu"):
        gemm_ncu.profile()
