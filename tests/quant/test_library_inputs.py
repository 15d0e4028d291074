"""Bad input to chapter 12's quantization library is a clear one-line error, and a NaN is never hidden (issue 26).

One table of bad inputs (NaN, inf, negative, zero, fractional or bool sizes, wrong dtype or rank, numpy
where torch is expected, empty, mismatched shapes, unsupported bits / group sizes / schemes, options a
scheme ignores) to helpers.quant.{weight_only, act_quant, smoothing, kv_cache},
helpers.model_quant.lm_quant and helpers.bench.Timing: each row names a fragment of the fix its
InputError must say. Then NaN propagation, and property tests over the spaces of sizes and values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from helpers import bench
from helpers.errors import InputError
from helpers.model_quant import lm_quant
from helpers.models.tiny_lm import LMConfig, TinyLM
from helpers.quant import act_quant as aq
from helpers.quant import kv_cache as kv
from helpers.quant import smoothing as sm
from helpers.quant import weight_only as wo
from tests.support.errors import assert_one_line_error

NAN = float("nan")
W = torch.linspace(-1, 1, 32).reshape(4, 8)
X = torch.linspace(-2, 2, 24).reshape(3, 8)
W8, W4 = wo.quantize_w8(W), wo.quantize_w4(W, 4)
KV = torch.linspace(-1, 1, 32).reshape(1, 2, 2, 8)
CFG = LMConfig(d_model=16, n_heads=2, d_ff=32, n_layers=1, vocab=32, ctx=8)
FQ = lambda w: wo.quantize_w4(w, 4).dequantize()  # noqa: E731


def _with(t: torch.Tensor, value: float, at: tuple = (0, 1)) -> torch.Tensor:
    """A copy of t with one element set to value."""
    t = t.clone()
    t[at] = value
    return t


def _lm() -> TinyLM:
    """A tiny untrained TinyLM."""
    torch.manual_seed(0)
    return TinyLM(CFG).eval()


def _calib() -> torch.Tensor:
    """Two token windows (batch, ctx + 1) of the tiny model's vocabulary."""
    return torch.arange(2 * (CFG.ctx + 1)).reshape(2, CFG.ctx + 1) % CFG.vocab


