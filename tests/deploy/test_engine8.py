"""The 8-bit engine (helpers.deploy.engine8): exact integer epilogues, the fusion plan, and both models on the CPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.deploy.engine8 import convolution, encoder, formats, kernels, norm, resnet
from helpers.errors import InputError
from tests.support.tiny_models import tiny_bert


def test_int8_rounds_half_to_even_and_saturates():
    f = formats.get("int8")
    q = f.quantize(torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 1000.0, -1000.0]), 1.0)
    assert q.tolist() == [0, 2, 2, 0, -2, 127, -128]


def test_fp8_saturates_instead_of_overflowing():
    f = formats.get("fp8")
    q = f.quantize(torch.tensor([1e6, -1e6, 3.0]), 1.0)
    assert q.float().tolist() == [448.0, -448.0, 3.0]


def test_unknown_format_is_one_clear_error():
    with pytest.raises(InputError, match="fp8, int8"):
        formats.get("int4")


def _int8_case(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-128, 128, (33, 64), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (24, 64), generator=g, dtype=torch.int8)
    scale = torch.rand(24, generator=g) * 1e-3
    return a, w, scale, torch.randn(24, generator=g), torch.randn(33, 24, generator=g).half()


def test_int8_gemm_requantize_is_bit_exact_with_integer_arithmetic():
    a, w, scale, bias, _ = _int8_case()
    q = kernels.gemm(a, w, scale, bias=bias, act="relu", out=("int8", 0.01))
    acc = a.long() @ w.long().t()  # exact in int64
    y = torch.relu(acc.to(torch.int32).float() * scale + bias)
    expect = torch.clamp(torch.round(y * formats.get("int8").inverse(0.01)), -128, 127).to(torch.int8)
    assert torch.equal(q, expect)


def test_epilogue_order_adds_the_residual_before_the_activation():
    a, w, scale, bias, res = _int8_case(1)
    y = kernels.gemm(a, w, scale, bias=bias, residual=res, act="relu", fp16=True)
    expect = torch.relu((a.long() @ w.long().t()).float() * scale + bias + res.float()).half()
    assert torch.equal(y, expect)
    wrong = (torch.relu((a.long() @ w.long().t()).float() * scale + bias) + res.float()).half()
    assert not torch.equal(y, wrong)  # the other order would differ: the test can fail


def test_conv_reference_is_the_convolution_of_the_codes():
    f = formats.get("int8")
    g = torch.Generator().manual_seed(2)
    x = torch.randint(-20, 20, (2, 5, 6, 8), generator=g, dtype=torch.int8)
    w = torch.randint(-20, 20, (4, 3, 3, 8), generator=g, dtype=torch.int8)
    y = convolution.conv(x, w, torch.ones(4), stride=2, pad=1, fp16=True)
    ref = nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), w.permute(0, 3, 1, 2).float(), stride=2, padding=1)
    assert torch.equal(y, ref.permute(0, 2, 3, 1).half())  # exact sums, rounded once to FP16
    assert f.kind == 2


def test_conv_rejects_mismatched_channels():
    x = torch.zeros(1, 4, 4, 8, dtype=torch.int8)
    with pytest.raises(InputError, match="same C"):
        convolution.conv(x, torch.zeros(2, 1, 1, 4, dtype=torch.int8), torch.ones(2))


def test_gemm_rejects_float_inputs_with_the_fix():
    with pytest.raises(InputError, match="quantize"):
        kernels.gemm(torch.zeros(2, 4), torch.zeros(3, 4), torch.ones(3))


def test_fusion_plan_of_one_layer():
    m, calib, _ = tiny_bert()
    eng = encoder.build(m, calib, "fp8")
    plan = encoder.plan(eng)
    assert [r["kernel"] for r in plan] == ["gemm", "attention", "quantize", "gemm", "layernorm", "gemm", "gemm",
                                          "layernorm"]
    ffn1 = plan[5]
    assert "GELU" in ffn1["fused"] and "quantize" in ffn1["fused"] and ffn1["writes"].startswith("FP8")
    assert "residual" in plan[3]["fused"] and "residual" in plan[6]["fused"]
    assert plan[0]["N x K"] == "192 x 64"  # q, k and v in one GEMM


@pytest.mark.parametrize("fmt,tol", [("fp8", 0.08), ("int8", 0.05)])
def test_encoder_engine_tracks_the_float_model(fmt, tol):
    m, calib, inputs = tiny_bert()
    with torch.no_grad():
        ref_x, _ = m(inputs["input_ids"])
        x, _ = encoder.build(m, calib, fmt)(inputs["input_ids"])
    rel = ((x.float() - ref_x).norm() / ref_x.norm()).item()
    assert rel < tol, f"{fmt} engine is {rel:.3f} away from FP32"


def test_gemms_are_tuned_with_the_epilogues_the_forward_runs(monkeypatch):
    """The tuner's BERT_EPILOGUES (per BERT-base shape, in BERT_SHAPES order: qkv, out, ffn1, ffn2) are what each
    GEMM of the engine's forward fuses: a configuration tuned without its GELU or residual read is a different one."""
    from helpers.chapters.ch09_deployment import engine_tune as et

    m, calib, inputs = tiny_bert()
    eng = encoder.build(m, calib, "fp8")
    seen, real = [], kernels.gemm

    def spy(a, w, scale, **kw):
        seen.append({"act": kw.get("act", "none"), "residual": kw.get("residual") is not None,
                     "codes": kw.get("out") is not None})
        return real(a, w, scale, **kw)
    monkeypatch.setattr(kernels, "gemm", spy)
    with torch.no_grad():
        eng(inputs["input_ids"])
    want = [{"act": ep.get("act", "none"), "residual": bool(ep.get("residual")), "codes": bool(ep.get("codes"))}
            for ep in (et.BERT_EPILOGUES[s] for s in et.BERT_SHAPES)]
    assert seen == want * len(eng.layers)


