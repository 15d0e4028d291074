"""Chapter 12's schemes against integer/float references and against PyTorch's own implementations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.errors import InputError
from helpers.quant import act_quant, core, fp8, kv_cache, smoothing, weight_only


def _w(n: int = 24, k: int = 64, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, k, generator=g) * torch.logspace(-2, 0, k)[torch.randperm(k, generator=g)]


def test_w8_codes_and_scales_equal_the_core_per_channel_quantizer():
    w = _w()
    q8 = weight_only.quantize_w8(w)
    q, scale, _ = core.quantize_per_channel(w.numpy(), axis=0, bits=8)
    assert np.array_equal(q8.q.numpy(), q)
    assert np.allclose(q8.scale.numpy(), scale, rtol=1e-7)


@pytest.mark.parametrize("group", [8, 16, 64])
def test_w4_codes_equal_the_core_per_group_quantizer(group):
    w = _w()
    q4 = weight_only.quantize_w4(w, group)
    q, scale, _ = core.quantize_per_group(w.numpy(), group, axis=1, bits=4)
    assert np.array_equal(weight_only.unpack_int4(q4.packed).numpy(), q)
    assert np.allclose(q4.scale.numpy(), scale, rtol=1e-7)
    assert q4.nbytes == w.numel() // 2 + 2 * w.numel() // group


def test_packing_equals_the_course_numpy_packing_and_round_trips_every_code():
    q = torch.tensor([list(range(-8, 8)) + list(range(7, -9, -1))], dtype=torch.int8)
    packed = weight_only.pack_int4(q)
    assert np.array_equal(packed.numpy(), fp8.pack_int4(q.numpy()))
    assert packed[0, 0].item() == (0x8 | (0x9 << 4))  # -8 low nibble, -7 high nibble
    assert torch.equal(weight_only.unpack_int4(packed), q)


def test_w4_matches_pytorch_tinygemm_on_the_cpu():
    from helpers.chapters.ch12_language_models.gemv_bench import tinygemm_linear, tinygemm_weight

    w, x = _w(32, 256), torch.randn(3, 256)
    w4 = weight_only.quantize_w4(w, 128)
    got = tinygemm_linear(x, *tinygemm_weight(w4), group=128)
    want = weight_only.w4a16_linear(x, w4)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-4)


def test_int_matmul_is_exact():
    g = torch.Generator().manual_seed(1)
    a = torch.randint(-127, 128, (5, 96), dtype=torch.int8, generator=g)
    b = torch.randint(-127, 128, (7, 96), dtype=torch.int8, generator=g)
    assert torch.equal(act_quant.int_matmul(a, b).long(), a.long() @ b.long().T)


def test_w8a8_is_the_integer_product_rescaled_and_per_token_scales_are_independent():
    w8 = weight_only.quantize_w8(_w(16, 64))
    x = torch.randn(4, 64)
    q, s = act_quant.quantize_per_token(x)
    want = (q.long() @ w8.q.long().T).double() * s.double() * w8.scale.double()[None, :]
    assert torch.allclose(act_quant.w8a8_linear(x, w8).double(), want, rtol=1e-6)
    spiked = x.clone()
    spiked[0, 5] = 1000.0  # a huge value in token 0 only
    same = act_quant.w8a8_linear(spiked, w8)[1:], act_quant.w8a8_linear(x, w8)[1:]
    assert torch.equal(*same)  # per token: the other tokens are untouched
    tensor = act_quant.w8a8_linear(spiked, w8, "per_tensor")[1:]
    assert not torch.allclose(tensor, same[1], rtol=1e-3)  # one scale for all: every token loses resolution


def test_w8a8_error_is_of_the_same_size_as_torch_dynamic_quantization():
    from torch.ao.quantization import quantize_dynamic

    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32, bias=False)
    x = torch.randn(16, 64)
    ref = lin(x)
    theirs = quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear}, dtype=torch.qint8)(x)
    mine = act_quant.w8a8_linear(x, weight_only.quantize_w8(lin.weight.detach()))
    err = lambda y: float((y - ref).abs().mean() / ref.abs().mean())  # noqa: E731
    assert err(mine) < 0.02 and err(theirs) < 0.03
    assert float((mine - theirs).abs().mean() / ref.abs().mean()) < 0.03


def test_fp8_values_equal_the_course_e4m3_rounding():
    x = torch.randn(8, 32) * 3
    v, s = act_quant.fp8_quantize(x)
    assert torch.equal(v, torch.from_numpy(fp8.fp8_round((x / s).numpy(), "e4m3")))
    assert float(v.abs().max()) == 448.0


def test_smoothing_keeps_the_product_and_alpha_moves_the_range():
    x, w = torch.randn(10, 8), torch.randn(6, 8)
    x[:, 2] *= 50
    s = smoothing.smoothquant_scales(x.abs().amax(0), w.abs().amax(0), 0.5)
    assert torch.allclose((x / s) @ (w * s).T, x @ w.T, rtol=1e-4, atol=1e-4)
    flat = (x / smoothing.smoothquant_scales(x.abs().amax(0), w.abs().amax(0), 1.0)).abs().amax(0)
    assert torch.allclose(flat, torch.ones(8))  # α = 1: every activation channel's range becomes 1
    assert float((x / s).abs().amax(0).max() / (x / s).abs().amax(0).median()) < 10
    with pytest.raises(InputError, match="alpha"):
        smoothing.smoothquant_scales(x.abs().amax(0), w.abs().amax(0), 1.5)


def test_awq_search_never_loses_to_rounding_and_protects_an_outlier_channel():
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(256, 64, generator=g), torch.randn(32, 64, generator=g) * 0.1
    x[:, 7] *= 30
    fq = lambda t: weight_only.quantize_w4(t, 32).dequantize()  # noqa: E731
    alpha, s, errors = smoothing.awq_search(x, [w], fq)
    assert errors[0] == pytest.approx(float((x @ fq(w).T - x @ w.T).pow(2).mean()), rel=1e-5)  # α = 0 is RTN
    assert min(errors) == errors[[i / 10 for i in range(11)].index(alpha)] and alpha > 0
    assert min(errors) < 0.8 * errors[0]


def test_kv_cache_round_trips():
    t = torch.randn(2, 4, 16, 32)
    for kind, qmax in (("int8", 127), ("int4", 7)):
        err = (kv_cache.fake_quant_kv(t, kind) - t).abs()
        assert bool((err <= t.abs().amax(-1, keepdim=True) / qmax / 2 + 1e-6).all())
    assert kv_cache.kv_bytes_per_token(32, 4096, "fp16") == 2 * 32 * 4096 * 2
    assert kv_cache.kv_bytes_per_token(32, 4096, "int8") == 2 * 32 * (4096 + 2 * 32)
    with pytest.raises(InputError, match="kind"):
        kv_cache.fake_quant_kv(t, "int3")


@pytest.mark.parametrize("bad, match", [
    (lambda: weight_only.quantize_w4(torch.randn(4, 48), 32), "group_size"),
    (lambda: weight_only.quantize_w8(torch.randint(0, 3, (4, 4))), "floating-point"),
    (lambda: weight_only.pack_int4(torch.full((2, 2), 9, dtype=torch.int8)), "-8..7"),
    (lambda: weight_only.unpack_int4(torch.zeros(2, 2, dtype=torch.int8)), "uint8"),
    (lambda: act_quant.quantize_per_token(torch.randn(3)), "2-D"),
])
def test_bad_inputs_name_the_problem(bad, match):
    with pytest.raises(InputError, match=match):
        bad()
