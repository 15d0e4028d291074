"""Chapter 2's tables and Experiments on the CPU: the stored runs read back under the names they were stored with,
the GEMM headlines come from the rows as they did from the records, and the roofline draws from a stored result."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from helpers import bench, reference
from helpers.chapters.ch02_gpu_architecture import experiments as ex
from helpers.chapters.ch02_gpu_architecture import tables
from helpers.figure_check import figure_problems
from helpers.perf import gemm, roofline
from tests.support.stored_tables import stored_tables_problems


def test_the_stored_runs_read_back_and_record_under_the_same_names(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    assert stored_tables_problems({"ch02.gemm_tflops.": (tables.GEMM, 24), "ch02.roofline.": (tables.POINTS, 10)}) == []
    assert stored_tables_problems({"ch02.cpu_gemm_tflops.": (tables.CPU_GEMM, 9), "ch02.roofline.": (tables.POINTS, 8)},
                                  source="cpu") == []
    for source in ("h200", "cpu"):
        recs = reference.load(source)
        for table, tail in ((tables.BANDWIDTH, "_bandwidth_gbs"), (tables.PEAK, "_roof_peak_tflops")):
            stored = [r.name for r in recs if r.name.startswith("ch02.") and r.name.endswith(tail)]
            assert [r.name for r in table.record(table.stored_rows(recs))] == stored


def test_headlines_and_points_come_back_as_the_records_gave_them():
    recs = reference.lookup_all("ch02.gemm_tflops")
    if not recs:
        pytest.skip("no stored GPU GEMM sweep")
    rows = tables.GEMM.stored_rows(reference.load("h200"))
    assert ex._gemm_derive({"gemm": rows}) == pytest.approx(gemm.headline_ratios(gemm.results_from_records(recs)))
    pts = tables.points(tables.POINTS.stored_rows(reference.load("h200")), "gpu")
    old = roofline.points_from_records(reference.lookup_all("ch02.roofline.gpu"))
    assert [(p.name, p.kind) for p in pts] == [(p.name, p.kind) for p in old]
    assert [p.tflops for p in pts] == pytest.approx([p.tflops for p in old])


def test_rows_of_measured_results_round_trip():
    res = [gemm.GemmResult("bf16", 1024, 1024, 1024, 1e-3, 2.147, 989.4), gemm.GemmResult("fp32", 256, 256, 256, 1e-3,
                                                                                          0.03, None)]
    back = tables.gemm_results(tables.gemm_rows(res))
    assert [(r.precision, r.m, r.spec_tflops) for r in back] == [("bf16", 1024, pytest.approx(989.4)), ("fp32", 256, None)]
    pts = [roofline.RoofPoint("add", "elementwise", 1e9, 12e9, 0.01), roofline.RoofPoint("GEMM", "gemm", 2e12, 1e9, 0.5)]
    again = tables.points(tables.point_rows(pts, "cpu"), "cpu")
    assert [p.intensity for p in again] == pytest.approx([p.intensity for p in pts])
    assert [p.tflops for p in again] == pytest.approx([p.tflops for p in pts])
    assert ex._dp4a_derive({"dp4a": [{"kernel": k, "TOPS": v, "size": None} for k, v in zip(ex.DP4A_KERNELS, (90, 900))]}) \
        == {"gemm.dp4a_over_int8_tc": 0.1}
    assert ex._dp4a_derive({"dp4a": []}) == {}


def test_the_stored_gpu_figures_draw_and_say_where_they_come_from(capsys, monkeypatch):
    if not reference.lookup("ch02.gpu_bandwidth_gbs"):
        pytest.skip("no stored GPU roofline")
    stored = ex.GPU_ROOFLINE.run(stored=True)
    figs = [ex.roof_plot(stored, "gpu", "Roofline (GPU, stored)"), ex.gemm_plot(ex.GEMM.run(stored=True))]
    assert all(f is not None and figure_problems(f) == [] for f in figs)
    assert f"from the stored {stored.source.upper()} run" in ex.roof_line(stored, "gpu") and ex.roof_rows(stored, "gpu")
    monkeypatch.setattr(reference, "load", lambda source="h200": ())
    assert ex.roof_plot(ex.GPU_ROOFLINE.run(stored=True), "gpu", "Roofline (GPU, stored)") is None
    assert "no rows" in capsys.readouterr().out
    plt.close("all")


def test_a_memory_bound_point_above_its_roof_gets_the_memory_roof_measured_again(monkeypatch):
    """A disturbed copy measurement lowers the memory roof under an honest point: the re-measure must take the
    streams again too, not only the point and the GEMM (seen once on a busy 2-core machine: 14 % above)."""
    point = roofline.RoofPoint("add", "elementwise", flops=1e9, bytes=12e9, seconds=1.0)  # 12 GB/s, intensity 1/12
    copies = iter([10.0, 13.0])  # the first copy measurement disturbed (10 GB/s), the second not
    monkeypatch.setattr("helpers.device.has_gpu", lambda: False)
    monkeypatch.setattr(roofline, "measure_bandwidth_gbs", lambda *a, **k: next(copies))
    monkeypatch.setattr(roofline, "measure_read_gbs", lambda *a, **k: {"amax": 9.0})
    monkeypatch.setattr(roofline, "measure_points", lambda *a, **k: [point])
    monkeypatch.setattr(ex, "_peak", lambda where, repeats: (1.0, "a stand-in GEMM"))
    monkeypatch.setattr(ex, "_gemm_peak", lambda where, repeats: (1.0, "a stand-in GEMM"))
    got = ex._roofline(repeats=1)
    assert got["bandwidth"][0]["copy GB/s"] == 13.0  # measured again, the faster kept: the point is under it now
    assert next(copies, None) is None  # and no more than needed
