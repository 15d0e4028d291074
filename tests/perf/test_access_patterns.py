"""Access-pattern arithmetic: sectors, lines, bank conflicts, and traces of real kernels."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.perf import access_patterns as ap
from helpers.errors import InputError
from helpers.kernels import copy, simtrace, transpose


def test_sectors_and_lines_for_strides():
    rows = {r["stride"]: r for r in ap.stride_rows([1, 2, 8, 32])}
    assert (rows[1]["sectors"], rows[1]["lines"], rows[1]["useful"]) == (4, 1, 1.0)
    assert rows[2]["sectors"] == 8 and rows[8]["sectors"] == 32 and rows[32]["lines"] == 32
    assert rows[32]["useful"] == 0.125


def test_misaligned_warp_needs_one_more_sector():
    assert ap.sectors(ap.warp_addresses(lambda t: t + 1)) == 5
    assert ap.sectors(ap.warp_addresses(lambda t: t + 8)) == 4


def test_idle_lanes_and_wide_items():
    addrs = ap.warp_addresses(lambda t: t if t < 8 else None)
    assert ap.sectors(addrs) == 1
    assert ap.sectors(ap.warp_addresses(lambda t: t, itemsize=16), 16) == 16


def test_bank_conflicts():
    assert ap.tile_column_conflicts(32) == 32
    assert ap.tile_column_conflicts(33) == 1
    assert ap.bank_conflict_degree([0] * 32) == 1  # one word: a broadcast
    assert ap.bank_conflict_degree([4 * 2 * t for t in range(32)]) == 2


def test_bad_index_function():
    with pytest.raises(InputError, match="function"):
        ap.warp_addresses(3)
    with pytest.raises(InputError, match="pitch"):
        ap.tile_column_conflicts(0)


def test_traces_of_real_kernels():
    a = np.random.default_rng(1).random((32, 32), dtype=np.float32)
    (_, out), tr = simtrace.run_traced(transpose.transpose_tiled, (1, 1), (32, 8), a, np.zeros_like(a))
    assert np.array_equal(out, a.T)
    s = ap.summarize(tr)
    assert s["worst_bank_conflict"] == 32 and s["sectors_per_request"] == s["ideal_sectors_per_request"] == 4
    (_, out), tr = simtrace.run_traced(transpose.transpose_naive, (1, 1), (32, 8), a, np.zeros_like(a))
    s = ap.summarize(tr)
    assert s["shared_requests"] == 0 and s["sectors_per_request"] == (4 + 32) / 2
    x = np.arange(128, dtype=np.float32)
    _, tr = simtrace.run_traced(copy.copy_strided, 1, 32, x, np.zeros_like(x), 32, 4)
    assert ap.summarize(tr)["sectors_per_request"] == 16  # 32 lanes, 16 bytes apart


def test_drawings_are_complete_figures():
    import matplotlib.pyplot as plt
    from helpers.figure_check import figure_problems

    from helpers.chapters.ch03_memory_hierarchy import memory_bench

    fig = ap.draw_warp(lambda t: 2 * t, "stride 2", warps=2)
    fig2 = ap.draw_banks([r * 32 * 4 for r in range(32)], "column")
    assert "16 sectors" in fig.axes[0].get_title() and "32-way" in fig2.axes[0].get_title()
    fig3 = memory_bench.plot_stride_model({"made up": {1: 100.0, 2: 50.0, 32: 12.0}})
    assert len(fig3.axes[0].lines) == 2
    for f in (fig, fig2, fig3):
        assert figure_problems(f) == []
    plt.close("all")
