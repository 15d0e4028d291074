"""Chapter 4 sweeps: simulator tables here; small GPU sweeps (through their Experiments) and the lab 3 speed
checks on a GPU."""

from __future__ import annotations

import pytest

from helpers import bench

from helpers.chapters.ch04_warp_execution import experiments as ex
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


@pytest.mark.gpu
def test_divergence_and_reductions_small(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    div = ex.DIVERGENCE.run(stored=False, n=1 << 16, iters=8)
    slow = {r["kernel"]: r["slowdown"] for r in div["slowdown"]}
    assert slow["cupy_uniform"] == 1.0 and len(slow) == 10
    assert all(r["spread"] is not None for r in div["ms"])
    red = {r["kernel"] for r in ex.REDUCTION.run(stored=False, n=1 << 20)["reduce"]}
    assert {"cupy_shuffle", "numba_shuffle", "torch_sum"} <= red


@pytest.mark.gpu
def test_occupancy_sweep_small(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    res = wb.occupancy_sweep(1 << 20)
    assert set(res["block_size"]) == set(wb.BLOCK_SIZES) and set(res["shared_kib"]) == set(wb.SHARED_KIB)
    assert res["shared_kib"][226]["occupancy"] == 0.125
    occ = ex.OCCUPANCY.run(stored=False, n=1 << 20)
    assert occ.value("ch04.copy_registers") > 0 and len(occ["smem_gbs"]) == len(wb.SHARED_KIB)


@pytest.mark.gpu
def test_lab03_perf_checks_run():
    from helpers.grading.exercise import get
    from helpers.kernels.divergence import branch_free
    from helpers.kernels.reduction import block_sums

    ratio, _, detail = get("lab03.branch_free").perf(branch_free)
    assert ratio > 0.7 and "divergent original" in detail
    ratio, _, _ = get("lab03.block_sum").perf(block_sums)
    assert ratio > 0.7
