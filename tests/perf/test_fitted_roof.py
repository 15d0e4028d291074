"""helpers.perf.roofline.fitted_roof (chapter 2, lab 1): the roof kernels are read against fits its data (no point above it)."""

from __future__ import annotations

import pytest

from helpers import reference
from helpers.errors import InputError
from helpers.perf.roofline import fitted_roof
from helpers.perf import roofline


def _efficiencies(points, peak, bw):
    return [p.tflops / roofline.attainable_tflops(p.intensity, peak, bw) for p in points]


def test_an_elementwise_kernel_faster_than_the_copy_raises_the_memory_roof():
    # 1 GiB add streaming 3 GiB in 0.75 ms = 4295 GB/s, against a copy measured at 4066 GB/s
    add = roofline.RoofPoint("add (a+b)", "elementwise", *roofline.elementwise_cost("add (a+b)", 1 << 28), 7.5e-4)
    gemm = roofline.RoofPoint("GEMM", "gemm", *roofline.gemm_cost(4096, 4096, 4096, 2), 2.0e-4)
    points = [add, gemm]
    assert max(_efficiencies(points, roofline.measured_peak(points), 4066.0)) > 1  # the copy alone: roof too low
    peak, bw = fitted_roof(points, 4066.0)
    assert bw == pytest.approx(add.bytes / add.seconds / 1e9) and peak == gemm.tflops
    assert max(_efficiencies(points, peak, bw)) == pytest.approx(1.0)


def test_a_copy_faster_than_every_kernel_stays_the_memory_roof():
    add = roofline.RoofPoint("add (a+b)", "elementwise", *roofline.elementwise_cost("add (a+b)", 1 << 20), 1e-3)
    gemm = roofline.RoofPoint("GEMM", "gemm", *roofline.gemm_cost(512, 512, 512, 4), 1e-2)
    assert fitted_roof([add, gemm], 50.0) == (gemm.tflops, 50.0)


def test_the_stored_h200_roofline_fits_under_the_fitted_roof():
    points = roofline.points_from_records(reference.lookup_all("ch02.roofline.gpu"))
    copy = reference.lookup("ch02.gpu_bandwidth_gbs")
    if not points or copy is None:
        pytest.skip("no stored GPU roofline")
    peak, bw = fitted_roof(points, copy.value)
    assert max(_efficiencies(points, peak, bw)) <= 1 + 1e-9


def test_a_bad_copy_bandwidth_is_one_clear_error():
    gemm = roofline.RoofPoint("GEMM", "gemm", *roofline.gemm_cost(64, 64, 64, 4), 1e-4)
    with pytest.raises(InputError, match="copy_gbs must be a positive number"):
        fitted_roof([gemm], 0.0)
