"""The encoder engine's 8-bit skip (TensorRT's INT8 residual): every residual add reads the codes its sublayer's
GEMM already read, and only the model's output is written in FP16."""

from __future__ import annotations

import pytest
import torch

from helpers.deploy.engine8 import encoder, formats, kernels, norm
from helpers.errors import InputError
from tests.support.tiny_models import tiny_bert


@pytest.mark.parametrize("library", [False, True])
@pytest.mark.parametrize("fmt", ["fp8", "int8"])
def test_each_residual_is_the_codes_its_sublayers_gemm_read(monkeypatch, fmt, library):
    m, calib, inputs = tiny_bert()
    eng = encoder.build(m, calib, fmt, skip8=True)
    if library and fmt == "fp8":  # the cuBLASLt path: its LayerNorm adds the residual
        t, lay = inputs["input_ids"].numel(), eng.layers[0]
        eng.configs = {(t, lay.out.w.shape[0], lay.out.w.shape[1]): norm.CUBLASLT,
                       (t, lay.ffn2.w.shape[0], lay.ffn2.w.shape[1]): norm.CUBLASLT}
    reads, adds, writes = [], [], []
    real_gemm, real_norm = kernels.gemm, norm.layernorm

    def gemm(a, w, scale, **kw):
        reads.append(a)
        if kw.get("residual") is not None:
            adds.append((kw["residual"], kw.get("residual_scale")))
        return real_gemm(a, w, scale, **kw)

    def layernorm(x, *args, **kw):
        if kw.get("residual") is not None:
            adds.append((kw["residual"], kw.get("residual_scale")))
        writes.append(kw.get("fp16", True))
        return real_norm(x, *args, **kw)
    monkeypatch.setattr(kernels, "gemm", gemm)
    monkeypatch.setattr(norm, "layernorm", layernorm)
    monkeypatch.setattr(norm, "lt_gemm", lambda a, w, **kw: reads.append(a) or torch.zeros(a.shape[0], w.shape[0],
                                                                                           dtype=torch.bfloat16))
    with torch.no_grad():
        eng(inputs["input_ids"])
    assert len(adds) == 2 * len(eng.layers)
    for i, lay in enumerate(eng.layers):
        qkv_in, ffn1_in = reads[4 * i], reads[4 * i + 2]
        (r1, s1), (r2, s2) = adds[2 * i], adds[2 * i + 1]
        assert r1 is qkv_in and s1 == lay.qkv.s_in  # the attention block's input, as its QKV GEMM read it
        assert r2 is ffn1_in and s2 == lay.ffn1.s_in  # the feed-forward block's input, as ffn1 read it
        assert r1.dtype == formats.get(fmt).dtype
    assert writes == [False] * (len(writes) - 1) + [True]  # only the model's output is written in FP16


@pytest.mark.parametrize("fmt,tol", [("fp8", 0.1), ("int8", 0.06)])
def test_the_8bit_skip_tracks_the_float_model(fmt, tol):
    m, calib, inputs = tiny_bert()
    with torch.no_grad():
        ref_x, _ = m(inputs["input_ids"])
        x, _ = encoder.build(m, calib, fmt, skip8=True)(inputs["input_ids"])
    rel = ((x.float() - ref_x).norm() / ref_x.norm()).item()
    assert rel < tol, f"{fmt} engine with the 8-bit skip is {rel:.3f} away from FP32"


def test_the_fp16_baseline_has_no_8bit_skip():
    m, calib, _ = tiny_bert()
    assert not encoder.build(m, calib, "fp16", skip8=True).skip8