def test_unknown_model_is_refused():
    with pytest.raises(InputError, match="LAYOUTS"):
        encoder.build(nn.Sequential(nn.Linear(4, 4)), [torch.zeros(1, 4)], "fp8")


def test_folded_convolution_equals_conv_then_batchnorm():
    torch.manual_seed(3)
    conv, bn = nn.Conv2d(3, 5, 3, padding=1, bias=False), nn.BatchNorm2d(5).eval()
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 2)
    x = torch.randn(2, 3, 6, 6)
    w, b = resnet.fold(conv, bn)
    with torch.no_grad():
        assert torch.allclose(nn.functional.conv2d(x, w, b, padding=1), bn(conv(x)), atol=1e-5)


def test_resnet_engine_on_a_small_1d_resnet():
    from helpers.models.cnn import ResNetSmall

    torch.manual_seed(4)
    m = ResNetSmall(1, 10, 1).eval()
    x = torch.randn(16, 1, 40)
    eng = resnet.build(m, [x], "int8")
    with torch.no_grad():
        ref, got = m(x), eng(x)
    assert got.shape == ref.shape
    assert ((got.float() - ref).norm() / ref.norm()).item() < 0.1
    assert resnet.conv_count(eng) == {"8-bit convolutions": 8, "with residual + ReLU fused": 3}


def test_the_tanh_gelu_stays_within_its_stated_distance_of_berts_erf_gelu():
    """The engine's 'gelu_tanh' epilogue (kernels.ACTS) against BERT's erf GELU: within 4.8e-4 everywhere."""
    x = torch.linspace(-20, 20, 400001, dtype=torch.float64)
    assert torch.allclose(kernels.activation(x, "gelu"), torch.nn.functional.gelu(x), atol=1e-6)  # PyTorch's erf GELU
    d = (kernels.activation(x, "gelu_tanh") - kernels.activation(x, "gelu")).abs()
    assert 4e-4 < d.max().item() < 4.8e-4 and abs(abs(x[d.argmax()].item()) - 2.7) < 0.1  # far below FP8's or INT8's step


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp8", "int8"])
@pytest.mark.parametrize("act", ["gelu", "gelu_tanh"])
def test_triton_kernels_match_their_references_on_a_gpu(fmt, act):
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    f = formats.get(fmt)
    a = f.quantize(torch.randn(300, 96), 3 / f.qmax)
    w, sw = formats.quantize_weight(torch.randn(200, 96) * 0.1, f)
    sc, b = (sw * 3 / f.qmax).float(), torch.randn(200)
    got = kernels.gemm(a.cuda(), w.cuda(), sc.cuda(), bias=b.cuda(), act=act, fp16=True, out=(fmt, 0.05))
    ref = kernels.gemm(a, w, sc, bias=b, act=act, fp16=True, out=(fmt, 0.05))
    assert torch.allclose(got[0].cpu().float(), ref[0].float(), rtol=2e-3, atol=2e-3)
    # The codes, at most one code from their reference. INT8 sums are exact, so the reference is the exact one. FP8
    # tensor cores sum with less than FP32's precision (an absolute error that can move a near-zero result by
    # several codes), so there the reference is the quantization of the kernel's own result: the epilogue's order.
    want = ref[1].float() if fmt == "int8" else f.saturate(got[0].cpu().float() * f.inverse(0.05)).float()
    d = (got[1].cpu().float() - want).abs()
    one_code = torch.ones_like(d) if fmt == "int8" else \
        torch.exp2(torch.floor(torch.log2(want.abs().clamp_min(2**-6))) - 3)  # e4m3's step: 2**(exponent - 3)
    assert (d <= one_code * (1 + 1e-6)).all(), f"{int((d > one_code).sum())} codes more than one step off"


def test_fp16_baseline_runs_the_same_plan_without_codes():
    m, calib, inputs = tiny_bert()
    with torch.no_grad():
        ref_x, _ = m(inputs["input_ids"])
        x, _ = encoder.build(m, calib, "fp16")(inputs["input_ids"])
    assert ((x.float() - ref_x).norm() / ref_x.norm()).item() < 0.01


