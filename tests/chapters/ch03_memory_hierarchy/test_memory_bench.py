"""Chapter 3's measurements: on a GPU at small sizes through their Experiments, and the CPU fallbacks."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import bench, reference
from helpers.chapters.ch03_memory_hierarchy import experiments as ex
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
    with pytest.raises(NoGPUError):
        ex.COPY.run(stored=False)
    assert mb.cupy_copy_checks(np.zeros(4, np.float32)) == [
        "cupy copies (CUDA C): checked on a GPU only, and there is none here."]


@pytest.mark.gpu
def test_copy_and_sweeps_small(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    copies = ex.COPY.run(stored=False, n=1 << 20)
    kernels = {r["kernel"] for r in copies["copy"]}
    assert {"torch_d2d", "cupy_float4", "numba_ilp4_u64"} <= kernels and min(r["GB/s"] for r in copies["copy"]) > 0
    assert copies.value("copy.cupy_over_d2d") > 0 and copies.value("copy.numba_over_d2d") > 0
    strides = ex.STRIDE.run(stored=False, strides=(1, 32), n=1 << 16)
    assert strides.value("copy.stride32_over_stride1") > 0
    assert {r.name for r in strides.records} >= {"ch03.stride_gbs.s32", "ch03.stride_gbs_numba.s1"}
    offsets = ex.OFFSET.run(stored=False, offsets=(0, 1), n=1 << 16)
    assert ex.curves(offsets, "offset", "offset")["numba"].keys() == {0, 1}
    assert all(c.startswith("cupy copy") and c.endswith("True") for c in mb.cupy_copy_checks(np.ones(4096, np.float32)))


@pytest.mark.gpu
def test_transpose_and_readonly_small(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    tr = ex.TRANSPOSE.run(stored=False, n=512)
    fr = {r["kernel"]: r["÷ tiled copy"] for r in tr["fraction"]}
    assert fr["cupy_copy"] == 1.0 and fr["numba_copy"] == 1.0
    assert {r["loads"] for r in ex.READONLY.run(stored=False, n=1 << 16)["readonly"]} == {"plain", "restrict", "ldg"}


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


def test_each_kernel_gets_a_line_and_a_wrong_answer_says_false(monkeypatch):
    """kernel_checks: one line per copy and transpose kernel, saying whether its answer is exact."""
    from helpers.kernels import copy, transpose

    monkeypatch.setattr(copy, "numba_copy", lambda x, y, v: x * (2 if v == copy.NUMBA_VARIANTS[-1] else 1))
    monkeypatch.setattr(transpose, "numba_transpose", lambda a, out, v: a.T.copy())
    lines = mb.kernel_checks(np.arange(64, dtype=np.float32) + 1, np.ones((4, 2), np.float32))
    copies = [ln for ln in lines if ln.startswith("numba copy")]
    assert len(copies) == len(copy.NUMBA_VARIANTS)
    assert [ln.endswith("True") for ln in copies] == [True] * (len(copies) - 1) + [False]
    assert sum(ln.startswith("numba transpose") and ln.endswith("True") for ln in lines) == 2