def test_a_layernorm_residual_of_codes_is_codes_times_their_scale():
    f = formats.get("int8")
    g = torch.Generator().manual_seed(5)
    x, r = torch.randn(6, 32, generator=g).half(), f.quantize(torch.randn(6, 32, generator=g), 0.03)
    gamma, beta = torch.rand(32, generator=g) + 0.5, torch.randn(32, generator=g)
    q = norm.layernorm(x, gamma, beta, 1e-5, ("int8", 0.02), residual=r, residual_scale=0.03, fp16=False)
    y, q16 = norm.layernorm(x, gamma, beta, 1e-5, ("int8", 0.02), residual=(r.float() * 0.03).half())
    assert q.dtype == torch.int8 and (q.float() - q16.float()).abs().max() <= 1  # FP16 rounding of the residual
    with pytest.raises(InputError, match="residual_scale"):
        norm.layernorm(x, gamma, beta, 1e-5, None, residual=r)
    with pytest.raises(InputError, match="out="):
        norm.layernorm(x, gamma, beta, 1e-5, None, fp16=False)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp8", "int8"])
def test_the_layernorm_with_an_8bit_residual_matches_its_reference_on_a_gpu(fmt):
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    f = formats.get(fmt)
    g = torch.Generator().manual_seed(6)
    sums = (torch.randn(256, 96, generator=g) * 30).to(torch.bfloat16)
    r = f.quantize(torch.randn(256, 96, generator=g), 3 / f.qmax)
    kw = {"col_scale": torch.rand(96, generator=g) * 1e-2, "col_bias": torch.randn(96, generator=g), "residual": r}
    gamma, beta = torch.rand(96, generator=g) + 0.5, torch.randn(96, generator=g)
    ref = norm.layernorm(sums, gamma, beta, 1e-12, (fmt, 0.05), residual_scale=0.03, fp16=False, **kw)
    got = norm.layernorm(sums.cuda(), gamma.cuda(), beta.cuda(), 1e-12, (fmt, 0.05), residual_scale=0.03, fp16=False,
                         **{k: v.cuda() for k, v in kw.items()})
    step = 1 if fmt == "int8" else 0.0
    diff = (got.cpu().float() - ref.float()).abs()
    if fmt == "int8":
        assert diff.max() <= step  # one code at a rounding tie
    else:  # one e4m3 step of the value: 2**-3 of its power of two
        assert (diff <= ref.float().abs().clamp_min(2 ** -6) * 2 ** -3 + 1e-6).all()


def test_a_gemm_with_only_its_bias_runs_in_cublaslt_scaled_per_channel_where_tuned(monkeypatch):
    """QKV takes cuBLASLt's row-wise scaled GEMM with its bias (BF16 out) only where the tuner gave it that shape; the
    result is the engine's own GEMM's within BF16 rounding, and attention then reads BF16."""
    m, calib, inputs = tiny_bert()
    eng = encoder.build(m, calib, "fp8")
    with torch.no_grad():
        own = eng(inputs["input_ids"])[0]
    lay, t = eng.layers[0], inputs["input_ids"].numel()
    eng.configs = {(t, lay.qkv.w.shape[0], lay.qkv.w.shape[1]): norm.CUBLASLT}
    calls, real = [], norm.lt_gemm
    monkeypatch.setattr(norm, "lt_gemm",
                        lambda a, w, *sb, **kw: calls.append((tuple(w.shape), len(sb))) or real(a, w, *sb, **kw))
    with torch.no_grad():
        lt = eng(inputs["input_ids"])[0]
    assert calls == [(tuple(lay.qkv.w.shape), 2)] * len(eng.layers)  # QKV only, scaled, with its bias
    assert ((lt.float() - own.float()).norm() / own.float().norm()).item() < 0.03
    a, w = eng.layers[0].qkv.w[:5].float(), eng.layers[0].qkv.w
    got = real(w[:5], w, lay.qkv.scale, lay.qkv.bias_bf16)
    want = (a @ w.float().t()) * lay.qkv.scale + lay.qkv.bias
    assert got.dtype == torch.bfloat16 and torch.allclose(got.float(), want, rtol=2 ** -7, atol=1e-2)
    with pytest.raises(InputError, match="together"):
        norm.lt_gemm(w[:5], w, lay.qkv.scale)


