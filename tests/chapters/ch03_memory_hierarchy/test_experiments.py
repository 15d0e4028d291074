"""Chapter 3's tables and Experiments on the CPU: the stored run reads back under the names it was stored with,
the headlines come from the rows, and every figure draws from a stored result."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from helpers import records, reference
from helpers.chapters.ch03_memory_hierarchy import experiments as ex
from helpers.chapters.ch03_memory_hierarchy import tables
from helpers.figure_check import figure_problems
from helpers.records import Record
from tests.support.stored_tables import stored_tables_problems
from helpers.spread import Spread

STORED = {  # record-name prefix -> (table, rows the stored H200 run holds)
    "ch03.copy_gbs.": (tables.COPY, 9), "ch03.stride_gbs": (tables.STRIDE, 20), "ch03.offset_gbs_": (tables.OFFSET, 14),
    "ch03.transpose_gbs.": (tables.TRANSPOSE, 8), "ch03.transpose_over_copy.": (tables.FRACTION, 8),
    "ch03.readonly_gbs.": (tables.READONLY, 3)}


def test_the_stored_run_reads_back_and_records_under_the_same_names(monkeypatch):
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)
    assert stored_tables_problems(STORED) == []


def test_a_sweep_table_keeps_cupy_and_numba_apart():
    old = [Record("ch03.stride_gbs.s8", 360.0, "GB/s", "d", "d"), Record("ch03.stride_gbs_numba.s8", 350.0, "GB/s", "d", "d"),
           Record("ch03.offset_gbs_cupy.o1", 2500.0, "GB/s", "d", "d"), Record("ch03.copy_gbs.cupy_simple", 1.0, "GB/s", "d", "d")]
    assert tables.STRIDE.stored_rows(old) == [{"backend": "cupy", "stride": 8, "GB/s": 360.0, "spread": None},
                                              {"backend": "numba", "stride": 8, "GB/s": 350.0, "spread": None}]
    assert tables.OFFSET.stored_rows(old) == [{"backend": "cupy", "offset": 1, "GB/s": 2500.0, "spread": None}]


def test_headlines_come_from_the_rows_with_their_spread():
    s = lambda lo, hi: Spread(lo, hi, "p10..p90 of 20 timed samples")  # noqa: E731
    copy = [{"kernel": "torch_d2d", "GB/s": 100.0, "spread": s(99, 101)},
            {"kernel": "cupy_simple", "GB/s": 80.0, "spread": s(79, 81)},
            {"kernel": "cupy_float4", "GB/s": 95.0, "spread": s(94, 96)},
            {"kernel": "numba_ilp4", "GB/s": 90.0, "spread": None}]
    got = ex._copy_derive({"copy": copy})
    assert got["copy.cupy_over_d2d"][0] == pytest.approx(0.95)
    assert got["copy.cupy_over_d2d"][1].lo == pytest.approx(94 / 101)
    assert got["copy.numba_over_d2d"] == (pytest.approx(0.9), None)
    stride = [{"backend": "cupy", "stride": 1, "GB/s": 200.0, "spread": None},
              {"backend": "numba", "stride": 32, "GB/s": 1.0, "spread": None},
              {"backend": "cupy", "stride": 32, "GB/s": 20.0, "spread": None}]
    assert ex._stride_derive({"stride": stride})["copy.stride32_over_stride1"] == (pytest.approx(0.1), None)
    tr = [{"kernel": k, "GB/s": v, "spread": None} for k, v in
          (("cupy_copy", 100.0), ("cupy_naive", 20.0), ("cupy_padded", 95.0), ("numba_copy", 50.0), ("numba_naive", 25.0))]
    fr = ex.fraction_rows(tr)
    assert [r["÷ tiled copy"] for r in fr] == pytest.approx([1.0, 0.2, 0.95, 1.0, 0.5])
    got = ex._transpose_derive({"fraction": fr})
    assert got["transpose.padded_over_copy"][0] == pytest.approx(0.95)


def test_every_figure_draws_the_stored_run():
    if not reference.load("h200"):
        pytest.skip("no stored H200 run")
    figs = [ex.copy_bars(ex.COPY.run(stored=True)), ex.stride_plot(ex.STRIDE.run(stored=True)),
            ex.offset_plot(ex.OFFSET.run(stored=True)), ex.transpose_bars(ex.TRANSPOSE.run(stored=True))]
    for f in figs:
        assert f is not None and figure_problems(f) == []
    plt.close("all")


def test_a_result_without_rows_says_so(capsys, monkeypatch):
    monkeypatch.setattr(reference, "load", lambda source="h200": ())
    assert ex.copy_bars(ex.COPY.run(stored=True)) is None
    assert ex.stride_plot(ex.STRIDE.run(stored=True)) is None
    assert "no rows" in capsys.readouterr().out
