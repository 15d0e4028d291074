"""Chapter 4 sweeps: simulator tables here; small GPU sweeps and the lab 3 speed checks on a GPU."""

from __future__ import annotations

import pytest

from helpers import bench

from helpers.chapters.ch04_warp_execution import warp_bench as wb


def test_simulated_tables():
    paths = {r["mode"]: r["paths per warp"] for r in wb.simulated_paths(threads=64, iters=1)}
    assert paths == {"uniform": 1, "mod2": 2, "lane0": 2, "warp_uniform": 1, "branch_free": 1}
    rows = {r["tree"]: r for r in wb.simulated_reductions(256)}
    assert rows["shared"]["correct"] and rows["interleaved"]["correct"]
    assert rows["shared"]["warps that diverge"] == "1 of 8"
    assert rows["interleaved"]["warps that diverge"] == "8 of 8"


def test_occupancy_figure_is_complete():
    import matplotlib.pyplot as plt
    from helpers.figure_check import figure_problems

    fig = wb.plot_bandwidth_and_occupancy({32: {"gbs": 1.0, "occupancy": 0.5}, 256: {"gbs": 2.0, "occupancy": 1.0}},
                                          "block size", "threads per block")
    assert figure_problems(fig) == []
    plt.close("all")


def test_stored_occupancy_without_records(capsys, monkeypatch):
    from helpers import reference

    monkeypatch.setattr(reference, "load", lambda source="h200": ())
    wb.plot_stored_occupancy()
    assert capsys.readouterr().out.count("not measured yet") == 2


def test_stored_occupancy_redraws_stored_records(capsys, monkeypatch):
    import matplotlib.pyplot as plt

    from helpers import reference

    recs = tuple(bench.Record(f"ch04.blocksize_{k}.b{b}", v, "x", "GPU", "2026-01-01")
                 for b in (32, 64) for k, v in (("gbs", 100.0 * b), ("occupancy", 0.5)))
    monkeypatch.setattr(reference, "load", lambda source="h200": recs)
    before = len(plt.get_fignums())
    wb.plot_stored_occupancy()
    out = capsys.readouterr().out
    assert out.count("not measured yet") == 1 and len(plt.get_fignums()) == before + 1
    plt.close("all")


@pytest.mark.gpu
def test_divergence_and_reductions_small(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    slow = wb.record_divergence(wb.divergence_times(1 << 16, 8))
    assert slow["cupy_uniform"] == 1.0 and len(slow) == 10
    red = wb.reduction_bandwidth(1 << 20)
    assert {"cupy_shuffle", "numba_shuffle", "torch_sum"} <= set(red)
    wb.record_reductions(red)


@pytest.mark.gpu
def test_occupancy_sweep_small(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    res = wb.occupancy_sweep(1 << 20)
    assert set(res["block_size"]) == set(wb.BLOCK_SIZES) and set(res["shared_kib"]) == set(wb.SHARED_KIB)
    assert res["shared_kib"][226]["occupancy"] == 0.125
    wb.record_occupancy(res)


@pytest.mark.gpu
def test_lab03_perf_checks_run():
    from helpers.grading.exercise import get
    from helpers.kernels.divergence import branch_free
    from helpers.kernels.reduction import block_sums

    ratio, _, detail = get("lab03.branch_free").perf(branch_free)
    assert ratio > 0.7 and "divergent original" in detail
    ratio, _, _ = get("lab03.block_sum").perf(block_sums)
    assert ratio > 0.7
