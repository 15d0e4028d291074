"""helpers.figure_check's physics checks, each shown failing on a planted case: a point above its roof,
a roof of another precision than its points, and a sweep whose per-item time jumps between neighbours."""

from __future__ import annotations

from helpers import figure_check, plots
from helpers.perf import roofline

# chapter 1's stored CPU sweep of the tiny MLP (H200 host, 2026-11-30): ms per batch
CH01_CPU = {1: 0.0331, 4: 0.0315, 16: 0.0332, 64: 0.0376, 256: 5.9974, 1024: 0.0915, 4096: 0.1373,
            16384: 0.2668, 65536: 9.9875}


def test_int8_point_under_an_fp32_roof_fails_twice():
    # planted: lab 11's old plot, torch._int_mm at 732 TOPS under the FP32 roof of 49.4 TFLOP/s
    pts = [("torch._int_mm", "int8", 1365.0, 732.0), ("tiled fp32 kernel", "fp32", 512.0, 20.0)]
    problems = figure_check.roof_problems(pts, {"fp32": (49.4, 4250.0)})
    assert any("has no int8 roof" in p for p in problems)
    assert figure_check.roof_problems(pts, {"fp32": (49.4, 4250.0), "int8": (954.0, 4250.0)}) == []
    above = figure_check.roof_problems([("int8", "int8", 1365.0, 732.0)], {"int8": (49.4, 4250.0)})
    assert above and "above its int8 roof" in above[0]


def test_memory_side_of_the_roof_is_checked_too():
    # 3 FLOP/byte at 4.25 TB/s allows 12.75 TFLOP/s: a point at 40 is impossible
    assert figure_check.roof_problems([("gemv", "fp16", 3.0, 40.0)], {"fp16": (989.0, 4250.0)})
    assert not figure_check.roof_problems([("gemv", "fp16", 3.0, 12.0)], {"fp16": (989.0, 4250.0)})


def test_drawn_roofline_with_a_point_above_its_roof_is_a_figure_problem():
    pts = [roofline.RoofPoint("int_mm", "gemm", 732e12, 732e12 / 1365, 1.0),
           roofline.RoofPoint("copy", "elementwise", 1e9, 8e9, 8e9 / 4000e9)]
    fig = roofline.plot(pts, 49.4, 4250.0, title="planted roofline", device="test")
    try:
        assert any("above its roof" in p for p in figure_check.figure_problems(fig))
    finally:
        plots.plt.close(fig)
    ok = roofline.plot(pts, 954.0, 4250.0, title="planted roofline ok", device="test")
    try:
        assert not any("above its roof" in p for p in figure_check.figure_problems(ok))
    finally:
        plots.plt.close(ok)


def test_sweep_check_flags_chapter_1s_stored_cpu_curve():
    items = list(CH01_CPU)
    per_item = [CH01_CPU[b] / b for b in items]
    flagged = {items[i] for i in figure_check.sweep_jumps(items, per_item)}
    assert {256, 65536} <= flagged and 4 not in flagged and 4096 not in flagged


def test_a_flat_gpu_latency_is_not_a_jump():
    items = [1, 4, 16, 64, 256]
    assert figure_check.sweep_jumps(items, [0.06 / b for b in items]) == []   # launch-bound: same ms per batch


def test_recheck_remeasures_flagged_points_and_only_them():
    items = list(CH01_CPU)
    per_item = [CH01_CPU[b] / b for b in items]
    asked: list[float] = []

    def measure(b: float) -> float:  # the spike at 256 was noise; 65536 is really slower per item
        asked.append(b)
        return {256: 0.06 / 256, 65536: 9.9 / 65536}.get(b, CH01_CPU[int(b)] / b)

    check = figure_check.recheck(items, per_item, measure, rounds=3)
    assert set(asked) == set(check.flagged) and len(asked) == 3 * len(check.flagged)
    assert 256 in check.flagged and 256 not in check.persistent and 65536 in check.persistent
    assert check.trusted(65536) and "still do" in check.note()
    stored = figure_check.recheck(items, per_item, None)
    assert not stored.trusted(65536) and "not re-measured" in stored.note()
