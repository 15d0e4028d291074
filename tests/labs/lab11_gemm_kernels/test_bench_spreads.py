"""Lab 11's GPU records keep their spread: each step's TOPS and each speed-up, and the stored steps read it back."""

from __future__ import annotations

import pytest

from helpers import bench
from helpers.labs.lab11_gemm_kernels import bench as gemm_bench
from helpers.spread import Spread


def _step(key: str, precision: str, seconds: float) -> gemm_bench.Step:
    return gemm_bench.Step(key, key, precision, 2e12, 1e9, seconds, Spread(seconds * 0.9, seconds * 1.1, "p10..p90 of 10"))


def test_records_carry_the_spread_and_steps_read_it_back():
    steps = [_step("naive", "fp32", 1.0), _step("tiled16", "fp32", 0.2), _step("torch_fp32", "fp32", 0.05),
             _step("int8_t16", "int8", 0.5), _step("dp4a_cu", "int8", 0.02), _step("int_mm", "int8", 0.002)]
    before = len(bench.session_records())
    gemm_bench.record(steps, n=64)
    recs = {r.name: r for r in bench.session_records()[before:]}
    tiled = recs["lab11.tiled16_tops"]
    assert (tiled.extra["lo"], tiled.extra["hi"]) == pytest.approx((2e12 / 0.22 / 1e12, 2e12 / 0.18 / 1e12))
    ratio = recs["lab11.tiled_over_naive"]
    assert ratio.extra["lo"] < ratio.value < ratio.extra["hi"]
    back = {s.key: s for s in gemm_bench.steps_from_records(recs.values())}
    assert back["tiled16"].spread_s.lo == pytest.approx(0.18) and back["tiled16"].tops == pytest.approx(10.0)
