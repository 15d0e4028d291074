"""helpers.figure_check's physics checks, each shown failing on a planted case: a point above its roof,
a roof of another precision than its points, and a sweep whose per-item time jumps between neighbours."""

from __future__ import annotations

from helpers import figure_check, plots
from helpers.perf import roofline

# chapter 1's old stored CPU sweep of the tiny MLP (H200 host, 2026-11-30, re-measured since): ms per batch
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
    assert 1024 in flagged   # after the spike the total time falls 65-fold: flagged by the fall, not the rise


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
    assert "still do" in check.note()
    stored = figure_check.recheck(items, per_item, None)
    assert not stored.remeasured and stored.persistent == stored.flagged and "not re-measured" in stored.note()


def test_chapter_1_prints_a_sentence_from_the_stored_sweep():
    """The stored run's sentence comes from the stored sweep (re-measured on the H200 on 2026-12-01); the old
    anomalous curve itself is the planted case of the next test (CH01_CPU)."""
    from helpers import reference
    from helpers.chapters.ch01_why_gpu_inference import readings

    assert reference.lookup("ch01.tiny_mlp.cpu_ms.b256") is not None, "the stored H200 run holds the sweep"
    text = readings.stored_crossover("tiny_mlp")
    assert "stored" in text and ("nothing is concluded" in text or "overtook" in text)


def test_crossover_resting_on_an_unchecked_jump_is_not_concluded():
    from helpers.chapters.ch01_why_gpu_inference import inference_speed as speed

    gpu = {b: 0.1 + b * 2e-5 for b in CH01_CPU}
    planted = ([speed.Latency("tiny_mlp", "cpu", b, ms) for b, ms in CH01_CPU.items()]
               + [speed.Latency("tiny_mlp", "gpu_e2e", b, ms) for b, ms in gpu.items()])
    assert speed.crossover_batch(list(CH01_CPU), list(CH01_CPU.values()), list(gpu.values())) == 65536
    assert speed.crossover_doubt(planted, "tiny_mlp", 65536) == [16384, 65536]
    assert speed.crossover(planted) is None
    checked = [speed.Latency(r.model, r.mode, r.batch, r.ms, r.dtype, True) for r in planted]
    assert speed.crossover(checked) == 65536   # re-measured and still there: a finding


def test_chapter_1_sweep_remeasures_a_spike(monkeypatch):
    from helpers.chapters.ch01_why_gpu_inference import inference_speed as speed

    calls: dict[int, int] = {}

    def fake_measure(model, make_input, batch, mode, *, name="m", dtype="fp32", warmup=2, repeats=10):
        calls[batch] = calls.get(batch, 0) + 1
        ms = 5.0 if batch == 256 and calls[batch] == 1 else 0.03 + batch * 5e-6   # a spike, once
        return speed.Latency(name, mode, batch, ms, dtype)

    monkeypatch.setattr(speed, "measure", fake_measure)
    monkeypatch.setattr(speed, "build", lambda name: (None, None))
    out = speed.sweep("tiny_mlp", [16, 64, 256, 1024], ["cpu"])
    assert calls[256] == 4 and calls[16] == 1          # the spike and its neighbours re-measured, not the rest
    assert calls[64] == 4 and calls[1024] == 4         # the rise into the spike, and the fall out of it
    assert all(r.checked for r in out) and max(r.ms for r in out) < 0.1
    assert "went away" in speed.SWEEP_NOTES[("tiny_mlp", "cpu", "fp32")]


def test_lab_11_draws_one_roof_per_precision(capsys):
    """Old behaviour: torch._int_mm (732 TOPS) drawn under the FP32 roof of 49.4 TFLOP/s."""
    from helpers.labs.lab11_gemm_kernels import bench as lab11

    n = 4096
    ops = 2.0 * n**3

    def step(key: str, prec: str, tops: float) -> lab11.Step:
        width = 4 if prec == "fp32" else 1
        return lab11.Step(key, key, prec, ops, n * n * (3.0 * width), ops / (tops * 1e12))

    steps = [step("naive", "fp32", 2.0), step("torch_fp32", "fp32", 49.4),
             step("int8_t16", "int8", 60.0), step("int_mm", "int8", 732.0)]
    figs = lab11.show_roofline(steps, 4250.0, "test", "planted", kind=lambda k: k)
    try:
        assert len(figs) == 2
        assert all(not any("above its roof" in p for p in figure_check.figure_problems(f)) for f in figs)
    finally:
        for f in figs:
            plots.plt.close(f)
    capsys.readouterr()
    bad = lab11.show_roofline([*steps, step("int8_t32", "int8", 900.0)], 4250.0, "test", "planted", kind=lambda k: k)
    try:
        assert "above its int8 roof" in capsys.readouterr().out
        assert any("above its roof" in p for p in figure_check.figure_problems(bad[1]))
    finally:
        for f in bad:
            plots.plt.close(f)


def test_chapter_12_sweep_has_one_roof_per_math_precision():
    """Old behaviour: one roof, set by the FP8 point, for the FP16 and weight-only schemes too."""
    from helpers.chapters.ch12_language_models import batch_sweep, figures

    n, k = batch_sweep.N, batch_sweep.K
    rows = [{"scheme": s, "M": m, "µs": us, "TFLOP/s": 2.0 * m * n * k / us / 1e6, "bytes": b}
            for s, m, us, b in (("fp16", 1, 30, 2 * n * k), ("w4a16", 1, 12, n * k / 2), ("w8a8 fp8", 512, 40, n * k),
                                ("fp16", 512, 90, 2 * n * k), ("w8a8 int8", 512, 60, n * k))]
    fig = figures.sweep_roofline(rows, 4250.0)
    try:
        roofs = [ln.get_label() for ln in fig.axes[0].lines if ln.get_label().startswith("roof")]
        assert [r.split(":")[0] for r in roofs] == ["roof FP16", "roof FP8", "roof INT8"]
        assert not any("above its roof" in p for p in figure_check.figure_problems(fig))
    finally:
        plots.plt.close(fig)
    assert batch_sweep.math_precision("w4a16 tinygemm") == "fp16" and batch_sweep.math_precision("w8a8 int8 cublas") == "int8"
