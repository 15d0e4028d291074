"""Chapter 2: roofline arithmetic, classification and CPU measurement."""

from __future__ import annotations

import pytest

from helpers.perf import roofline as rl
from helpers.errors import InputError


def test_ridge_and_attainable_h200():
    ridge = rl.ridge_point(989.0, 4800.0)
    assert ridge == pytest.approx(206.0, rel=1e-3)
    assert rl.attainable_tflops(1.0, 989.0, 4800.0) == pytest.approx(4.8)
    assert rl.attainable_tflops(1e4, 989.0, 4800.0) == 989.0
    assert rl.classify(ridge * 0.99, 989.0, 4800.0) == "memory"
    assert rl.classify(ridge * 1.01, 989.0, 4800.0) == "compute"


def test_gemm_cost_and_intensity():
    f, b = rl.gemm_cost(8192, 8192, 8192, 2)
    assert f == 2 * 8192**3 and b == 2 * 3 * 8192**2
    assert rl.intensity(f, b) == pytest.approx(8192 / 3)
    # a batch-1 linear layer is memory-bound everywhere: intensity ~1 FLOP/byte in fp16
    assert rl.intensity(*rl.gemm_cost(1, 768, 768, 2)) < 1.01


def test_conv_and_elementwise_costs():
    f, b = rl.conv_cost(1, 3, 64, 224, 224, 7, stride=2)
    assert f == 2 * 64 * 112 * 112 * 3 * 49
    assert b == 4 * (3 * 224 * 224 + 64 * 3 * 49 + 64 * 112 * 112)
    assert rl.elementwise_cost("add (a+b)", 10) == (10.0, 120.0)


def test_points_and_records_round_trip():
    p = rl.RoofPoint("GEMM", "gemm", 2e12, 1e9, 0.5)
    assert p.intensity == 2000 and p.tflops == 4.0
    from helpers.bench import Record

    rec = Record("ch02.roofline.gpu.gemm.3", 4.0, "TFLOP/s", "x", "d", extra={"intensity": 2000.0, "label": "GEMM"})
    back = rl.points_from_records([rec])[0]
    assert back.kind == "gemm" and back.intensity == pytest.approx(2000) and back.tflops == pytest.approx(4.0)


def test_cpu_measurement_is_plausible():
    bw = rl.measure_bandwidth_gbs("cpu", nbytes=1 << 24, repeats=3)
    assert 0.1 < bw < 2000


@pytest.mark.parametrize("call", [lambda: rl.intensity(0, 1), lambda: rl.ridge_point(-1, 5),
                                  lambda: rl.attainable_tflops(float("nan"), 1, 1),
                                  lambda: rl.elementwise_cost("exp", 4), lambda: rl.memory_roof(-1.0),
                                  lambda: rl.measure_points("tpu")])
def test_bad_inputs_raise(call):
    with pytest.raises(InputError):
        call()


def test_plot_runs():
    pts = [rl.RoofPoint("add", "elementwise", 1e6, 1.2e7, 1e-3), rl.RoofPoint("GEMM", "gemm", 2e9, 1e7, 1e-2)]
    fig = rl.plot(pts, 0.2, 10.0, title="test roofline", spec_tflops=0.3)
    assert fig.axes[0].get_xscale() == "log"


@pytest.mark.gpu
def test_gpu_points_and_bandwidth():
    roof = rl.measure_roof("cuda", repeats=3)
    assert roof.bandwidth_gbs > 500 and roof.peak_tflops > 100  # HBM, BF16 Tensor Cores
    pts = rl.measure_points("cuda", repeats=3)
    assert [p.name for p, over in roof.above(pts) if over > 0.25] == []  # measured apart, within the noise


def test_threaded_cpu_copy_copies_every_element():
    import numpy as np
    from concurrent.futures import ThreadPoolExecutor

    src = np.arange(1001, dtype=np.float32)
    for parts in (1, 2, 3, 7):
        dst = np.zeros_like(src)
        with ThreadPoolExecutor(parts) as pool:
            rl._cpu_copy(dst, src, pool, parts)
        assert np.array_equal(dst, src)


def test_cpu_bandwidth_takes_a_thread_count():
    assert rl.measure_bandwidth_gbs("cpu", nbytes=1 << 20, repeats=2, threads=1) > 0
    assert rl.measure_bandwidth_gbs("cpu", nbytes=1 << 20, repeats=2, threads=2) > 0
    with pytest.raises(InputError):
        rl.measure_bandwidth_gbs("cpu", nbytes=1 << 20, repeats=2, threads=-1)
