"""Chapter 4's tables and Experiments on the CPU: the stored run reads back under the names it was stored with,
the slowdowns come from the same timings as the times, and the occupancy figures draw from a stored result."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from helpers import records, reference
from helpers.chapters.ch04_warp_execution import experiments as ex
from helpers.chapters.ch04_warp_execution import tables
from helpers.figure_check import figure_problems
from helpers.records import Record
from tests.support.stored_tables import stored_tables_problems

STORED = {  # record-name prefix -> (table, rows the stored H200 run holds)
    "ch04.divergence_ms.": (tables.DIVERGENCE, 10), "ch04.divergence_slowdown.": (tables.SLOWDOWN, 10),
    "ch04.blocksize_gbs.": (tables.BLOCK_GBS, 6), "ch04.blocksize_occupancy.": (tables.BLOCK_OCCUPANCY, 6),
    "ch04.smem_gbs.": (tables.SMEM_GBS, 10), "ch04.smem_occupancy.": (tables.SMEM_OCCUPANCY, 10),
    "ch04.reduce_gbs.": (tables.REDUCE, 9)}


def test_the_stored_run_reads_back_and_records_under_the_same_names(monkeypatch):
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)
    assert stored_tables_problems(STORED) == []


def test_old_sweep_records_read_back_as_numbers():
    old = [Record("ch04.smem_gbs.k48", 1500.0, "GB/s", "d", "d"), Record("ch04.smem_occupancy.k48", 0.5, "fraction", "d", "d")]
    assert tables.SMEM_GBS.stored_rows(old) == [{"KiB": 48, "GB/s": 1500.0}]
    assert tables.SMEM_OCCUPANCY.stored_rows(old) == [{"KiB": 48, "occupancy": 0.5, "registers": None}]


def test_slowdowns_and_registers_come_from_the_measured_rows(monkeypatch):
    from helpers.chapters.ch04_warp_execution import warp_bench as wb

    from helpers.bench import Rounds

    # cupy_mod2 is 1.5x cupy_uniform in every round although both drift together: the paired slowdown is exactly 1.5
    seconds = {"cupy_uniform": (1.0, 2.0, 1.0), "numba_uniform": (2.0, 2.0, 2.0), "cupy_mod2": (1.5, 3.0, 1.5),
               "numba_mod2": (4.0, 4.0, 4.0)}
    monkeypatch.setattr(wb, "divergence_rounds", lambda n, iters: Rounds(seconds, dict.fromkeys(seconds, "cupy")))
    rows = ex._divergence()
    slow = {r["kernel"]: r for r in rows["slowdown"]}
    assert {k: r["slowdown"] for k, r in slow.items()} == {"cupy_uniform": 1.0, "numba_uniform": 1.0,
                                                           "cupy_mod2": 1.5, "numba_mod2": 2.0}
    assert (slow["cupy_mod2"]["spread"].lo, slow["cupy_mod2"]["spread"].hi) == (1.5, 1.5)
    assert {r["kernel"]: r["ms"] for r in rows["ms"]}["cupy_uniform"] == 1000.0
    monkeypatch.setattr(wb, "occupancy_sweep", lambda n: {"block_size": {32: {"gbs": 1.0, "occupancy": 0.5}},
                                                          "shared_kib": {0: {"gbs": 2.0, "occupancy": 1.0}},
                                                          "registers": 8})
    occ = ex._occupancy()
    assert occ["smem_gbs"] == [{"KiB": 0, "GB/s": 2.0}] and ex._registers(occ) == {"ch04.copy_registers": 8}


def test_occupancy_figures_draw_the_stored_run_or_say_why_not(capsys, monkeypatch):
    if reference.load("h200"):
        figs = ex.occupancy_plots(ex.OCCUPANCY.run(stored=True))
        assert len(figs) == 2 and all(figure_problems(f) == [] for f in figs)
    monkeypatch.setattr(reference, "load", lambda source="h200": ())
    assert ex.occupancy_plots(ex.OCCUPANCY.run(stored=True)) == []
    assert capsys.readouterr().out.count("no rows") == 2
    plt.close("all")
