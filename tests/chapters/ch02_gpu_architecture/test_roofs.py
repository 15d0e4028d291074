"""Chapter 2's roofs are measured apart from the points drawn under them (issue 37: "a roof fitted to its points").

Old behaviour (``roofline.fitted_roof``, removed): the compute roof was the fastest GEMM point and the memory roof the
fastest elementwise point's stream, so "no point above its roof" could not fail, and the auditor's 'roof' rule
flagged the stored roofline. Now the compute roof is chapter 2's GEMM of the points' precision and the memory roof
the faster of the copy and the read-only reductions.
"""

from __future__ import annotations

import pytest

from helpers import reference
from helpers.chapters.ch02_gpu_architecture import experiments as ex
from helpers.chapters.ch02_gpu_architecture import roofs
from helpers.errors import InputError
from helpers.figure_check import ROOF_SLACK
from helpers.perf import roofline
from helpers.tools import audit


def _as_audited(points, peak, bw):
    return audit.fitted_roofs("chapter 2 roofline", [(p.name, "all", p.intensity, p.tflops) for p in points],
                              {"all": (peak, bw)})


@pytest.mark.parametrize("card", ["h100", "h200"])
def test_the_stored_roofline_has_an_independent_roof_the_old_fitted_one_did_not(card):
    result = ex.GPU_ROOFLINE.run(stored=True, card=card)
    got = ex.roof(result, "gpu")
    if got is None:
        pytest.skip(f"no stored {card} roofline")
    points, roof, copy = got
    heavy = max(p.tflops for p in points if p.kind in ("gemm", "conv"))
    streams = max(p.bytes / p.seconds / 1e9 for p in points if p.kind == "elementwise")
    assert [p.rule for p in _as_audited(points, heavy, max(copy, streams))] == ["roof", "roof"]  # the old roof
    assert _as_audited(points, roof.peak_tflops, roof.bandwidth_gbs) == []
    gemm = max(r.value for r in reference.lookup_all("ch02.gemm_tflops.bf16.", card))
    assert roof.peak_tflops == gemm and roof.peak_from.startswith("chapter 2's BF16 GEMM")
    assert roof.bandwidth_gbs >= copy


def test_a_point_above_the_roof_is_named_as_noise_or_as_a_disturbed_measurement():
    roof = roofline.Roof(100.0, 1000.0, "chapter 2's BF16 GEMM at 8192³", "the copy")
    near = roofline.RoofPoint("GEMM a", "gemm", 1.02e14, 1e9, 1.0)      # 102 TFLOP/s: 2 % above
    far = roofline.RoofPoint("add", "elementwise", 1e9, 1.2e10, 1e-2)    # 1,200 GB/s: 20 % above
    under = roofline.RoofPoint("GEMM b", "gemm", 5e13, 1e9, 1.0)
    assert [(p.name, round(o, 3)) for p, o in roof.above([near, far, under])] == [("GEMM a", 0.02), ("add", 0.2)]
    en, zh = roofs.describe(roof, [near, far, under], ROOF_SLACK)
    assert "GEMM a by 2.0%; not resolved" in en and "add by 20.0%: a disturbed measurement" in en
    assert "GEMM b" not in en and "无法分辨" in zh and "测量受到干扰" in zh
    assert roofs.describe(roof, [under], ROOF_SLACK)[0].endswith("drawn under them.")


def test_the_memory_roof_is_the_faster_of_the_copy_and_the_read_only_streams():
    assert roofline.memory_roof(3000.0, {"sum": 3100.0, "amax": 3200.0}) == (3200.0, "the fastest read-only stream, amax")
    assert roofline.memory_roof(3000.0, {"sum": 2900.0}) == (3000.0, "the copy")
    assert roofline.memory_roof(3000.0) == (3000.0, "the copy")
    with pytest.raises(InputError, match="copy_gbs must be a positive number"):
        roofline.memory_roof(0.0, {})


def test_the_cpu_read_only_stream_reads_every_element_and_is_plausible():
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor

    src = np.arange(1001, dtype=np.float32)
    with ThreadPoolExecutor(3) as pool:
        assert roofline._cpu_amax(src, pool, 3) == 1000.0
    got = roofline.measure_read_gbs("cpu", nbytes=1 << 24, repeats=3)
    assert list(got) == ["amax"] and 0.1 < got["amax"] < 2000