# (id, call, fragment of the fix the one-line InputError must name)
ROWS = [
    # weight_only
    ("w8-numpy", lambda: wo.quantize_w8(W.numpy()), "torch.from_numpy"),
    ("w8-int", lambda: wo.quantize_w8(W.long()), ".float()"),
    ("w8-1d", lambda: wo.quantize_w8(W[0]), "Reshape it"),
    ("w8-empty-k", lambda: wo.quantize_w8(torch.zeros(4, 0)), "at least one element"),
    ("w8-nan", lambda: wo.quantize_w8(_with(W, NAN)), "nan_to_num"),
    ("w8-inf", lambda: wo.quantize_w8(_with(W, math.inf)), "nan_to_num"),
    ("w4-group-3", lambda: wo.quantize_w4(W, 3), "even divisor of K=8"),
    ("w4-group-bool", lambda: wo.quantize_w4(W, True), "even divisor"),
    ("w4-group-float", lambda: wo.quantize_w4(W, 4.0), "even divisor"),
    ("w4-group-0", lambda: wo.group_scales(W, 0), "even divisor"),
    ("pack-numpy", lambda: wo.pack_int4(np.zeros(4, np.int8)), "torch.from_numpy"),
    ("pack-list", lambda: wo.pack_int4([1, 2]), "torch.as_tensor"),
    ("pack-0d", lambda: wo.pack_int4(torch.tensor(1, dtype=torch.int8)), "pad the last axis"),
    ("pack-odd", lambda: wo.pack_int4(torch.zeros(3, dtype=torch.int8)), "pad the last axis"),
    ("pack-empty", lambda: wo.pack_int4(torch.zeros(0, dtype=torch.int8)), "at least one element"),
    ("pack-range", lambda: wo.pack_int4(torch.tensor([9, 0], dtype=torch.int8)), "-8..7"),
    ("unpack-0d", lambda: wo.unpack_int4(torch.tensor(1, dtype=torch.uint8)), "output of pack_int4"),
    ("unpack-int8", lambda: wo.unpack_int4(torch.zeros(2, dtype=torch.int8)), "output of pack_int4"),
    ("w8-weight-by-hand", lambda: wo.W8Weight(torch.zeros(4, 8), torch.ones(4)), "quantize_w8(w)"),
    ("w8-weight-scales", lambda: wo.W8Weight(W8.q, torch.ones(3)), "quantize_w8(w)"),
    ("w4-weight-scales", lambda: wo.W4Weight(W4.packed, torch.ones(4, 3), 4), "quantize_w4(w, group_size)"),
    ("w4-weight-group", lambda: wo.W4Weight(W4.packed, W4.scale, 3), "quantize_w4(w, group_size)"),
    ("w8a16-k-mismatch", lambda: wo.w8a16_linear(torch.ones(2, 7), W8), "not its output"),
    ("w8a16-numpy-x", lambda: wo.w8a16_linear(np.ones((2, 8), np.float32), W8), "torch.from_numpy"),
    ("w8a16-int-x", lambda: wo.w8a16_linear(torch.ones(2, 8, dtype=torch.long), W8), ".float()"),
    ("w8a16-empty-x", lambda: wo.w8a16_linear(torch.ones(0, 8), W8), "at least one element"),
    ("w4a16-w8-weight", lambda: wo.w4a16_linear(X, W8), "quantize_w4(weight)"),
    ("w8a16-raw-weight", lambda: wo.w8a16_linear(X, W), "quantize_w8(weight)"),
    # act_quant
    ("per-token-1d", lambda: aq.quantize_per_token(X[0]), "2-D"),
    ("per-token-empty", lambda: aq.quantize_per_token(torch.zeros(0, 8), "per_tensor"), "at least one"),
    ("per-token-empty-k", lambda: aq.quantize_per_token(torch.zeros(2, 0)), "at least one"),
    ("per-token-mode", lambda: aq.quantize_per_token(X, "per_channel"), "'per_token', 'per_tensor'"),
    ("per-token-numpy", lambda: aq.quantize_per_token(X.numpy()), "torch.from_numpy"),
    ("int-mm-1d", lambda: aq.int_matmul(torch.zeros(4, dtype=torch.int8), torch.zeros(4, dtype=torch.int8)),
     "quantize both first"),
    ("int-mm-float", lambda: aq.int_matmul(X, W), "quantize both first"),
    ("int-mm-k", lambda: aq.int_matmul(W8.q[:, :4], W8.q), "quantize both first"),
    ("int-mm-numpy", lambda: aq.int_matmul(np.zeros((2, 4), np.int8), W8.q), "torch.from_numpy"),
    ("w8a8-k-mismatch", lambda: aq.w8a8_linear(torch.ones(2, 7), W8), "not its output"),
    ("w8a8-scalar-x", lambda: aq.w8a8_linear(torch.tensor(1.0), W8), "Reshape it"),
    ("w8a8-float-weight", lambda: aq.w8a8_linear(X, W), "quantize_w8(weight)"),
    ("w8a8-mode", lambda: aq.w8a8_linear(X, W8, "per_row"), "'per_token', 'per_tensor'"),
    ("fp8-dim", lambda: aq.fp8_quantize(X, 5), "use a value in -2..1"),
    ("fp8-dim-float", lambda: aq.fp8_quantize(X, 0.5), "use a value in"),
    ("fp8-int", lambda: aq.fp8_quantize(torch.ones(3, dtype=torch.long)), ".float()"),
    ("fp8-empty", lambda: aq.fp8_quantize(torch.ones(0)), "at least one"),
    ("fp8-linear-k", lambda: aq.fp8_linear(torch.ones(2, 7), W), "not its output"),
    ("fp8-linear-w-nan", lambda: aq.fp8_linear(X, _with(W, NAN)), "nan_to_num"),
    ("fp8-linear-w-1d", lambda: aq.fp8_linear(X, W[0]), "Reshape it"),
    # smoothing
    ("sq-numpy", lambda: sm.smoothquant_scales(np.ones(4), np.ones(4)), "torch.from_numpy"),
    ("sq-nan", lambda: sm.smoothquant_scales(torch.tensor([1.0, NAN]), torch.ones(2)), "nan_to_num"),
    ("sq-negative", lambda: sm.smoothquant_scales(torch.tensor([1.0, -1.0]), torch.ones(2)), "x.abs().amax"),
    ("sq-empty", lambda: sm.smoothquant_scales(torch.ones(0), torch.ones(0)), "at least one"),
    ("sq-shapes", lambda: sm.smoothquant_scales(torch.ones(3), torch.ones(4)), "one value per input channel"),
    ("sq-alpha-text", lambda: sm.smoothquant_scales(torch.ones(2), torch.ones(2), "a"), "plain number"),
    ("sq-alpha-nan", lambda: sm.smoothquant_scales(torch.ones(2), torch.ones(2), NAN), "[0, 1]"),
    ("sq-alpha-2", lambda: sm.smoothquant_scales(torch.ones(2), torch.ones(2), 2.0), "[0, 1]"),
    ("column-amax-empty", lambda: sm.weight_column_amax([]), "wrap a single weight"),
    ("column-amax-tensor", lambda: sm.weight_column_amax(W), "wrap a single weight as [w]"),
    ("column-amax-k", lambda: sm.weight_column_amax([W, W[:, :4]]), "read the same input"),
    ("column-amax-nan", lambda: sm.weight_column_amax([_with(W, NAN)]), "nan_to_num"),
    ("awq-scales-alpha-nan", lambda: sm.awq_scales(torch.ones(3), NAN), "[0, 1]"),
    ("awq-scales-empty", lambda: sm.awq_scales(torch.ones(0), 0.5), "at least one"),
    ("awq-scales-negative", lambda: sm.awq_scales(-torch.ones(3), 0.5), "ranges of |x|"),
    ("awq-one-tensor", lambda: sm.awq_search(X, W, FQ), "wrap a single weight as [w]"),
    ("awq-grid-empty", lambda: sm.awq_search(X, [W], FQ, grid=()), "grid=(0, 0.5, 1)"),
    ("awq-grid-2", lambda: sm.awq_search(X, [W], FQ, grid=(0.5, 2.0)), "[0, 1]"),
    ("awq-x-nan", lambda: sm.awq_search(_with(X, NAN), [W], FQ), "nan_to_num"),
    ("awq-x-numpy", lambda: sm.awq_search(X.numpy(), [W], FQ), "torch.from_numpy"),
    ("awq-k", lambda: sm.awq_search(X[:, :4], [W], FQ), "the same K"),
    ("awq-no-fake-quant", lambda: sm.awq_search(X, [W], None), "fake_quant=lambda w"),
    ("awq-fake-quant-shape", lambda: sm.awq_search(X, [W], lambda w: w[:2]), "tensor of shape (4, 8)"),
    ("awq-fake-quant-nan", lambda: sm.awq_search(X, [W], lambda w: w * NAN), "nan_to_num"),
    # kv_cache
    ("kv-numpy", lambda: kv.fake_quant_kv(KV.numpy()), "torch.from_numpy"),
    ("kv-3d", lambda: kv.fake_quant_kv(KV[0]), "(batch, heads, T, head_dim)"),
    ("kv-int", lambda: kv.fake_quant_kv(KV.long()), ".float()"),
    ("kv-empty", lambda: kv.fake_quant_kv(torch.ones(1, 1, 2, 0)), "at least one"),
    ("kv-kind", lambda: kv.fake_quant_kv(KV, "int2"), "'int8', 'fp8', 'int4', 'fp16'"),
    ("kv-bytes-negative", lambda: kv.kv_bytes_per_token(-1, 512), "layers must be a whole number >= 1"),
    ("kv-bytes-zero", lambda: kv.kv_bytes_per_token(2, 0), "d_model must be a whole number >= 1"),
    ("kv-bytes-fraction", lambda: kv.kv_bytes_per_token(1.5, 512), "layers must be a whole number"),
    ("kv-bytes-bool", lambda: kv.kv_bytes_per_token(True, 512), "layers must be a whole number"),
    ("kv-bytes-nan", lambda: kv.kv_bytes_per_token(NAN, 512), "layers must be a whole number"),
    ("kv-bytes-head-0", lambda: kv.kv_bytes_per_token(2, 512, "int8", 0), "head_dim must be a whole number"),
    ("kv-bytes-heads", lambda: kv.kv_bytes_per_token(2, 100, "int8"), "d_model = heads x head_dim"),
    ("kv-bytes-kind", lambda: kv.kv_bytes_per_token(2, 512, "bf16"), "must be one of"),
    # lm_quant
    ("lm-not-tinylm", lambda: lm_quant.quantize_lm(torch.nn.Linear(4, 4), "w8a16"), "must be a TinyLM"),
    ("lm-scheme", lambda: lm_quant.quantize_lm(_lm(), "w3a16"), "'fp16', 'w8a16'"),
    ("lm-w4-bits-16", lambda: lm_quant.quantize_lm(_lm(), "w4a16", bits=16), "scheme='w8a16'"),
    ("lm-w4-bits-1", lambda: lm_quant.quantize_lm(_lm(), "w4a16", bits=1), "2..4"),
    ("lm-w8-bits-3", lambda: lm_quant.quantize_lm(_lm(), "w8a16", bits=3), "or leave bits out"),
    ("lm-bits-float", lambda: lm_quant.quantize_lm(_lm(), "w4a16", bits=3.0), "bits must be a whole number"),
    ("lm-group-0", lambda: lm_quant.quantize_lm(_lm(), "w4a16", group_size=0), "group_size must be a whole"),
    ("lm-group-3", lambda: lm_quant.quantize_lm(_lm(), "w4a16", group_size=3), "even divisor"),
    ("lm-alpha-unused", lambda: lm_quant.quantize_lm(_lm(), "w8a8", alpha=0.8), "smooth='smoothquant'"),
    ("lm-alpha-awq", lambda: lm_quant.quantize_lm(_lm(), "w4a16", smooth="awq", alpha=0.8, calib=_calib()),
     "awq searches its own"),
    ("lm-alpha-nan", lambda: lm_quant.quantize_lm(_lm(), "w8a8", smooth="smoothquant", alpha=NAN, calib=_calib()),
     "[0, 1]"),
    ("lm-smooth", lambda: lm_quant.quantize_lm(_lm(), "w8a8", smooth="gptq"), "must be one of"),
    ("lm-smooth-no-calib", lambda: lm_quant.quantize_lm(_lm(), "w8a8", smooth="awq"), "pass calib="),
    ("lm-calib-float", lambda: lm_quant.quantize_lm(_lm(), "w8a8", smooth="awq", calib=_calib().float()),
     "integer token windows"),
    ("lm-calib-too-long", lambda: lm_quant.quantize_lm(_lm(), "w8a8", smooth="awq", calib=torch.zeros(1, 20).long()),
     "2 <= T + 1 <= 9"),
    ("lm-calib-vocab", lambda: lm_quant.quantize_lm(_lm(), "w8a8", smooth="awq", calib=_calib() + 100),
     "model's vocabulary"),
    ("qlinear-group-unused", lambda: lm_quant.QuantLinear(W, "w8a16", group_size=64), "or leave group_size out"),
    ("qlinear-nan-weight", lambda: lm_quant.QuantLinear(_with(W, NAN), "fp16"), "nan_to_num"),
    ("qlinear-in-scale", lambda: lm_quant.QuantLinear(W, "w8a8", in_scale=torch.zeros(8)), "helpers.quant.smoothing"),
    ("inputs-windows-1d", lambda: lm_quant.linear_inputs(_lm(), torch.zeros(9).long()), "integer token windows"),
    ("inputs-max-rows", lambda: lm_quant.linear_inputs(_lm(), _calib(), max_rows=0), "max_rows must be"),
    ("outliers-empty", lambda: lm_quant.outlier_stats({}), "linear_inputs(model, windows)"),
    ("outliers-nan", lambda: lm_quant.outlier_stats({"a": _with(X, NAN)}), "nan_to_num"),
    ("kv-model-kind", lambda: lm_quant.with_kv_cache(_lm(), "int3"), "must be one of"),
    ("outlier-factor-nan", lambda: lm_quant.inject_outlier(_lm(), 0, 1, NAN), "positive value"),
    ("outlier-factor-inf", lambda: lm_quant.inject_outlier(_lm(), 0, 1, math.inf), "positive value"),
    ("outlier-block-fraction", lambda: lm_quant.inject_outlier(_lm(), 0.5, 1), "whole number from 0 to 0"),
    ("outlier-channel", lambda: lm_quant.inject_outlier(_lm(), 0, 16), "whole number from 0 to 15"),
    ("groups-not-tinylm", lambda: list(lm_quant.linear_groups(object())), "must be a TinyLM"),
    # bench.Timing
    ("timing-empty", lambda: bench.Timing((), "cpu"), "bench.timeit(fn)"),
    ("timing-nan", lambda: bench.Timing((1.0, NAN), "cpu"), "every sample must be a finite number"),
    ("timing-negative", lambda: bench.Timing((1.0, -1.0), "cpu"), "[0, inf]"),
    ("timing-text", lambda: bench.Timing(("1 ms",), "cpu"), "plain number"),
    ("timing-not-a-sequence", lambda: bench.Timing(1.0, "cpu"), "non-empty tuple of seconds"),
    ("timing-backend", lambda: bench.Timing((1.0,), "gpu"), "'cpu', 'torch', 'cupy', 'numba'"),
    ("timing-percentile", lambda: bench.Timing((1.0,), "cpu").percentile_s(101), "[0, 100]"),
]