def test_stored_engine_rows_round_trip_and_name_their_card():
    from helpers.chapters.ch09_deployment import engine

    r = engine.ENGINE_SPEED.run(stored=True)
    if not r.records:
        pytest.skip("no stored GPU run holds chapter 9's engine yet")
    assert not r.measured and r.device
    for key, table in engine.TABLES.items():
        rows = r[key]
        assert table.stored_rows(r.records) == rows  # what is shown is what is stored


def test_split_sentence_is_printed_from_the_rows(capsys):
    from helpers.chapters.ch09_deployment import engine_view

    class R:
        rows = {"parts": [{"model": "m", "path": "a", "part": "GEMM", "ms": 1.0},
                          {"model": "m", "path": "a", "part": "gaps", "ms": 0.5},
                          {"model": "m", "path": "b", "part": "GEMM", "ms": 1.2}]}

        def __getitem__(self, k):
            return self.rows[k]

        def where(self):
            return "here"

    text = engine_view.split_sentence(R(), "m", "b", "a")
    assert "1.500 ms (a)" in text and "1.200 ms (b)" in text and "GEMM -0.200 ms" in text and "gaps +0.500" in text


def test_the_time_split_is_read_against_the_fastest_fp16_path(monkeypatch, capsys):
    """Where the FP16 engine outruns FP16 compiled, it is the baseline the headline ratio divides by, so the split
    sentences are read against it, and the figures show both FP16 paths."""
    from helpers.chapters.ch09_deployment import engine_view

    fp16c, fp16e, fp8 = "fp16 compiled + CUDA graph", "fp16 engine + CUDA graph", "fp8 engine + CUDA graph"

    class R:
        def __init__(self, compiled, engine):
            self.rows = {"bert": [{"path": fp16c, "sequences/s": compiled}, {"path": fp16e, "sequences/s": engine},
                                  {"path": fp8, "sequences/s": 3.0}],
                         "parts": [{"model": "BERT-base", "path": p, "part": "GEMM", "ms": 1.0} for p in (fp16c, fp16e, fp8)]}

        def __getitem__(self, k):
            return self.rows[k]

        def where(self):
            return "here"
    drawn = []
    monkeypatch.setattr(engine_view, "figures", lambda r, model, paths, name: drawn.append(paths))
    for compiled, engine, base in ((2.0, 1.0, fp16c), (1.0, 2.0, fp16e)):
        assert engine_view.fastest_fp16(R(compiled, engine), "BERT-base") == base
        text, = engine_view.where_time_goes(R(compiled, engine), "BERT-base", (fp8,), "x")
        assert f"({base})" in text and f"against {base}" in text
    assert drawn == [(fp16c, fp8), (fp16c, fp16e, fp8)]


def test_the_accuracy_view_rounds_numbers_and_keeps_every_other_field():
    from helpers.chapters.ch09_deployment import engine_view

    row = {"model": "encoder_small", "format": "FP8", "drop (pts)": 0.123456, "spread": None, "n": 3}
    assert engine_view.accuracy_view([row]) == [{**row, "drop (pts)": 0.12}]


def test_accuracy_sentence_says_unresolved_when_the_interval_holds_the_budget(capsys):
    from helpers.chapters.ch09_deployment import engine_view
    from helpers.spread import Spread

    rows = [{"model": "m", "format": "FP8", "drop (pts)": 0.2, "spread": Spread(-0.3, 0.6, "b")},
            {"model": "m", "format": "INT8", "drop (pts)": 0.8, "spread": Spread(0.2, 1.4, "b")}]
    text = engine_view.accuracy_sentence(rows)
    assert text.startswith("1 of 2") and "0.8 points (INT8 on m)" in text and "1 cannot be told apart" in text


def test_attention_reads_the_packed_views_and_returns_tokens_by_features():
    from helpers.deploy.engine8 import attention

    qkv = torch.randn(2 * 5, 3 * 8).half()
    v5 = qkv.view(2, 5, 3, 2, 4)
    q, k, v = (v5[:, :, i].transpose(1, 2) for i in range(3))
    got = attention.attention(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert got.shape == (2, 5, 8) and torch.allclose(got.float(), ref.transpose(1, 2).reshape(2, 5, 8), atol=1e-3)


@pytest.mark.gpu
def test_attention_picks_a_fused_backend_by_measurement_and_agrees_with_the_math():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from helpers.deploy.engine8 import attention

    qkv = torch.randn(4 * 128, 3 * 768, device="cuda").half()
    v5 = qkv.view(4, 128, 3, 12, 64)
    q, k, v = (v5[:, :, i].transpose(1, 2) for i in range(3))
    got = attention.attention(q, k, v)
    assert list(attention.picked().values())[-1] in attention.BACKENDS
    ref = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float())
    assert torch.allclose(got.float(), ref.transpose(1, 2).reshape(4, 128, 768), atol=2e-3)


def test_a_residual_of_codes_is_read_as_codes_times_their_scale():
    a, w, scale, bias, _ = _int8_case(5)
    codes = torch.randint(-128, 128, (33, 24), generator=torch.Generator().manual_seed(6), dtype=torch.int8)
    got = kernels.gemm(a, w, scale, bias=bias, residual=codes, residual_scale=0.25, act="relu", fp16=True)
    same = kernels.gemm(a, w, scale, bias=bias, residual=(codes.float() * 0.25).half(), act="relu", fp16=True)
    assert torch.equal(got, same)  # a quarter times an integer below 128 is exact in FP16
    other = kernels.gemm(a, w, scale, bias=bias, residual=(codes.float() * 0.5).half(), act="relu", fp16=True)
    assert not torch.equal(got, other)  # the scale is applied, not ignored


