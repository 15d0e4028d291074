"""Chapter 5: int8 GEMM/conv exact against references; fixed-point requantization within one LSB."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.errors import InputError
from helpers.quant import intgemm


def _ints(shape, seed=0):
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


def _extremes(m, k, n):
    """All -128 and 127 patterns: the largest accumulators int8 can produce."""
    a = np.full((m, k), -128, np.int8)
    b = np.full((k, n), -128, np.int8)
    b[:, ::2] = 127
    return a, b


def test_gemm_ref_exact_vs_int64():
    a, b = _ints((17, 40)), _ints((40, 9), 1)
    assert np.array_equal(intgemm.gemm_int8_ref(a, b), a.astype(np.int64) @ b.astype(np.int64))
    a, b = _extremes(3, 1024, 4)
    ref = intgemm.gemm_int8_ref(a, b)
    assert ref.dtype == np.int32 and ref[0, 1] == 1024 * 128 * 128


def test_int_mm_cpu_equals_reference():
    a, b = _ints((32, 64)), _ints((64, 24), 1)
    assert np.array_equal(intgemm.int_mm(a, b).numpy(), intgemm.gemm_int8_ref(a, b))


@pytest.mark.parametrize("stride,padding", [(1, 0), (2, 1)])
def test_conv_ref_equals_float64_conv(stride, padding):
    x, w = _ints((2, 3, 9, 9)), _ints((5, 3, 3, 3), 1)
    ref = torch.nn.functional.conv2d(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64),
                                     stride=stride, padding=padding).numpy().astype(np.int32)
    assert np.array_equal(intgemm.conv2d_int8_ref(x, w, stride, padding), ref)


def test_gemm_bad_input():
    with pytest.raises(InputError, match="int8"):
        intgemm.gemm_int8_ref(np.ones((2, 2), np.float32), _ints((2, 2)))
    with pytest.raises(InputError, match="inner sizes"):
        intgemm.gemm_int8_ref(_ints((2, 3)), _ints((2, 2)))
    with pytest.raises(InputError, match="overflow"):
        intgemm.gemm_int8_ref(_ints((1, intgemm.MAX_K + 1)), _ints((intgemm.MAX_K + 1, 1)))


@settings(max_examples=40, deadline=None)
@given(m=st.floats(1e-6, 0.99), seed=st.integers(0, 2**16))
def test_fixed_point_within_one_lsb_of_float(m, seed):
    acc = np.random.default_rng(seed).integers(-2**31, 2**31, 2000, dtype=np.int64).astype(np.int32)
    m0, shift = intgemm.quantize_multiplier(m)
    assert 2**30 <= int(m0) < 2**31
    fixed = intgemm.requantize_fixed(acc, m0, shift, bits=16).astype(np.int64)
    flt = intgemm.requantize_float(acc, m, bits=16).astype(np.int64)
    assert np.abs(fixed - flt).max() <= 1


def test_fixed_point_exact_away_from_ties_per_channel():
    rng = np.random.default_rng(0)
    m = rng.uniform(1e-4, 0.5, 16)
    acc = rng.integers(-2**20, 2**20, (500, 16)).astype(np.int32)
    m0, shift = intgemm.quantize_multiplier(m)
    fixed = intgemm.requantize_fixed(acc, m0, shift, axis=1)
    flt = intgemm.requantize_float(acc, m, axis=1)
    assert fixed.dtype == np.int8
    frac = np.abs(acc * m[None, :] % 1 - 0.5)
    assert np.array_equal(fixed[frac > 1e-6], flt[frac > 1e-6])


def test_requantize_saturates_and_rounds_ties_up():
    acc = np.array([-3, -1, 1, 3, 10**6, -10**6], np.int32)
    m0, sh = intgemm.quantize_multiplier(0.5)
    assert intgemm.requantize_fixed(acc, m0, sh).tolist() == [-1, 0, 1, 2, 127, -128]


def test_integer_only_linear_matches_float_within_one_lsb():
    from helpers.quant.core import dequantize, quantize_per_channel, quantize_per_tensor

    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 32)).astype(np.float32)
    w = rng.normal(size=(16, 32)).astype(np.float32) * 0.1
    b = rng.normal(size=16).astype(np.float32) * 0.1
    xq, sx, _ = quantize_per_tensor(x)
    wq, sw, _ = quantize_per_channel(w, axis=0)
    y = dequantize(xq, sx) @ dequantize(wq, sw, axis=0).T + b
    sy = float(np.abs(y).max() / 127)
    m0, shift = intgemm.quantize_multiplier(sx * sw / sy)
    yq = intgemm.int8_linear(xq, wq, intgemm.quantize_bias(b, sx, sw), m0, shift)
    assert np.abs(yq.astype(int) - np.clip(np.rint(y / sy), -128, 127)).max() <= 1


def test_multiplier_bad_input():
    with pytest.raises(InputError, match="multipliers"):
        intgemm.quantize_multiplier(0.0)
    with pytest.raises(InputError, match="int32"):
        intgemm.requantize_fixed(np.ones(3, np.int64), 2**30, 0)


# ---------- GPU (run on the H200) ----------

@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(64, 64, 64), (70, 36, 132), (1, 4, 1), (257, 1000, 65)])
def test_dp4a_equals_reference(shape):
    m, k, n = shape
    a, b = _ints((m, k), 2), _ints((k, n), 3)
    assert np.array_equal(intgemm.dp4a_gemm(a, b), intgemm.gemm_int8_ref(a, b))


@pytest.mark.gpu
def test_dp4a_extremes():
    a, b = _extremes(65, 2048, 66)
    assert np.array_equal(intgemm.dp4a_gemm(a, b), intgemm.gemm_int8_ref(a, b))


@pytest.mark.gpu
def test_dp4a_rejects_k_not_multiple_of_4():
    with pytest.raises(InputError, match="multiple of 4"):
        intgemm.dp4a_gemm(_ints((8, 6)), _ints((6, 8)))


@pytest.mark.gpu
def test_int_mm_cuda_equals_reference_with_extremes():
    a, b = _ints((128, 256), 4), _ints((256, 64), 5)
    got = intgemm.int_mm(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()).cpu().numpy()
    assert np.array_equal(got, intgemm.gemm_int8_ref(a, b))
    a, b = _extremes(32, 1024, 16)
    got = intgemm.int_mm(torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()).cpu().numpy()
    assert np.array_equal(got, intgemm.gemm_int8_ref(a, b))


@pytest.mark.gpu
def test_gemm_throughput_small():
    r = intgemm.gemm_throughput(512, 512, 512, repeats=3)
    assert r["dp4a_tops"] > 0 and r["int_mm_tops"] > 0 and r["bf16_tops"] > 0