@pytest.mark.parametrize("call, fix", [pytest.param(c, f, id=i) for i, c, f in ROWS])
def test_bad_input_is_a_one_line_error_that_names_the_fix(call, fix):
    assert_one_line_error(call, fix)


def test_good_inputs_still_work_and_the_documented_options_are_honoured():
    m = _lm()
    levels = {bits: max(torch.unique(g).numel() for g in lm_quant.quantize_lm(m, "w4a16", group_size=32, bits=bits)[0]
                        .blocks[0].mlp.down.w.reshape(-1, 32)) for bits in (3, 4)}
    assert levels[3] <= 8 < levels[4]  # bits is honoured: 3 bits give at most 8 levels a group of 32
    assert kv.kv_bytes_per_token(np.int64(2), 512, "int8") == 2 * 2 * (512 + 2 * 4)
    t = bench.Timing([0.0, 0.0], "cpu")
    assert t.samples_s == (0.0, 0.0) and t.spread == 0.0
    assert bench.Timing((0.0, 0.0, 1.0, 1.0), "cpu").spread == 2.0
    assert bench.Timing((0.0, 0.0, 0.0, 1.0, 1.0), "cpu").spread == math.inf


def test_a_nan_activation_is_propagated_to_its_own_row_only():
    x = _with(X, NAN, (1, 2))
    codes, scale = aq.quantize_per_token(x)
    assert torch.isnan(scale[1]).all() and torch.isfinite(scale[[0, 2]]).all()
    y, ref = aq.w8a8_linear(x, W8), aq.w8a8_linear(X, W8)
    assert torch.isnan(y[1]).all() and torch.equal(y[[0, 2]], ref[[0, 2]])
    assert torch.isnan(aq.w8a8_linear(x, W8, "per_tensor")).all()  # one scale for all: every row is lost
    assert torch.isnan(aq.fp8_linear(x, W)[1]).all() and torch.isfinite(aq.fp8_linear(x, W)[[0, 2]]).all()
    assert torch.isnan(wo.w8a16_linear(x, W8)[1]).all() and torch.isnan(wo.w4a16_linear(x, W4)[1]).all()