def test_the_tuner_labels_cublaslt_rows_with_what_was_timed_beside_the_gemm():
    from helpers.chapters.ch09_deployment import engine_tune as et

    s = (4096, 2304, 768)
    rows = [{"shape": s, "config": (1,), "with": "bias", "us": 27.0, "tflops": 540.0},
            {"shape": s, "config": norm.CUBLASLT, "with": "bias", "us": 23.0, "tflops": 630.0}]
    assert et.dispatch({s: (1,)}, rows) == {s: norm.CUBLASLT}
    assert et.tuned_rows("fp8", {s: norm.CUBLASLT}, rows)[0]["shape"] == "4096x2304x768"  # no LayerNorm timed with it


@pytest.mark.gpu
@pytest.mark.parametrize("fast", [False, True])
def test_cublaslts_scaled_gemm_with_its_bias_matches_its_reference_on_a_gpu(fast):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    f = formats.get("fp8")
    g = torch.Generator().manual_seed(7)
    a, w = f.quantize(torch.randn(256, 128, generator=g), 0.01), f.quantize(torch.randn(192, 128, generator=g), 0.01)
    scale, bias = torch.rand(192, generator=g) * 1e-3, torch.randn(192, generator=g).to(torch.bfloat16)
    ref = norm.lt_gemm(a, w, scale, bias).float()
    got = norm.lt_gemm(a.cuda(), w.cuda(), scale.cuda(), bias.cuda(), fast=fast).cpu().float()
    # BF16 out, and FP8 tensor cores sum with less than FP32's precision: an error against max |y|, as for the convs
    assert (got - ref).abs().max() / ref.abs().max() <= 5e-3


@pytest.mark.gpu
def test_fast_accumulation_passes_the_gate_at_bert_bases_longest_sums_and_a_bf16_accumulator_fails_it_on_a_gpu(
        monkeypatch):
    """The tuner's gate (``engine_tune.fast_agrees``) on the GPU at FFN2's shape (K = 3072, the longest sums): Hopper's
    fast accumulation passes, and an accumulator that keeps its running sums in BF16 (8 significant bits, rounded
    after every 16 terms) does not, so the gate tells a coarse accumulator from Hopper's."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from helpers.chapters.ch09_deployment import engine_tune as et

    a, w = et.codes((4096, 3072), "fp8", 1), et.codes((768, 3072), "fp8", 2)
    assert et.fast_agrees(a, w)
    real = norm.lt_gemm

    def bf16_accumulator(a, w, fast=False):
        if not fast:
            return real(a, w)
        acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.float64, device=a.device)
        for k in range(0, a.shape[1], 16):
            m, e = torch.frexp(acc + (a[:, k:k + 16].float() @ w[:, k:k + 16].float().t()).double())
            acc = torch.ldexp(torch.round(m * 2**8) / 2**8, e)
        return acc.to(torch.bfloat16)

    monkeypatch.setattr(norm, "lt_gemm", bf16_accumulator)
    assert not et.fast_agrees(a, w)


@pytest.mark.gpu
@pytest.mark.parametrize("lib", [norm.CUBLASLT, norm.CUBLASLT_FAST])
def test_the_tuned_forward_with_cublaslt_gemms_agrees_with_the_untuned_engine_and_its_twin_on_a_gpu(lib):
    """What notebook 09 times: the FP8 engine with cuBLASLt for QKV, out-proj and ffn2 (as a tuner may pick), on the
    GPU, gives the output of the engine's own kernels and of its CPU twin within 8-bit rounding."""
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    m, calib, inputs = tiny_bert()
    with torch.no_grad():
        twin = encoder.build(m, calib, "fp8")(inputs["input_ids"])[0].float()
        m = m.cuda()
        eng = encoder.build(m, [{k: v.cuda() for k, v in c.items()} for c in calib], "fp8")
        m.half()
        ids = inputs["input_ids"].cuda()
        own = eng(ids)[0].float().cpu()
        eng.configs = encoder.library_configs(eng, ids.numel(), lib)
        tuned = eng(ids)[0].float().cpu()
    assert torch.isfinite(tuned).all()
    for name, ref in (("the untuned engine", own), ("the CPU twin", twin)):
        rel = ((tuned - ref).norm() / ref.norm()).item()
        assert rel < 0.05, f"the cuBLASLt-tuned forward is {rel:.3f} away from {name}"