def test_a_roofline_measured_here_takes_its_peak_from_this_sessions_gemm(monkeypatch, tmp_path):
    """On this CPU: the CPU_GEMM rows recorded earlier in the session are the compute roof, not a point."""
    from helpers import bench

    monkeypatch.setenv(bench.RESULTS_VAR, str(tmp_path / "r.jsonl"))
    ex.CPU_GEMM.run(sizes=(64, 128), repeats=2)
    monkeypatch.setattr(roofline, "measure_points", lambda device, repeats: [
        roofline.RoofPoint("GEMM 128³", "gemm", *roofline.gemm_cost(128, 128, 128, 4), 1.0)])
    result = ex.ROOFLINE.run(repeats=2)
    peak = result["peak"][0]
    gemm_rows = [r for r in ex.tables.CPU_GEMM.stored_rows(bench.session_records()) if r["precision"] == "fp32"]
    assert peak["peak TFLOP/s"] == max(r["TFLOP/s"] for r in gemm_rows) and peak["from"].startswith("chapter 2's FP32")
    assert [r["kernel"] for r in result["read"]] == ["amax"]
    points, roof, _ = ex.roof(result, "cpu")
    assert roof.peak_tflops == peak["peak TFLOP/s"] and "measured in this session" in ex.roof_line(result, "cpu")


def test_a_point_far_above_the_roof_is_measured_again_with_the_roofs_gemm(monkeypatch, tmp_path):
    """A disturbed point (40 % above the roof) is measured again, the roof's GEMM too; the second reading stands."""
    from helpers import bench

    monkeypatch.setenv(bench.RESULTS_VAR, str(tmp_path / "r.jsonl"))
    gemm = roofline.gemm_cost(512, 512, 512, 4)
    readings = iter([1.0 / 1.4, 1.0])  # seconds for 1 TFLOP/s-scale work: first 1.4 TFLOP/s, then 1.0
    monkeypatch.setattr(roofline, "measure_points", lambda device, repeats: [
        roofline.RoofPoint("GEMM 512³", "gemm", gemm[0], gemm[1], gemm[0] / 1e12 * next(readings))])
    monkeypatch.setattr(roofline, "measure_bandwidth_gbs", lambda *a, **k: 20.0)
    monkeypatch.setattr(roofline, "measure_read_gbs", lambda *a, **k: {"amax": 25.0})
    peaks = iter([(1.0, "chapter 2's FP32 GEMM at 512³"), (1.05, "chapter 2's FP32 GEMM at 1024³")])
    monkeypatch.setattr(ex, "_peak", lambda where, repeats: next(peaks))
    monkeypatch.setattr(ex, "_gemm_peak", lambda where, repeats: next(peaks))
    result = ex.ROOFLINE.run(repeats=2)
    assert result["peak"][0]["peak TFLOP/s"] == 1.05 and result["points"][0]["TFLOP/s"] == pytest.approx(1.0)
    assert "disturbed" not in ex.roof_line(result, "cpu")


def test_lab_ones_roof_is_timed_apart_from_the_points_by_the_sizes_chapter_2_times():
    """roofline.measure_roof (lab 1) and the roofline's own re-measure (ex._gemm_peak) use one GEMM measurement, at
    the two largest sizes chapter 2's GEMM sweep times."""
    assert ex.CPU_SIZES[-2:] == roofline.PEAK_SIZES["cpu"] and ex.GPU_SIZES[-2:] == roofline.PEAK_SIZES["cuda"]
    roof = roofline.measure_roof("cpu", repeats=1)
    assert roof.peak_from in ("a 512³ FP32 GEMM timed apart", "a 1024³ FP32 GEMM timed apart")
    assert roof.peak_tflops > 0 and roof.bandwidth_from in ("the copy", "the fastest read-only stream, amax")
    peak, label = ex._gemm_peak("cpu", repeats=1)
    assert peak > 0 and label.startswith("chapter 2's FP32 GEMM at ")


def test_the_gpu_memory_roof_is_chapter_2s_faster_stream_of_the_same_run(monkeypatch):
    from helpers import reference
    from helpers.records import Record

    stored = [Record("ch02.gpu_bandwidth_gbs", 2990.0, "GB/s", "NVIDIA H100", "2026-12-06"),
              Record("ch02.gpu_read_gbs.sum", 3100.0, "GB/s", "NVIDIA H100", "2026-12-06")]
    monkeypatch.setattr(reference, "load", lambda source="h200": stored if source == "h100" else [])
    gbs, where = roofs.gpu_memory_roof("h100")
    assert gbs == 3100.0 and where == "the fastest read-only stream, sum of chapter 2, NVIDIA H100, 2026-12-06"
    assert roofs.gpu_memory_roof("h200") is None  # no copy stored there: no roof, never one from the points