@pytest.mark.parametrize("kind", ["codes without a scale", "FP16 with a scale", "float32"])
def test_a_residual_and_its_scale_must_agree(kind):
    a, w, scale, _, res = _int8_case()
    residual, rs = {"codes without a scale": (res.to(torch.int8), None), "FP16 with a scale": (res, 0.5),
                    "float32": (res.float(), None)}[kind]
    with pytest.raises(InputError, match="residual_scale"):
        kernels.gemm(a, w, scale, residual=residual, residual_scale=rs)


def test_a_1x1_convolution_runs_as_the_gemm_it_is():
    g = torch.Generator().manual_seed(7)
    x = torch.randint(-30, 30, (2, 5, 6, 16), generator=g, dtype=torch.int8)
    w = torch.randint(-30, 30, (8, 1, 1, 16), generator=g, dtype=torch.int8)
    c = resnet.QConv(w, torch.rand(8, generator=g) * 1e-2, torch.randn(8, generator=g), 0.1, (1, 1), (0, 0))
    res = torch.randn(2, 5, 6, 8, generator=g).half()
    kw = {"bias": c.bias, "residual": res, "act": "relu", "fp16": True, "out": ("int8", 0.05)}
    got = resnet._launch(x, c, None, kw)
    want = convolution.conv(x, w, c.scale, **kw)
    assert all(torch.equal(p, q) for p, q in zip(got, want)) and got[0].shape == (2, 5, 6, 8)


def test_resnet_blocks_cross_memory_in_8_bits(monkeypatch):
    """Identity skips read the block input's codes (with its scale) and only the last block writes FP16."""
    from helpers.models.cnn import ResNetSmall

    torch.manual_seed(4)
    m = ResNetSmall(1, 10, 1).eval()
    x = torch.randn(8, 1, 40)
    eng = resnet.build(m, [x], "int8")
    seen, real = [], convolution.conv

    def spy(inp, w, scale, **kw):
        r = kw.get("residual")
        seen.append({"residual": None if r is None else r.dtype, "residual_scale": kw.get("residual_scale"),
                     "fp16": kw.get("fp16"), "input": inp.dtype})
        return real(inp, w, scale, **kw)
    monkeypatch.setattr(convolution, "conv", spy)
    with torch.no_grad():
        eng(x)
    assert all(s["input"] == torch.int8 for s in seen)
    lasts = [s for s in seen if s["residual"] is not None]
    assert len(lasts) == len(eng.blocks)
    identity = [s for s, b in zip(lasts, eng.blocks) if b.skip is None]
    assert identity and all(s["residual"] == torch.int8 and s["residual_scale"] == b.convs[0].s_in
                            for s, b in zip(lasts, eng.blocks) if b.skip is None)  # the block input's own scale
    assert [s["fp16"] for s in lasts] == [False] * (len(lasts) - 1) + [True]


def test_layernorm_finishes_a_library_gemms_epilogue():
    f = formats.get("fp8")
    g = torch.Generator().manual_seed(8)
    a, w = f.quantize(torch.randn(12, 32, generator=g), 0.02), f.quantize(torch.randn(16, 32, generator=g), 0.02)
    scale, bias = torch.rand(16, generator=g) * 1e-3, torch.randn(16, generator=g)
    res, gamma, beta = torch.randn(12, 16, generator=g).half(), torch.rand(16, generator=g) + 0.5, torch.randn(16, generator=g)
    own = norm.layernorm(kernels.gemm(a, w, scale, bias=bias, residual=res), gamma, beta, 1e-5, None)
    lt = norm.layernorm(norm.lt_gemm(a, w), gamma, beta, 1e-5, None, col_scale=scale, col_bias=bias, residual=res)
    assert norm.lt_gemm(a, w).dtype == torch.bfloat16
    assert (own.float() - lt.float()).abs().max() < 0.05  # BF16 sums against the exact ones, then normalized
    with pytest.raises(InputError, match="col_scale"):
        norm.layernorm(norm.lt_gemm(a, w), gamma, beta, 1e-5, None)
    with pytest.raises(InputError, match="FP8"):
        norm.lt_gemm(a.to(torch.int8), w.to(torch.int8))


def test_the_encoder_takes_cublaslt_only_for_the_shapes_the_tuner_gave_it(monkeypatch):
    m, calib, inputs = tiny_bert()
    eng = encoder.build(m, calib, "fp8")
    with torch.no_grad():
        own = eng(inputs["input_ids"])[0]
    lay, t = eng.layers[0], inputs["input_ids"].numel()
    eng.configs = {(t, lay.ffn2.w.shape[0], lay.ffn2.w.shape[1]): norm.CUBLASLT}
    calls, real = [], norm.lt_gemm
    monkeypatch.setattr(norm, "lt_gemm", lambda a, w, **kw: calls.append(tuple(w.shape)) or real(a, w, **kw))
    with torch.no_grad():
        lt = eng(inputs["input_ids"])[0]
    assert calls == [tuple(lay.ffn2.w.shape)] * len(eng.layers)  # ffn2 only, once per layer
    assert ((lt.float() - own.float()).norm() / own.float().norm()).item() < 0.02


