"""The GEMV kernels' layout and reference math (CPU), and the Triton kernels themselves (GPU)."""

from __future__ import annotations

import pytest
import torch

from helpers.errors import InputError, NoGPUError
from helpers.kernels import triton_gemv as tg
from helpers.quant import act_quant, weight_only


@pytest.mark.parametrize("bits", [8, 4])
def test_kernel_layout_round_trips_and_puts_code_i_of_word_j_at_element_16i_plus_j(bits):
    lo, hi = (-128, 128) if bits == 8 else (-8, 8)
    per = 32 // bits
    q = torch.randint(lo, hi, (3, per * 16 * 2), dtype=torch.int16)
    words = tg.gemv_words(q, bits)
    assert words.dtype == torch.int32 and words.shape == (3, q.shape[1] // per)
    assert torch.equal(tg.codes_from_words(words, bits), q)
    w = int(words[0, 5].item()) & 0xFFFFFFFF
    code = lambda i: ((w >> (bits * i)) & ((1 << bits) - 1)) - (1 << (bits - 1))  # noqa: E731
    assert [code(i) for i in range(per)] == [int(q[0, 16 * i + 5]) for i in range(per)]


def test_reference_is_the_dequantized_product_with_the_fusions():
    w, x, r = torch.randn(64, 256) * 0.1, torch.randn(256).half(), torch.randn(32).half()
    w4 = weight_only.quantize_w4(w, 128)
    gw = tg.prepare_w4(w4)  # the kernels read FP16 group scales
    dq = weight_only.unpack_int4(w4.packed).float() * w4.scale.half().float().repeat_interleave(128, dim=1)
    assert torch.allclose(tg.reference(x, gw).float(), (dq @ x.float()).half().float())
    v = x.float() * torch.rsqrt(x.float().pow(2).mean() + 1e-5)
    y = dq @ v
    want = (torch.nn.functional.silu(y[:32]) * y[32:] + r.float()).half()
    assert torch.equal(tg.reference(x, gw, norm_eps=1e-5, glu=True, residual=r), want)
    w8 = weight_only.quantize_w8(w)
    assert torch.allclose(tg.reference(x, tg.prepare_w8(w8)).float(), (w8.dequantize() @ x.float()).half().float())


def test_bad_kernel_inputs_are_named():
    with pytest.raises(InputError, match="groups of 128"):
        tg.prepare_w4(weight_only.quantize_w4(torch.randn(4, 256), 64))
    gw = tg.prepare_fp16(torch.randn(8, 64))
    with pytest.raises(InputError, match="batch 1"):
        tg.gemv(torch.randn(2, 64).half(), gw)
    with pytest.raises(InputError, match="tile"):
        tg.gemv(torch.randn(64).half(), gw, config=tg.Config(block_n=3))


@pytest.mark.skipif(tg.available() and torch.cuda.is_available(), reason="a GPU with Triton is present")
def test_without_a_gpu_the_kernels_say_so():
    with pytest.raises(NoGPUError, match="needs an NVIDIA GPU"):
        tg.gemv(torch.randn(64).half(), tg.prepare_fp16(torch.randn(8, 64)))


@pytest.mark.gpu
@pytest.mark.parametrize("n, k, block_k", [(256, 512, 512), (128, 384, 256), (4096, 11008, 1024)])
@pytest.mark.parametrize("math", [0, 1, 2])
def test_triton_gemv_matches_its_reference(n, k, block_k, math):
    g = torch.Generator(device="cuda").manual_seed(n + k)
    w = torch.randn(n, k, device="cuda", generator=g) * 0.05
    x = torch.randn(k, device="cuda", generator=g).half()
    r = torch.randn(n // 2, device="cuda", generator=g).half()
    for gw in (tg.prepare_fp16(w), tg.prepare_w8(weight_only.quantize_w8(w)), tg.prepare_w4(weight_only.quantize_w4(w, 128))):
        cfg = tg.Config(block_n=4, block_k=block_k, math=math)
        for kw in ({}, {"norm_eps": 1e-5}, {"norm_eps": 1e-5, "glu": True, "residual": r}):
            got, want = tg.gemv(x, gw, config=cfg, **kw).float(), tg.reference(x, gw, **kw).float()
            assert float((got - want).abs().max() / want.abs().max()) < 5e-3, (gw.kind, kw)


@pytest.mark.gpu
@pytest.mark.parametrize("m", [1, 5, 40, 300])
def test_triton_weight_only_gemm_and_row_quantization(m):
    from helpers.kernels import triton_wo_gemm as tw

    w, a = torch.randn(256, 512, device="cuda") * 0.05, torch.randn(m, 512, device="cuda").half()
    for qw in (weight_only.quantize_w8(w), weight_only.quantize_w4(w, 128)):
        got = tw.wo_gemm(a, tw.prepare(qw)).float()
        want = a.float() @ qw.dequantize().T
        assert float((got - want).abs().max() / want.abs().max()) < 5e-3
    q, s = tw.quantize_rows(a, "int8")
    q_ref, s_ref = act_quant.quantize_per_token(a.float())
    assert torch.allclose(s, s_ref, rtol=1e-6) and int((q.int() - q_ref.int()).abs().max()) <= 1
    f8, s8 = tw.quantize_rows(a, "fp8")
    ref = (a.float() / s8).to(torch.float8_e4m3fn).float()
    off = f8.float() != ref  # Triton's division may round the last bit differently: then one E4M3 step apart
    assert float(off.float().mean()) < 0.01 and bool(((f8.float() - ref).abs() <= ref.abs() / 8 + 1e-3)[off].all())
