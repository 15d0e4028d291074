"""Chapter 10: 2:4 pruning math, unstructured masks, layouts (INT8 1x1 conv exactness), FP8 vs INT8 error."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.chapters.ch10_beyond_int8 import layouts, sparsity
from helpers.errors import InputError


def test_mask_24_keeps_two_largest_per_group():
    w = torch.tensor([[1.0, -5.0, 0.5, 3.0, 0.1, 0.2, -0.3, 0.4]])
    m = sparsity.mask_24(w)
    assert m.tolist() == [[False, True, False, True, False, False, True, True]]
    assert sparsity.is_24(w * m)
    assert not sparsity.is_24(w)


def test_mask_24_on_random_conv_weight_is_exactly_half():
    w = torch.randn(16, 8, 3, 4)
    m = sparsity.mask_24(w)
    assert m.shape == w.shape and m.float().mean().item() == 0.5
    assert sparsity.is_24(w * m)


def test_mask_24_rejects_bad_shapes():
    with pytest.raises(InputError, match="multiple of 4"):
        sparsity.mask_24(torch.randn(4, 6))
    with pytest.raises(InputError, match=">= 2 dims"):
        sparsity.mask_24(torch.randn(8))
    with pytest.raises(InputError, match="floating point"):
        sparsity.mask_24(torch.ones(4, 8, dtype=torch.int32))


def test_unstructured_mask_is_not_24():
    torch.manual_seed(0)
    w = torch.randn(64, 64)
    m = sparsity.mask_unstructured(w, 0.5)
    assert abs(m.float().mean().item() - 0.5) < 0.01
    assert not sparsity.is_24(w * m)  # scattered zeros: no hardware can skip them as 2:4
    with pytest.raises(InputError, match="sparsity"):
        sparsity.mask_unstructured(w, 1.0)


def test_prune_and_masked_fine_tune_keep_zeros():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    masks = sparsity.prune(model, "2:4")
    assert set(masks) == {"0", "2"} and sparsity.sparsity_of(model, masks) == 0.5
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    losses = sparsity.fine_tune(model, masks, [(x, y)], steps=5)
    assert len(losses) == 5 and all(np.isfinite(losses))
    assert sparsity.is_24(model[0].weight) and sparsity.is_24(model[2].weight)
    assert sparsity.sparsity_of(model, masks) == 0.5


def test_dense_matmul_with_zeros_gives_same_result_shape_cpu():
    r = sparsity.dense_with_zeros_times(64, 64, 64, repeats=2)
    assert r["dense ms"] > 0 and r["50% zeros ms"] > 0


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_int8_pointwise_conv_is_exact(layout):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (2, 16, 5, 5), dtype=torch.int8, generator=g)
    w = torch.randint(-128, 128, (24, 16), dtype=torch.int8, generator=g)
    ref = torch.einsum("nchw,kc->nkhw", x.int(), w.int())
    xi = x.contiguous(memory_format=torch.channels_last) if layout == "NHWC" else x
    got = layouts.int8_pointwise_conv(xi, w, layout)
    assert got.dtype == torch.int32 and torch.equal(got, ref)


def test_int8_pointwise_conv_errors():
    x = torch.zeros(2, 16, 5, 5, dtype=torch.int8)
    with pytest.raises(InputError, match="channels_last"):
        layouts.int8_pointwise_conv(x, torch.zeros(8, 16, dtype=torch.int8), "NHWC")
    with pytest.raises(InputError, match="int8"):
        layouts.int8_pointwise_conv(x.float(), torch.zeros(8, 16), "NCHW")
    with pytest.raises(InputError, match="same C"):
        layouts.int8_pointwise_conv(x, torch.zeros(8, 8, dtype=torch.int8), "NCHW")


def test_conv_layout_times_cpu_and_errors():
    r = layouts.conv_layout_times(batch=1, channels=8, size=8, repeats=2)
    assert r["NCHW ms"] > 0 and r["NHWC ms"] > 0
    with pytest.raises(InputError, match="float32"):
        layouts.conv_layout_times("cpu", "float16")
    q = layouts.quantized_conv_layout_times(batch=1, channels=8, size=8, repeats=2)
    assert q["output is NHWC for NCHW input"]  # fbgemm computes in NHWC whatever it is given


def test_fp8_beats_int8_only_with_outliers():
    from helpers.chapters.ch10_beyond_int8 import fp8_study

    rows = {r["tensor"]: r for r in fp8_study.error_table(fp8_study.sample_tensors(1 << 14))}
    assert rows["gaussian weights"]["INT8 SQNR dB"] > rows["gaussian weights"]["FP8 E4M3 SQNR dB"]
    assert rows["activations + 0.1% outliers"]["best"].startswith("FP8")
    for r in rows.values():  # E4M3 has one more mantissa bit than E5M2: ~6 dB better
        assert r["FP8 E4M3 SQNR dB"] > r["FP8 E5M2 SQNR dB"] + 3


def test_fp8_errors_reject_bad_input():
    from helpers.chapters.ch10_beyond_int8 import fp8_study

    with pytest.raises(InputError):
        fp8_study.errors(np.zeros(8, dtype=np.float32))
    with pytest.raises(InputError):
        fp8_study.errors(np.array([1.0, np.nan], dtype=np.float32))
    with pytest.raises(InputError):
        fp8_study.error_table({})


@pytest.mark.gpu
def test_gpu_semi_structured_and_layouts():
    r = sparsity.semi_structured_speed(1024, 1024, 1024, repeats=3)
    assert "skipped" in r or r["2:4 ms"] > 0
    r8 = sparsity.semi_structured_speed(1024, 1024, 1024, dtype="int8", repeats=3)
    assert "skipped" in r8 or r8["2:4 ms"] > 0
    assert layouts.conv_layout_times("cuda", "float16", repeats=3)["NHWC ms"] > 0
    x = torch.randint(-128, 128, (2, 16, 5, 5), dtype=torch.int8, device="cuda")
    w = torch.randint(-128, 128, (24, 16), dtype=torch.int8, device="cuda")
    ref = torch.einsum("nchw,kc->nkhw", x.cpu().int(), w.cpu().int())
    assert torch.equal(layouts.int8_pointwise_conv(x, w, "NCHW").cpu(), ref)
    assert layouts.int8_pointwise_layout_times(batch=4, channels=64, size=16, repeats=3)["NHWC ms"] > 0


@pytest.mark.gpu
def test_gpu_fp8_speed_or_skip():
    from helpers.chapters.ch10_beyond_int8 import fp8_study

    ok, why = fp8_study.fp8_support()
    if not ok:
        assert why
        return
    rows = fp8_study.gemm_speed((1024,), repeats=3)
    assert rows[0]["FP8 TFLOP/s"] > 0
    r = fp8_study.bert_speed(batch=2, seq_len=64, repeats=3)
    assert r["FP8 (_scaled_mm) cosine"] > 0.9 and r["INT8 (_int_mm) cosine"] > 0.9


def test_mixed_precision_figure_passes_the_figure_rules(tmp_path, monkeypatch):
    import sys

    import matplotlib.pyplot as plt

    from helpers.chapters.ch10_beyond_int8 import mixed_precision

    from helpers import plots

    from helpers.figure_check import figure_problems

    monkeypatch.setenv(plots.FIGURES_VAR, str(tmp_path))
    acc = [{"kept in FP": k, "accuracy %": a} for k, a in ((0, 67.0), (1, 90.0), (2, 98.0))]
    speed = [{"kept in FP": k, "speed vs float": s} for k, s in ((0, 1.4), (1, 1.3), (2, 1.2))]
    fig = mixed_precision.plot_tradeoff(acc, speed, fp32_acc=98.5)
    assert figure_problems(fig) == []
    assert (tmp_path / "ch10_mixed_precision.png").exists()
    with pytest.raises(InputError):
        mixed_precision.plot_tradeoff([], None, fp32_acc=1.0)
    plt.close("all")
