"""Chapter 5: FP8/INT4 emulation, error metrics, fake-quant STE and size accounting."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.errors import InputError
from helpers.quant import fake_quant, fp8, metrics, sizes


@pytest.mark.parametrize("fmt,tdtype", [("e4m3", torch.float8_e4m3fn), ("e5m2", torch.float8_e5m2)])
def test_fp8_round_equals_torch_cast(fmt, tdtype):
    x = torch.tensor(np.random.default_rng(0).normal(size=20000) * 50, dtype=torch.float32)
    x = x.clamp(-fp8.FORMATS[fmt].max_value, fp8.FORMATS[fmt].max_value)
    assert torch.equal(fp8.fp8_round(x, fmt), x.to(tdtype).float())


def test_fp8_saturates_and_grid():
    assert fp8.fp8_round(np.array([1e6, -1e6], np.float32), "e4m3").tolist() == [448.0, -448.0]
    assert len(fp8.fp8_grid("e4m3")) == 127 and fp8.fp8_grid("e4m3")[-1] == 448
    assert len(fp8.fp8_grid("e5m2")) == 124
    g = fp8.fp8_grid("e4m3")
    assert np.array_equal(fp8.fp8_round(g.astype(np.float32)), g.astype(np.float32))
    with pytest.raises(InputError, match="fmt"):
        fp8.fp8_round(np.ones(2, np.float32), "e3m4")


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(-8, 7), min_size=1, max_size=16).filter(lambda v: len(v) % 2 == 0))
def test_int4_pack_roundtrip(values):
    q = np.array(values, np.int8)
    p = fp8.pack_int4(q)
    assert p.dtype == np.uint8 and p.size == q.size // 2
    assert np.array_equal(fp8.unpack_int4(p), q)


def test_int4_bad_input():
    with pytest.raises(InputError, match="-8..7"):
        fp8.pack_int4(np.array([8, 0], np.int8))
    with pytest.raises(InputError, match="even"):
        fp8.pack_int4(np.array([1, 2, 3], np.int8))


def test_metrics():
    x = np.array([1.0, 2.0, 3.0])
    assert metrics.mse(x, x) == 0 and metrics.sqnr_db(x, x) == float("inf")
    assert metrics.sqnr_db(x, x * 1.1) == pytest.approx(20.0)
    assert metrics.cosine(x, 2 * x) == pytest.approx(1.0)
    assert metrics.cosine(x, -x) == pytest.approx(-1.0)
    with pytest.raises(InputError, match="same shape"):
        metrics.mse(x, x[:2])
    with pytest.raises(InputError, match="empty"):
        metrics.mse(np.ones(0), np.ones(0))


def test_sqnr_grows_about_6db_per_bit():
    from helpers.quant.core import roundtrip

    x = np.random.default_rng(0).uniform(-1, 1, 100000).astype(np.float32)
    db = [metrics.sqnr_db(x, roundtrip(x, bits=b)) for b in (6, 7, 8)]
    assert 5.5 < db[1] - db[0] < 6.5 and 5.5 < db[2] - db[1] < 6.5


@pytest.mark.parametrize("clip", [True, False])
def test_ste_forward_and_gradient(clip):
    x = torch.linspace(-2, 2, 9, requires_grad=True)
    y = fake_quant.fake_quant_ste(x, 1 / 127, clip_gradient=clip)
    y.sum().backward()
    from helpers.quant.core import fake_quantize

    assert torch.equal(y.detach(), fake_quantize(x.detach(), 1 / 127))
    inside = (x.detach().abs() <= 1).float()
    assert torch.equal(x.grad, inside if clip else torch.ones(9))


def test_ste_per_channel_and_errors():
    w = torch.randn(3, 4, requires_grad=True)
    s = w.detach().abs().amax(1) / 127
    fake_quant.fake_quant_ste(w, s, axis=0).sum().backward()
    assert torch.equal(w.grad, torch.ones(3, 4))
    with pytest.raises(InputError, match="torch tensors"):
        fake_quant.fake_quant_ste(np.ones(3, np.float32), 1.0)


def test_sizes_four_times_smaller():
    shapes = {"fc1": (256, 1024), "fc2": (10, 256)}
    fp32 = sum(sizes.weight_bytes(shapes, "fp32").values())
    int8 = sum(sizes.weight_bytes(shapes, "int8").values())
    assert fp32 == 4 * (256 * 1024 + 2560)
    assert int8 == 256 * 1024 + 2560 + 4 * (256 + 10)  # plus one fp32 scale per output channel
    rows = sizes.model_size_table(shapes, activation_numel=1000)
    assert rows[0]["fp32_over_this"] == 1 and 3.9 < rows[1]["fp32_over_this"] < 4
    with pytest.raises(InputError, match="dtype"):
        sizes.tensor_bytes(10, "int3")


def test_measured_copy_ratio_counts_bytes():
    r = sizes.measured_copy_ratio(1 << 16, repeats=3)
    assert r["fp32_over_int8_bytes"] == 4 and r["fp32_ms"] > 0
