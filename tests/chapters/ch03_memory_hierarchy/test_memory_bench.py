"""Chapter 3 sweeps on a GPU at small sizes (shape of the results, records), and the CPU fallbacks."""

from __future__ import annotations

import pytest

from helpers import bench, reference
from helpers.chapters.ch03_memory_hierarchy import memory_bench as mb


def test_stored_plots_without_records_say_so(capsys):
    assert reference.plot_stored_bars("ch99.none", "Nothing", "GB/s") is None
    assert reference.plot_stored_sweep({"x": "ch99.none"}, "Nothing", "x", "y") is None
    assert capsys.readouterr().out.count("no stored h200 records under ch99.none yet") == 2


def test_no_gpu_is_explained():
    from helpers.device import has_gpu
    from helpers.errors import NoGPUError

    if has_gpu():
        pytest.skip("this machine has a GPU")
    with pytest.raises(NoGPUError):
        mb.copy_bandwidth(1024)


@pytest.mark.gpu
def test_copy_and_stride_sweeps_small(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    res = mb.copy_bandwidth(1 << 20)
    assert {"torch_d2d", "cupy_float4", "numba_ilp4_u64"} <= set(res) and min(res.values()) > 0
    ratios = mb.record_copy(res)
    assert set(ratios) == {"cupy", "numba"}
    strides = mb.stride_bandwidth((1, 32), 1 << 16)
    assert mb.record_stride(strides) > 0
    offsets = mb.offset_bandwidth((0, 1), 1 << 16)
    assert set(offsets["numba"]) == {0, 1}


@pytest.mark.gpu
def test_transpose_and_readonly_small(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    fr = mb.record_transpose(mb.transpose_bandwidth(512))
    assert fr["cupy_copy"] == 1.0 and fr["numba_copy"] == 1.0
    assert set(mb.readonly_bandwidth(1 << 16)) == {"plain", "restrict", "ldg"}


@pytest.mark.gpu
def test_lab02_perf_checks_run():
    from numba import cuda

    from helpers.grading.exercise import get
    from helpers.kernels.copy import copy_simple
    from helpers.kernels.transpose import transpose_padded

    cuda.synchronize()
    ratio, needed, detail = get("lab02.copy").perf(copy_simple)
    assert ratio > 0.8 and "ms" in detail
    ratio, needed, _ = get("lab02.transpose").perf(transpose_padded)
    assert ratio > 0.7


def test_copy_bandwidth_spread_brackets_its_median():
    spreads: dict = {}
    gbs = mb._gbs(lambda: sum(range(200)), 8e6, "cpu", spreads, "k")
    s = spreads["k"]
    assert s.lo <= gbs <= s.hi and "timed samples" in s.method
