"""Bad input to the GEMV, GEMM and histogram kernels' helpers is refused on the CPU, before any GPU call (issue 26).

One table of bad inputs to helpers.kernels.{triton_gemv, gemm, histogram} (each row: a fragment of the
fix its one-line InputError must name), then property tests over launch configurations and grids.
Every row runs here, on a CPU without Triton or a GPU: validation comes before the kernel launch.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers  # noqa: F401 - switches on the CUDA simulator before numba.cuda is imported
from helpers.errors import InputError
from helpers.kernels import gemm, histogram
from helpers.kernels import triton_gemv as tg
from helpers.quant import weight_only as wo
from tests.support.errors import assert_one_line_error

NAN = float("nan")
W = torch.linspace(-1, 1, 8 * 128).reshape(8, 128)
GW = tg.prepare_fp16(W)
G8 = tg.prepare_w8(wo.quantize_w8(W))
G4 = tg.prepare_w4(wo.quantize_w4(W, 128))
XH = torch.ones(128).half()
RNG = np.random.default_rng(0)
A8, B8, M0, SHIFT, ZP = gemm.int8_problem(np.random.default_rng(1), 4, 3, 8, 0)
BATCH = np.abs(histogram.activations(np.random.default_rng(2), 64))
BINS = np.zeros(16, np.int32)


# (id, call, fragment of the fix the one-line InputError must name)
ROWS = [
    # triton_gemv: the layout, the prepared weights, the config and gemv's arguments
    ("words-bits-3", lambda: tg.gemv_words(torch.zeros(2, 128, dtype=torch.int8), 3), "must be one of 8, 4"),
    ("words-float", lambda: tg.gemv_words(W, 8), "integer tensor"),
    ("words-numpy", lambda: tg.gemv_words(np.zeros((2, 128), np.int8), 8), "torch.from_numpy"),
    ("words-empty", lambda: tg.gemv_words(torch.zeros(0, 128, dtype=torch.int8), 8), "at least one element"),
    ("words-range", lambda: tg.gemv_words(torch.full((1, 128), 9, dtype=torch.int8), 4), "quantize to 4 bits"),
    ("words-k", lambda: tg.gemv_words(torch.zeros(1, 96, dtype=torch.int8), 8), "multiple of 64"),
    ("codes-float", lambda: tg.codes_from_words(W, 8), "what gemv_words returns"),
    ("codes-width", lambda: tg.codes_from_words(torch.zeros(1, 3, dtype=torch.int32), 8), "as gemv_words returns"),
    ("fp16-numpy", lambda: tg.prepare_fp16(W.numpy()), "torch.from_numpy"),
    ("fp16-nan", lambda: tg.prepare_fp16(torch.tensor([[1.0, NAN]])), "nan_to_num"),
    ("fp16-overflow", lambda: tg.prepare_fp16(torch.tensor([[1e6, 1.0]])), "|w| <= 65504"),
    ("fp16-1d", lambda: tg.prepare_fp16(W[0]), "Reshape it"),
    ("w8-raw-weight", lambda: tg.prepare_w8(W), "quantize_w8(weight)"),
    ("w4-w8-weight", lambda: tg.prepare_w4(wo.quantize_w8(W)), "quantize_w4(weight, 128)"),
    ("w4-group-64", lambda: tg.prepare_w4(wo.quantize_w4(W, 64)), "quantize_w4(w, 128)"),
    ("config-block-n-3", lambda: tg.Config(block_n=3), "power of 2"),
    ("config-block-k-0", lambda: tg.Config(block_k=0), "power of 2"),
    ("config-warps-64", lambda: tg.Config(warps=64), "power of 2 up to 32"),
    ("config-warps-float", lambda: tg.Config(warps=4.0), "power of 2"),
    ("config-stages-0", lambda: tg.Config(stages=0), "stages must be a whole number >= 1"),
    ("config-math-3", lambda: tg.Config(math=3), "0..2"),
    ("config-math-bool", lambda: tg.Config(math=True), "0..2"),
    ("default-config-not-weight", lambda: tg.default_config(W), "prepare_fp16, prepare_w8 or prepare_w4"),
    ("gemv-batch-2", lambda: tg.gemv(torch.ones(2, 128).half(), GW), "batch 1"),
    ("gemv-fp32-x", lambda: tg.gemv(torch.ones(128), GW), "float16 tensor of 128 values"),
    ("gemv-numpy-x", lambda: tg.gemv(np.ones(128, np.float16), GW), "torch.from_numpy"),
    ("gemv-hand-made-weight", lambda: tg.gemv(XH, dataclasses.replace(G8, k=256)), "in the layout of its kind"),
    ("gemv-scale-missing", lambda: tg.gemv(XH, dataclasses.replace(G4, scale=None)), "prepare_w4"),
    ("gemv-kind", lambda: tg.gemv(XH, dataclasses.replace(GW, kind="w2")), "prepare_fp16"),
    ("gemv-norm-eps-nan", lambda: tg.gemv(XH, GW, norm_eps=NAN), "norm_eps must be a finite number > 0"),
    ("gemv-norm-eps-neg", lambda: tg.gemv(XH, GW, norm_eps=-1e-5), "norm_eps must be a finite number > 0"),
    ("gemv-glu-odd", lambda: tg.gemv(XH, tg.prepare_fp16(W[:7])), "does not tile"),
    ("gemv-glu-odd-n", lambda: tg.gemv(XH, tg.prepare_fp16(W[:7]), glu=True), "an even N"),
    ("gemv-glu-text", lambda: tg.gemv(XH, GW, glu="yes"), "glu must be True or False"),
    ("gemv-residual-size", lambda: tg.gemv(XH, GW, residual=torch.ones(3).half()), "the output is added to"),
    ("gemv-residual-int", lambda: tg.gemv(XH, GW, residual=torch.ones(8, dtype=torch.long)), "float tensor"),
    ("gemv-out-size", lambda: tg.gemv(XH, GW, out=torch.empty(4).half()), "leave out=None"),
    ("gemv-out-strided", lambda: tg.gemv(XH, GW, out=torch.empty(16).half()[::2]), "contiguous"),
    ("gemv-out-fp32", lambda: tg.gemv(XH, GW, out=torch.empty(8)), "float16"),
    ("gemv-config-dict", lambda: tg.gemv(XH, GW, config={"block_n": 4}), "Config(block_n=4"),
    ("gemv-config-tile", lambda: tg.gemv(XH, G8, config=tg.Config(block_n=16, block_k=32)), "does not tile"),
    ("reference-batch-2", lambda: tg.reference(torch.ones(256).half(), G4), "batch 1"),
    ("reference-residual", lambda: tg.reference(XH, G4, residual=torch.ones(5)), "the output is added to"),
    # gemm: tiles, grids, packing, references and problems
    ("tiled-0", lambda: gemm.tiled(0), "whole number from 1 to 32"),
    ("tiled-64", lambda: gemm.tiled(64), "1..32"),
    ("tiled-fraction", lambda: gemm.tiled(2.5), "whole number"),
    ("tiled-list", lambda: gemm.tiled([4]), "whole number"),
    ("tiled-int8-neg", lambda: gemm.tiled_int8(-1), "whole number from 1 to 32"),
    ("naive-grid-neg", lambda: gemm.naive_grid(-1, 4), "m must be a whole number >= 1"),
    ("naive-grid-fraction", lambda: gemm.naive_grid(2.5, 4), "m must be a whole number"),
    ("tiled-grid-tile-0", lambda: gemm.tiled_grid(4, 4, 0), "1..32"),
    ("tiled-grid-n-0", lambda: gemm.tiled_grid(4, 0, 8), "n must be a whole number >= 1"),
    ("pack-rows-float", lambda: gemm.pack_rows(np.ones((2, 4), np.float32)), "astype(np.int8)"),
    ("pack-rows-k", lambda: gemm.pack_rows(np.ones((2, 3), np.int8)), "pad K with zeros"),
    ("unpack-float", lambda: gemm.unpack(np.array([1.7])), "pack_rows / pack_cols"),
    ("unpack-too-big", lambda: gemm.unpack(np.array([2 ** 40])), "outside int32"),
    ("unpack-empty", lambda: gemm.unpack(np.zeros(0, np.int32)), "at least one element"),
    ("dp4a-shapes", lambda: gemm.dp4a_reference(np.zeros(3, np.int32), np.zeros(4, np.int32), 0), "do not broadcast"),
    ("dp4a-float-acc", lambda: gemm.dp4a_reference(np.int32(1), np.int32(1), 0.5), "integer accumulator"),
    ("int8-ref-m0", lambda: gemm.int8_gemm_reference(A8, B8, M0[:2], SHIFT, ZP), "one value per output column"),
    ("int8-ref-zp", lambda: gemm.int8_gemm_reference(A8, B8, M0, SHIFT, 300), "whole number from -128 to 127"),
    ("int8-ref-k", lambda: gemm.int8_gemm_reference(A8, B8[:4], M0, SHIFT, ZP), "a's columns must equal b's rows"),
    ("float-ref-k", lambda: gemm.float_gemm_reference(np.ones((2, 3)), np.ones((4, 2))), "a's columns must equal"),
    ("float-ref-1d", lambda: gemm.float_gemm_reference(np.ones(3), np.ones(3)), "Reshape it"),
    ("float-ref-empty", lambda: gemm.float_gemm_reference(np.ones((0, 3)), np.ones((3, 2))), "at least one"),
    ("float-ref-text", lambda: gemm.float_gemm_reference(np.array([["a"]]), np.ones((1, 1))), "must hold numbers"),
    ("integer-floats-shape", lambda: gemm.integer_floats(RNG, (-1, 2)), "shape[0] must be a whole number"),
    ("integer-floats-rng", lambda: gemm.integer_floats(0, (1, 2)), "np.random.default_rng(0)"),
    ("int8-problem-k-0", lambda: gemm.int8_problem(RNG, 2, 2, 0, 0), "k must be a whole number >= 1"),
    ("int8-problem-zp", lambda: gemm.int8_problem(RNG, 2, 2, 4, 200), "from -128 to 127"),
    ("int8-problem-zp-half", lambda: gemm.int8_problem(RNG, 2, 2, 4, 0.5), "whole number"),
    # histogram
    ("grid-0", lambda: histogram.grid(0), "n must be a whole number >= 1"),
    ("grid-threads-0", lambda: histogram.grid(10, 0), "at most 1024"),
    ("grid-threads-2048", lambda: histogram.grid(10, 2048), "1..1024"),
    ("activations-0", lambda: histogram.activations(RNG, 0), "n must be a whole number >= 1"),
    ("activations-rng", lambda: histogram.activations(3, 4), "np.random.default_rng(0)"),
    ("reference-bins-bool", lambda: histogram.reference(BATCH, True), "num_bins must be an integer"),
    ("reference-nan", lambda: histogram.reference(np.array([NAN, 1.0], np.float32)), "nan_to_num"),
    ("from-counts-float", lambda: histogram.from_counts(np.array([1.5, 2.5]), 1.0), "integer counts"),
    ("from-counts-negative", lambda: histogram.from_counts(np.array([-1, 2]), 1.0), "counts >= 0"),
    ("from-counts-2d", lambda: histogram.from_counts(np.ones((2, 2), np.int64), 1.0), "1-D array"),
    ("from-counts-max-text", lambda: histogram.from_counts(np.ones(2, np.int64), "a"), "max_abs"),
    ("from-counts-max-bool", lambda: histogram.from_counts(np.ones(2, np.int64), True), "plain number"),
    ("from-counts-max-nan", lambda: histogram.from_counts(np.ones(2, np.int64), NAN), "max_abs"),
    ("amaxes-not-histogram", lambda: histogram.amaxes(np.ones(3)), "reference(x) or from_counts"),
    ("fill-variant", lambda: histogram.numba_histogram(BATCH, BINS.copy(), 0.1, "bogus"), "'global', 'shared'"),
    ("fill-width-0", lambda: histogram.numba_histogram(BATCH, BINS.copy(), 0.0), "width (the bin width"),
    ("fill-width-nan", lambda: histogram.numba_histogram(BATCH, BINS.copy(), NAN), "width (the bin width"),
    ("fill-counts-float", lambda: histogram.numba_histogram(BATCH, np.zeros(16, np.float32), 0.1), "int32"),
    ("fill-counts-2d", lambda: histogram.numba_histogram(BATCH, np.zeros((4, 4), np.int32), 0.1), "Reshape it"),
    ("fill-counts-empty", lambda: histogram.numba_histogram(BATCH, np.zeros(0, np.int32), 0.1), "at least one"),
    ("fill-counts-not-zero", lambda: histogram.numba_histogram(BATCH, np.ones(16, np.int32), 0.1), "np.zeros"),
    ("fill-counts-too-many", lambda: histogram.numba_histogram(BATCH, np.zeros(4096, np.int32), 0.1),
     "fit in shared memory"),
    ("fill-x-empty", lambda: histogram.numba_histogram(np.zeros(0, np.float32), BINS.copy(), 0.1), "at least one"),
    ("fill-x-2d", lambda: histogram.numba_histogram(BATCH.reshape(8, 8), BINS.copy(), 0.1), "Reshape it"),
    ("fill-x-nan", lambda: histogram.numba_histogram(np.array([NAN, 1.0], np.float32), BINS.copy(), 0.1),
     "nan_to_num"),
    ("fill-x-list", lambda: histogram.numba_histogram([1.0, 2.0], BINS.copy(), 0.1), "np.asarray"),
    ("fill-x-int", lambda: histogram.numba_histogram(np.ones(4, np.int32), BINS.copy(), 0.1), "astype"),
    ("fill-kernel", lambda: histogram.numba_histogram(BATCH, BINS.copy(), 0.1, kernel=5), "@cuda.jit kernel"),
    ("measure-no-kernels", lambda: histogram.measure({}), "{name: @cuda.jit kernel}"),
    ("measure-n", lambda: histogram.measure({"g": histogram.hist_global}, n=-1), "n must be a whole number"),
    ("measure-bins", lambda: histogram.measure({"g": histogram.hist_global}, num_bins=0), "1..2048"),
]


@pytest.mark.parametrize("call, fix", [pytest.param(c, f, id=i) for i, c, f in ROWS])
def test_bad_input_is_a_one_line_error_that_names_the_fix(call, fix):
    assert_one_line_error(call, fix)


def test_good_inputs_still_reach_the_kernels():
    for w in (GW, G8, G4):
        assert tg.reference(XH, w).shape == (8,)
        assert tg.default_config(w).block_k == 1024
    assert gemm.tiled(8) is gemm.tiled(8) and gemm.tiled_int8(8) is gemm.tiled_int8(8)  # still built once
    counts = histogram.numba_histogram(BATCH, BINS.copy(), float(BATCH.max()) / 16 + 1e-6)
    assert counts.sum() == BATCH.size
    assert histogram.from_counts(counts, 0.0).num_bins == 16  # max |x| = 0: every count sits in bin 0


POW2 = st.one_of(st.integers(-2, 70), st.sampled_from([1.0, 2.5, True, "4", None]))


@settings(max_examples=120, deadline=None)
@given(POW2, POW2, POW2, st.one_of(st.integers(-1, 5), st.just(2.0)), st.one_of(st.integers(-1, 4), st.just(False)))
def test_a_config_is_built_exactly_when_every_field_is_valid(block_n, block_k, warps, stages, math):
    def pow2(v: object, high: int) -> bool:
        return type(v) is int and 0 < v <= high and not v & (v - 1)

    valid = pow2(block_n, 1 << 16) and pow2(block_k, 1 << 16) and pow2(warps, 32) and type(stages) is int \
        and stages >= 1 and type(math) is int and 0 <= math <= 2
    if valid:
        assert tg.Config(block_n, block_k, warps, stages, math).block_n == block_n
    else:
        with pytest.raises(InputError):
            tg.Config(block_n, block_k, warps, stages, math)


@settings(max_examples=120, deadline=None)
@given(st.integers(-3, 3000), st.integers(-3, 3000), st.integers(-3, 40))
def test_a_tiled_grid_covers_the_result_or_the_sizes_are_refused(m, n, tile):
    if m >= 1 and n >= 1 and 1 <= tile <= 32:
        (bx, by), threads = gemm.tiled_grid(m, n, tile)
        assert threads == (tile, tile) and (bx - 1) * tile < n <= bx * tile and (by - 1) * tile < m <= by * tile
    else:
        with pytest.raises(InputError):
            gemm.tiled_grid(m, n, tile)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(-3, 50), min_size=0, max_size=8), st.floats(allow_nan=True, allow_infinity=True))
def test_from_counts_keeps_valid_counts_and_refuses_the_rest(counts, max_abs):
    if counts and min(counts) >= 0 and np.isfinite(max_abs) and max_abs >= 0:
        h = histogram.from_counts(np.array(counts, np.int32), max_abs)
        assert h.counts.tolist() == counts and h.max_seen == max_abs
    else:
        with pytest.raises(InputError):
            histogram.from_counts(np.array(counts, np.int32), max_abs)
