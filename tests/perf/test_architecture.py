"""Chapter 2: SM layouts, device query, SIMT facts."""

from __future__ import annotations

import pytest

from helpers.perf import architecture as arch
from helpers.device import GPUInfo
from helpers.errors import InputError

H200 = GPUInfo(name="NVIDIA H200", compute_capability=(9, 0), sm_count=132, memory_bytes=141 * 2**30,
               l2_bytes=60 * 2**20, shared_memory_per_sm=228 * 1024, registers_per_sm=65536,
               max_threads_per_sm=2048, clock_mhz=1980.0, memory_clock_mhz=3125.0, memory_bus_bits=6144)


def test_hopper_and_volta_layouts():
    assert (arch.sm_layout((9, 0)).fp32_cores, arch.sm_layout((9, 0)).tensor_cores) == (128, 4)
    assert (arch.sm_layout((7, 0)).fp32_cores, arch.sm_layout((7, 0)).tensor_cores) == (64, 8)
    assert arch.sm_layout((6, 1)).tensor_cores == 0
    assert "FP8" in arch.sm_layout((8, 9)).tensor_core_types and "FP8" not in arch.sm_layout((8, 0)).tensor_core_types


def test_first_principles_peak_matches_h100_datasheet():
    assert arch.peak_fp32_tflops(132, 128, 1980) == pytest.approx(67.0, rel=0.01)


def test_device_query_of_an_h200():
    rows = {r["property"]: r["value"] for r in arch.device_query_rows(H200)}
    assert rows["CUDA cores (total)"] == 132 * 128 == 16896
    assert rows["Tensor Cores (total)"] == 528
    assert rows["registers / SM"] == 65536 and rows["L2 cache (MiB)"] == 60.0
    assert 4700 < rows["peak DRAM bandwidth (GB/s)"] < 4900


def test_device_query_without_gpu_describes_the_cpu(monkeypatch):
    monkeypatch.setattr(arch, "gpu_info", lambda: None)
    props = [r["property"] for r in arch.device_query_rows()]
    assert "cores visible" in props


def test_simt_helpers():
    assert arch.divergence_passes([True] * 32) == 1
    assert arch.divergence_passes([False] * 32) == 1
    assert arch.divergence_passes([i < 16 for i in range(32)]) == 2
    assert arch.warps_for(1) == 1 and arch.warps_for(32) == 1 and arch.warps_for(33) == 2


def test_sm_layout_rows_highlight():
    rows = arch.sm_layout_rows((9, 0))
    assert [r["CC"] for r in rows if r["current"]] == ["9.0"]


@pytest.mark.parametrize("bad", [(9,), "9.0", (9, 5)])
def test_sm_layout_rejects_bad_cc(bad):
    with pytest.raises(InputError):
        arch.sm_layout(bad)


def test_bad_arguments():
    with pytest.raises(InputError):
        arch.divergence_passes([True] * 33)
    with pytest.raises(InputError):
        arch.warps_for(0)
    with pytest.raises(InputError):
        arch.peak_fp32_tflops(132, 128, 0)