@pytest.mark.parametrize("kind", ["int8", "int4", "fp8"])
def test_a_nan_or_inf_in_the_kv_cache_reads_back_as_nan_not_as_rounded_numbers(kind):
    for bad in (NAN, math.inf):
        t = _with(KV, bad, (0, 1, 0, 3))
        out = kv.fake_quant_kv(t, kind)
        assert torch.isnan(out[0, 1, 0]).all(), out[0, 1, 0]
        assert torch.equal(out[0, 0], kv.fake_quant_kv(KV, kind)[0, 0])  # the other vectors are untouched


FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=32)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(FLOATS, min_size=3, max_size=3), min_size=1, max_size=4))
def test_a_per_token_scale_is_finite_exactly_when_its_row_is(rows):
    x = torch.tensor(rows, dtype=torch.float32)
    _, scale = aq.quantize_per_token(x)
    assert torch.equal(torch.isfinite(scale[:, 0]), torch.isfinite(x).all(dim=1))
    _, s8 = aq.fp8_quantize(x)
    assert torch.equal(torch.isfinite(s8[:, 0]), torch.isfinite(x).all(dim=1))


SIZES = st.one_of(st.integers(-3, 600), st.floats(allow_nan=True), st.booleans(), st.just("8"))


@settings(max_examples=150, deadline=None)
@given(SIZES, SIZES, st.sampled_from(tuple(kv.KINDS)), SIZES)
def test_kv_bytes_are_positive_or_the_input_is_refused(layers, d_model, kind, head_dim):
    valid = all(type(v) is int and v >= 1 for v in (layers, d_model, head_dim)) and d_model % head_dim == 0
    if not valid:
        with pytest.raises(InputError):
            kv.kv_bytes_per_token(layers, d_model, kind, head_dim)
        return
    got = kv.kv_bytes_per_token(layers, d_model, kind, head_dim)
    scales = 0 if kind == "fp16" else 2 * d_model // head_dim
    assert got > 0 and got == 2 * layers * (d_model * kv.KINDS[kind] + scales)