def test_tuned_rows_name_the_library_and_the_layernorm_timed_with_it():
    from helpers.chapters.ch09_deployment import engine_tune as et

    shape = (4096, 768, 3072)
    rows = [{"shape": shape, "config": (1, 2), "tflops": 500.0},
            {"shape": shape, "config": (1, 2), "with": "LayerNorm", "tflops": 400.0},
            {"shape": shape, "config": norm.CUBLASLT, "with": "LayerNorm", "tflops": 450.0}]
    got = et.tuned_rows("fp8", {shape: norm.CUBLASLT}, rows)
    assert got == [{"format": "fp8", "shape": "4096x768x3072 + LayerNorm", "TFLOP/s": 450.0, "config": ["cuBLASLt"]}]
    assert et.tuned_rows("fp8", {shape: (1, 2)}, rows)[0]["TFLOP/s"] == 400.0  # timed as the forward runs it


def test_dispatch_takes_cublaslt_only_where_its_pair_was_faster():
    from helpers.chapters.ch09_deployment import engine_tune as et

    s1, s2 = (4096, 768, 768), (4096, 768, 3072)
    rows = [{"shape": s1, "config": (1,), "with": "LayerNorm", "us": 10.0},
            {"shape": s1, "config": norm.CUBLASLT, "with": "LayerNorm", "us": 11.0},
            {"shape": s2, "config": (2,), "with": "LayerNorm", "us": 30.0},
            {"shape": s2, "config": norm.CUBLASLT, "with": "LayerNorm", "us": 25.0}]
    assert et.dispatch({s1: (1,), s2: (2,)}, rows) == {s1: (1,), s2: norm.CUBLASLT}
    fast = [{"shape": s1, "config": norm.CUBLASLT_FAST, "with": "LayerNorm", "us": 10.5},
            {"shape": s2, "config": norm.CUBLASLT_FAST, "with": "LayerNorm", "us": 24.0}]
    assert et.dispatch({s1: (1,), s2: (2,)}, rows + fast) == {s1: (1,), s2: norm.CUBLASLT_FAST}  # the fastest
    with pytest.raises(InputError, match="lt_gemm"):  # the library's name is no tile configuration
        kernels.gemm(*_int8_case()[:3], config=norm.CUBLASLT)


def test_fast_accumulation_competes_only_where_its_sums_stay_near_the_exact_ones(monkeypatch, capsys):
    from helpers.chapters.ch09_deployment import engine_tune as et

    f = formats.get("fp8")
    a, w = f.quantize(torch.randn(64, 96), 0.01), f.quantize(torch.randn(32, 96), 0.01)
    assert et.fast_agrees(a, w)  # on the CPU both are exact
    real = norm.lt_gemm
    terms = a.float().abs() @ w.float().abs().t()
    exact = real(a, w).float()
    for off, ok in ((0.5, True), (2.0, False)):  # an error of half, then twice, the tolerance on top of BF16 rounding
        wrong = exact + (exact.abs() * 2.0**-7 + off * norm.FAST_TOLERANCE * terms) * torch.sign(exact)
        monkeypatch.setattr(norm, "lt_gemm", lambda a, w, fast=False, y=wrong: y.clone() if fast else real(a, w))
        assert et.fast_agrees(a, w) == ok
    assert "left out" in capsys.readouterr().out
    assert torch.equal(real(a, w, fast=True), real(a, w))  # the CPU reference sums exactly either way


def test_the_encoder_asks_cublaslt_for_fast_accumulation_where_the_tuner_chose_it(monkeypatch):
    m, calib, inputs = tiny_bert()
    eng = encoder.build(m, calib, "fp8")
    lay, t = eng.layers[0], inputs["input_ids"].numel()
    eng.configs = {(t, lay.qkv.w.shape[0], lay.qkv.w.shape[1]): norm.CUBLASLT_FAST,
                   (t, lay.ffn2.w.shape[0], lay.ffn2.w.shape[1]): norm.CUBLASLT}
    calls, real = [], norm.lt_gemm
    monkeypatch.setattr(norm, "lt_gemm",
                        lambda a, w, *sb, fast=False: calls.append((tuple(w.shape), fast)) or real(a, w, *sb))
    with torch.no_grad():
        eng(inputs["input_ids"])
    assert calls[:2] == [(tuple(lay.qkv.w.shape), True), (tuple(lay.ffn2.w.shape), False)]


