"""Chapter 5: quantize/dequantize on numpy and torch, exact small cases, properties and bad input."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.errors import InputError
from helpers.quant import core

SETTINGS = settings(max_examples=25, deadline=None)


def test_ranges():
    assert core.quant_range(8) == (-128, 127)
    assert core.quant_range(8, narrow=True) == (-127, 127)
    assert core.quant_range(8, signed=False) == (0, 255)
    assert core.quant_range(4) == (-8, 7)
    assert core.quant_range(16) == (-32768, 32767)


def test_exact_symmetric_int8():
    x = np.array([-1.0, -0.5, 0.0, 0.26, 1.0, 3.0], np.float32)
    s, z = core.scale_zero_point(-1.0, 1.0)
    assert z == 0 and s == pytest.approx(1 / 127)
    q = core.quantize(x, s, z)
    assert q.dtype == np.int8
    assert q.tolist() == [-127, -64, 0, 33, 127, 127]  # -63.5 rounds to even; 3.0 saturates


def test_rounding_modes_differ_on_ties():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)
    assert core.quantize(x, 1.0).tolist() == [0, 2, 2, 0, -2]
    assert core.quantize(x, 1.0, rounding="half_away").tolist() == [1, 2, 3, -1, -3]
    assert core.quantize(torch.tensor(x), 1.0, rounding="half_away").tolist() == [1, 2, 3, -1, -3]


def test_asymmetric_unsigned_zero_is_exact():
    s, z = core.scale_zero_point(np.float32(-0.5), np.float32(2.0), symmetric=False, signed=False)
    assert 0 <= z <= 255
    q = core.quantize(np.zeros(3, np.float32), s, z, signed=False)
    assert (core.dequantize(q, s, z) == 0).all()


def test_zero_range_gives_scale_one():
    s, z = core.scale_zero_point(np.zeros(3), np.zeros(3))
    assert (s == 1).all() and (z == 0).all()


@pytest.mark.parametrize("lib", ["numpy", "torch"])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_per_channel_any_axis(lib, axis):
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 5, 6)).astype(np.float32) * rng.uniform(0.1, 10, size=(1, 5, 1)).astype(np.float32)
    x = torch.tensor(w) if lib == "torch" else w
    q, s, z = core.quantize_per_channel(x, axis=axis)
    assert tuple(s.shape) == (w.shape[axis],)
    back = core.dequantize(q, s, z, axis=axis)
    s_np = s.numpy() if lib == "torch" else s
    shape = [1, 1, 1]
    shape[axis] = -1
    err = np.abs(np.asarray(back) - w)
    assert (err <= s_np.reshape(shape) / 2 + 1e-6).all()


def test_per_group():
    w = np.arange(24, dtype=np.float32).reshape(2, 12) - 11.5
    q, s, _ = core.quantize_per_group(w, 4, bits=4)
    assert s.shape == (2, 3) and q.min() >= -8 and q.max() <= 7
    err = np.abs(core.roundtrip(w, bits=4, group_size=4) - w)
    assert (err <= np.repeat(s, 4, axis=1) / 2 + 1e-6).all()


@SETTINGS
@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=3),
    bits=st.integers(2, 16),
    signed=st.booleans(),
    symmetric=st.booleans(),
    narrow=st.booleans(),
    dtype=st.sampled_from(["float32", "float64", "float16"]),
    seed=st.integers(0, 2**16),
)
def test_properties_numpy_equals_torch_and_error_bound(shape, bits, signed, symmetric, narrow, dtype, seed):
    x = (np.random.default_rng(seed).normal(size=shape) * 3).astype(dtype)
    if not signed and symmetric:
        x = np.abs(x)
    kw = dict(bits=bits, symmetric=symmetric, signed=signed, narrow=narrow)
    q, s, z = core.quantize_per_tensor(x, **kw)
    qt, st_, zt = core.quantize_per_tensor(torch.tensor(x), **kw)
    qmin, qmax = core.quant_range(bits, signed, narrow)
    assert q.min() >= qmin and q.max() <= qmax
    assert np.array_equal(q.astype(np.int64), qt.numpy().astype(np.int64))
    back = core.dequantize(q, s, z).astype(np.float64)
    assert np.abs(back - x.astype(np.float64)).max() <= float(s) * 0.5 * (1 + 1e-3) + 1e-6


@SETTINGS
@given(bits=st.integers(2, 8), seed=st.integers(0, 2**16))
def test_quantize_is_idempotent_on_grid(bits, seed):
    rng = np.random.default_rng(seed)
    q0 = rng.integers(*core.quant_range(bits), endpoint=True, size=20)
    s = np.float32(rng.uniform(0.01, 2))
    x = core.dequantize(q0.astype(np.int16), s)
    assert np.array_equal(core.quantize(x, s, bits=bits), q0)


# Bad input: one test per case, each with a clear InputError.
def test_bad_non_float():
    with pytest.raises(InputError, match="floating point"):
        core.quantize(np.arange(4), 1.0)
    with pytest.raises(InputError, match="floating point"):
        core.quantize_per_tensor(torch.arange(4))


@pytest.mark.parametrize("bits", [1, 17, 0, 32])
def test_bad_bits(bits):
    with pytest.raises(InputError, match="bits"):
        core.quant_range(bits)
    with pytest.raises(InputError, match="bits"):
        core.quantize(np.ones(3, np.float32), 1.0, bits=bits)


def test_bad_axis():
    with pytest.raises(InputError, match="out of range"):
        core.quantize_per_channel(np.ones((2, 3), np.float32), axis=2)
    with pytest.raises(InputError, match="out of range"):
        core.quantize(np.ones((2, 3), np.float32), np.ones(3), axis=-3)


def test_bad_empty():
    with pytest.raises(InputError, match="empty"):
        core.quantize(np.ones((0, 3), np.float32), 1.0)
    with pytest.raises(InputError, match="empty"):
        core.quantize_per_tensor(torch.ones(0))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_bad_nan_inf(bad):
    x = np.array([1.0, bad], np.float32)
    with pytest.raises(InputError, match="NaN or Inf"):
        core.quantize(x, 1.0)
    with pytest.raises(InputError, match="NaN or Inf"):
        core.quantize_per_tensor(torch.tensor(x))


def test_bad_scale_and_shapes():
    with pytest.raises(InputError, match="positive"):
        core.quantize(np.ones(3, np.float32), 0.0)
    with pytest.raises(InputError, match="per-channel"):
        core.quantize(np.ones((2, 3), np.float32), np.ones(2), axis=1)
    with pytest.raises(InputError, match="divide"):
        core.quantize_per_group(np.ones((2, 6), np.float32), 4)
    with pytest.raises(InputError, match="rounding"):
        core.quantize(np.ones(3, np.float32), 1.0, rounding="up")
    with pytest.raises(InputError, match="integers"):
        core.dequantize(np.ones(3, np.float32), 1.0)


# ---------- GPU (run on the H200) ----------

@pytest.mark.gpu
def test_cuda_tensors_give_the_cpu_answer():
    from helpers.quant import fake_quant, fp8

    w = torch.randn(16, 33, generator=torch.Generator().manual_seed(0))
    q_cpu, s_cpu, _ = core.quantize_per_channel(w, axis=1)
    q_gpu, s_gpu, _ = core.quantize_per_channel(w.cuda(), axis=1)
    # The integers must be identical; the float scales may differ in the last bit (CUDA and CPU
    # reductions and divisions round independently), which the H200 run showed.
    assert q_gpu.is_cuda and torch.equal(q_gpu.cpu(), q_cpu)
    torch.testing.assert_close(s_gpu.cpu(), s_cpu, rtol=1e-6, atol=0)
    torch.testing.assert_close(core.roundtrip(w.cuda(), bits=4, group_size=11).cpu(),
                               core.roundtrip(w, bits=4, group_size=11), rtol=1e-6, atol=1e-7)
    x = w.cuda().requires_grad_()
    fake_quant.fake_quant_ste(x, 0.01).sum().backward()
    assert x.grad.is_cuda and set(x.grad.unique().tolist()) <= {0.0, 1.0}
    big = (w * 100).clamp(-448, 448)
    assert torch.equal(fp8.fp8_round(big.cuda()).cpu(), big.to(torch.float8_e4m3fn).float())


@pytest.mark.gpu
def test_gpu_copy_ratio_small():
    from helpers.quant import sizes

    r = sizes.measured_copy_ratio(1 << 20, repeats=3, device="cuda")
    assert r["fp32_over_int8_bytes"] == 4 and r["int8_ms"] > 0