@settings(max_examples=80, deadline=None)
@given(st.one_of(st.integers(-4, 40), st.floats(0, 40), st.booleans()), st.sampled_from([8, 12, 16, 32]))
def test_w4_group_size_works_exactly_when_it_is_an_even_divisor_of_k(group, k):
    w = torch.linspace(-1, 1, 2 * k).reshape(2, k)
    if type(group) is int and group >= 2 and group % 2 == 0 and k % group == 0:
        q = wo.quantize_w4(w, group)
        assert q.scale.shape == (2, k // group) and (q.dequantize() - w).abs().max() <= q.scale.max() / 2 + 1e-6
    else:
        with pytest.raises(InputError, match="even divisor"):
            wo.quantize_w4(w, group)


@settings(max_examples=80, deadline=None)
@example([8.988465674311579e+307, 8.98846567431158e+307])  # once overflowed to inf
@given(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2, 5)), max_size=6))
def test_a_timing_holds_only_finite_non_negative_samples(samples):
    if samples and all(math.isfinite(s) and s >= 0 for s in samples):
        t = bench.Timing(tuple(samples), "cpu")
        assert min(samples) <= t.median_s <= max(samples) and not math.isnan(t.spread)
    else:
        with pytest.raises(InputError):
            bench.Timing(tuple(samples), "cpu")