def test_library_configs_send_every_gemm_cublaslt_can_run_there_with_fast_accumulation(monkeypatch):
    m, calib, inputs = tiny_bert()
    eng = encoder.build(m, calib, "fp8")
    with torch.no_grad():
        want = eng(inputs["input_ids"])
    eng.configs = encoder.library_configs(eng, inputs["input_ids"].numel())
    calls, real = [], norm.lt_gemm
    monkeypatch.setattr(norm, "lt_gemm",
                        lambda a, w, *sb, fast=False: calls.append((tuple(w.shape), fast)) or real(a, w, *sb))
    with torch.no_grad():
        got = eng(inputs["input_ids"])
    lays = eng.layers
    assert calls == [(tuple(lin.w.shape), True) for lay in lays for lin in (lay.qkv, lay.out, lay.ffn2)]
    for g, w in zip(got, want):  # the same exact arithmetic on the CPU, BF16 where cuBLASLt writes it
        assert torch.allclose(g.float(), w.float(), atol=0.05, rtol=0.05)


@pytest.mark.gpu
def test_the_layernorm_that_finishes_cublaslts_epilogue_matches_its_reference_on_a_gpu():
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    f = formats.get("fp8")
    a, w = f.quantize(torch.randn(256, 128), 0.01), f.quantize(torch.randn(96, 128), 0.01)
    sc, b, res = torch.rand(96) * 1e-3, torch.randn(96), torch.randn(256, 96).half()
    g, be = torch.rand(96) + 0.5, torch.randn(96)
    kw = {"col_scale": sc, "col_bias": b, "residual": res}
    ref = norm.layernorm(norm.lt_gemm(a, w), g, be, 1e-5, ("fp8", 0.05), **kw)
    got = norm.layernorm(norm.lt_gemm(a.cuda(), w.cuda()), g.cuda(), be.cuda(), 1e-5, ("fp8", 0.05),
                         **{k: v.cuda() for k, v in kw.items()})
    assert (got[0].cpu().float() - ref[0].float()).abs().max() < 0.05  # BF16 sums, tensor-core accumulation order


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["fp8", "int8"])
def test_a_residual_of_codes_matches_its_reference_on_a_gpu(fmt):
    """The Triton GEMM and convolution read an 8-bit skip as codes times their scale, as the references do."""
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    f = formats.get(fmt)
    g = torch.Generator().manual_seed(9)
    x = f.quantize(torch.randn(2, 9, 9, 64, generator=g), 3 / f.qmax)
    skip = f.quantize(torch.randn(2, 9, 9, 32, generator=g), 3 / f.qmax)
    for r, stride, pad in ((3, 1, 1), (1, 1, 0)):  # an implicit-GEMM convolution, and a 1x1 run as a GEMM
        w, sw = formats.quantize_weight(torch.randn(32, r, r, 64, generator=g) * 0.1, f)
        c = resnet.QConv(w, (sw * 3 / f.qmax).float(), torch.randn(32, generator=g), 0.1, (stride, stride), (pad, pad))
        kw = {"bias": c.bias, "residual": skip, "residual_scale": 0.02, "act": "relu", "fp16": True}
        ref = resnet._launch(x, c, None, kw)
        cu = resnet.QConv(c.w.cuda(), c.scale.cuda(), c.bias.cuda(), c.s_in, c.stride, c.pad)
        got = resnet._launch(x.cuda(), cu, None, {**kw, "bias": cu.bias, "residual": skip.cuda()})
        # INT8 sums are exact; FP8 tensor cores sum with less than FP32's precision: an error against max |y|
        err = (got.cpu().float() - ref.float()).abs().max() / ref.float().abs().max()
        assert err <= (1e-3 if fmt == "int8" else 5e-3), (fmt, r, err.item())


def test_compiling_ahead_changes_nothing_without_triton_on_the_cpu():
    a, w = torch.randint(-127, 128, (8, 16), dtype=torch.int8), torch.randint(-127, 128, (4, 16), dtype=torch.int8)
    scale = torch.full((4,), 0.01)
    with kernels.compiling_ahead() as ahead:
        y = kernels.gemm(a, w, scale)  # a CPU tensor: the exact reference runs, inside the block too
    assert not ahead or kernels.triton is not None
    assert torch.equal(y, kernels.gemm(a, w, scale))


@pytest.mark.gpu
def test_kernels_compiled_ahead_run_afterwards_and_a_config_that_does_not_fit_still_raises_when_run():
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    g = torch.Generator().manual_seed(8)
    a, w = (torch.randint(-127, 128, s, generator=g, dtype=torch.int8) for s in ((256, 128), (192, 128)))
    scale, cfg, huge = torch.rand(192, generator=g) * 1e-3, (64, 64, 64, 8, 4, 3), (256, 256, 256, 8, 4, 8)
    want = kernels.gemm(a, w, scale, config=cfg)
    with kernels.compiling_ahead() as ahead:
        kernels.gemm(a.cuda(), w.cuda(), scale.cuda(), config=cfg)
        kernels.gemm(a.cuda(), w.cuda(), scale.cuda(), config=huge)  # needs more shared memory than any GPU has
    assert not kernels._ahead["on"]
    got = kernels.gemm(a.cuda(), w.cuda(), scale.cuda(), config=cfg)
    assert torch.allclose(got.cpu().float(), want.float(), rtol=1e-3, atol=1e-3), "the kernel compiled ahead misruns"
    if ahead:
        with pytest.raises(Exception):
            kernels.gemm(a.cuda(), w.cuda(), scale.cuda(), config=huge)
            torch.cuda.synchronize()


def test_the_context_codes_on_the_cpu_are_sdpa_then_quantize_and_the_fused_kernel_says_what_it_takes():
    from helpers.deploy.engine8 import attention, norm

    g = torch.Generator().manual_seed(9)
    qkv = torch.randn(2 * 10, 3 * 32, generator=g).half()
    got = attention.attention_codes(qkv, 2, 2, ("int8", 0.01))
    want = norm.quantize(attention.attention(*attention.packed(qkv, 2, 2)).reshape(20, 32), ("int8", 0.01))
    assert got.dtype == torch.int8 and torch.equal(got, want)
    assert attention.fits(128, 64) and not attention.fits(512, 64) and not attention.fits(128, 48)
    with pytest.raises(InputError, match="attention_codes"):
        attention.fused_codes(qkv, 2, 2, ("int8", 0.01))
    off = want.clone()
    off[3, 5] = (int(off[3, 5]) + 2) if int(off[3, 5]) < 100 else int(off[3, 5]) - 2  # two codes away: rejected
    terms = attention.weighted_abs(qkv, 2, 2)
    assert attention.agrees(want, want, ("int8", 0.01), terms) and not attention.agrees(off, want, ("int8", 0.01),
                                                                                        terms * 0)


@pytest.mark.gpu
@pytest.mark.parametrize("fmt,dtype,batch,seq", [("fp8", torch.bfloat16, 4, 128), ("int8", torch.float16, 3, 100),
                                                  ("fp8", torch.float16, 2, 200)])
def test_the_fused_attention_writes_the_codes_of_the_float_attention_on_a_gpu(fmt, dtype, batch, seq):
    from helpers.deploy.engine8 import attention

    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    heads, hd = 4, 64
    g = torch.Generator().manual_seed(10)
    qkv = (torch.randn(batch * seq, 3 * heads * hd, generator=g) * 2).to(dtype)
    f = formats.get(fmt)
    scale = 3.0 / f.qmax
    ref = attention.attention(*attention.packed(qkv.float(), batch, heads)).float().reshape(batch * seq, -1)
    want, terms = f.quantize(ref, scale), attention.weighted_abs(qkv.float(), batch, heads)
    for bm in attention.FUSED.values():
        got = attention.fused_codes(qkv.cuda(), batch, heads, (fmt, scale), bm).cpu()
        err = (got.float() - want.float()).abs().max().item() * scale
        assert attention.agrees(got, want, (fmt, scale), terms), f"BLOCK_M {bm}: max error {err:.4g}"
    codes = attention.attention_codes(qkv.cuda(), batch, heads, (fmt, scale))
    assert codes.dtype == f.dtype and codes.shape == (batch * seq, heads * hd)
    assert list(attention.codes_picked().values())[-1] in (attention.UNFUSED, *attention.FUSED)


def _gemm_rows(ratios: dict[str, float]) -> list[dict]:
    """GEMM-table rows at two shapes whose rounds give each GEMM its planted ratio over FP16 cuBLAS."""
    rows = []
    for shape, t16 in (("4096x768x768", 10e-6), ("4096x768x3072", 30e-6)):
        for name, r in {"fp16 cuBLAS": 1.0, **ratios}.items():
            rows.append({"shape": shape, "GEMM": name, "rounds_s": [t16 / r * (1 + i / 100) for i in range(5)]})
    return rows


def test_the_gemm_headline_is_the_fastest_8_bit_gemm_summed_over_the_shapes():
    from helpers.chapters.ch09_deployment import engine

    rows = _gemm_rows({"fp8 cuBLASLt": 1.3, "fp8 engine": 1.1, "int8 cuBLASLt (int32 out)": 2.0})
    best, (v, s) = engine.gemm_speedup(rows)
    assert best == "fp8 cuBLASLt" and abs(v - 1.3) < 1e-9  # INT32-out sums are no finished GEMM: left out
    assert s is not None and s.lo <= v <= s.hi
    assert engine.gemm_speedup(_gemm_rows({"fp16 engine": 0.6})) is None


class _Shown:
    def __init__(self, rows):
        self.rows = rows

    def __getitem__(self, table):
        return self.rows

    def where(self):
        return "planted rows"


@pytest.mark.parametrize("lib, verdict, blames_library", [(1.3, "not met", True), (1.7, "met", False)])
def test_the_gemm_sentence_says_whether_the_library_sets_the_ceiling(lib, verdict, blames_library, capsys):
    from helpers.chapters.ch09_deployment import engine_view

    text = engine_view.gemm_sentence(_Shown(_gemm_rows({"fp8 cuBLASLt": lib, "int8 engine": 1.1})), 1.6)
    assert f"fastest 8-bit GEMM is fp8 cuBLASLt at {lib:.2f}" in text and f"target 1.6: {verdict})" in text
    assert ("NVIDIA's own library; the engine's fastest, int8 engine, reaches 1.10" in text) == blames_library
    assert "最快的 8 位 GEMM" in capsys.readouterr().out


class _Stored:
    def __init__(self, **tables):
        self.tables = tables

    def __getitem__(self, table):
        return self.tables[table]

    def where(self):
        return "planted rows"


def test_the_dispatch_sentence_says_what_the_forward_runs_and_where_the_table_differs(capsys):
    """Stored rows keep a library configuration as a one-item list, the engine's own as its tile numbers."""
    from helpers.chapters.ch09_deployment import engine_view

    gemm = [{"shape": sh, "GEMM": g, "× FP16 cuBLAS": v} for sh, g, v in (
        ("4096x768x768", "fp8 cuBLASLt", 1.0), ("4096x768x768", "fp8 cuBLASLt (fast accumulation)", 1.4),
        ("4096x768x768", "fp8 engine", 1.1), ("4096x768x768", "int8 engine", 1.9),  # not an FP8 row
        ("4096x768x3072", "fp8 cuBLASLt", 1.2), ("4096x768x3072", "fp8 engine", 1.5))]
    tuned = [{"format": "fp8", "shape": "4096x768x768 + LayerNorm", "config": ["cuBLASLt"]},
             {"format": "fp8", "shape": "4096x768x3072", "config": [128, 128, 64, 8, 4, 4]},
             {"format": "int8", "shape": "4096x768x3072", "config": ["cuBLASLt"]},  # another format: left out
             {"format": "fp8", "shape": "conv 1x1/1 256x7x7x512 -> 2048", "config": [128, 64, 64, 8, 4, 4]}]
    text = engine_view.dispatch_sentence(_Stored(gemm=gemm, tuned=tuned))
    assert "4096×768×768 + LayerNorm: fp8 cuBLASLt; 4096×768×3072: fp8 engine." in text
    assert "fastest FP8 row at 1 of 2 shapes" in text and "conv" not in text
    fast = [{**tuned[0], "config": ["cuBLASLt, fast accumulation"]}, tuned[1]]
    assert "at 2 of 2 shapes" in engine_view.dispatch_sentence(_Stored(gemm=gemm, tuned=fast))
    assert "1/2 个形状" in capsys.readouterr().out
    assert engine_view.dispatch_sentence(_Stored(gemm=gemm, tuned=[])).startswith("No FP8 GEMM choices")


def test_the_measurement_prints_where_its_time_went(monkeypatch, capsys):
    from helpers.chapters.ch09_deployment import engine

    monkeypatch.setattr(engine, "_measure_bert", lambda batch, seq, torchao, clock: clock.start("tuning") or {})
    assert engine.measure(stages=("bert",)) == {}
    assert capsys.readouterr().out.startswith("Measuring the engine on this GPU took 0 s: tuning 0 s")


class _Card(_Shown):
    device, source = "NVIDIA H100 80GB HBM3", "h100"


def test_the_roof_sentence_puts_the_gemms_under_roofs_measured_apart(monkeypatch, capsys):
    from helpers.chapters.ch02_gpu_architecture import roofs
    from helpers.chapters.ch09_deployment import engine_view

    rows = [{"shape": "4096x768x3072", "GEMM": g, "µs": us, "rounds_s": [us * 1e-6] * 3}
            for g, us in (("fp16 cuBLAS", 30.0), ("fp8 cuBLASLt", 15.0))]
    peaks = {"fp16": (1000.0, "chapter 2's FP16 GEMM, H100, d"), "fp8": (2000.0, "chapter 2's FP8 GEMM, H100, d")}
    monkeypatch.setattr(roofs, "compute_roofs", lambda precs, source, device: {p: peaks[p] for p in precs})
    monkeypatch.setattr(roofs, "gpu_memory_roof", lambda source, device: (3000.0, "the copy of chapter 2, H100, d"))
    # 19.33 GFLOP: 19.3 µs at 1000 TFLOP/s, 9.7 µs at 2000; 36.2 MB (FP16) and 21.2 MB (FP8) at 3000 GB/s: 12.1, 7.1
    text = engine_view.roof_sentence(_Card(rows), 1.6)
    assert "at least 19.3 µs in FP16 and 9.7 µs in FP8: 2.00× if both ran at their roofs" in text
    assert "math binds both formats at every shape" in text and "runs 2.00× FP16's" in text
    assert "FP16 cuBLAS reaches 64% of its bound and fp8 cuBLASLt 64% of its own, which makes its 2.00×" in text
    assert "the target 1.6 would need fp8 cuBLASLt at 52% of its bound" in text
    assert "where its math binds (9.7 µs against 7.1 µs)" in text and "屋顶" in capsys.readouterr().out
    monkeypatch.setattr(roofs, "gpu_memory_roof", lambda source, device: (100.0, "a slow copy"))
    assert "the bytes bind 4096×768×3072 (FP16), 4096×768×3072 (FP8)" in engine_view.roof_sentence(_Card(rows), 1.6)
    monkeypatch.setattr(roofs, "gpu_memory_roof", lambda source, device: None)
    assert engine_view.roof_sentence(_Card(rows), 1.6).startswith("No chapter-2 GEMM and copy of this card")
