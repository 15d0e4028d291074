"""Lab 11 checks: the reference kernels pass (visible and hidden cases); each known-wrong kernel is rejected
for the right reason (missing barriers, wrong tile index, no tile reuse, bank conflicts, uncoalesced
loads, unsigned or unpacked int8 lanes, int8/int16 accumulators, missing saturation)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32, int8, int16, int32

from helpers.grading.check import CheckFailed, check, verify
from helpers.kernels import gemm
from helpers.kernels.gemm import dp4a  # a global name, so that simulator twins run it as Python on any machine

TILE = 8  # the known-wrong tiled kernels below read it, like a student's


@cuda.jit
def naive_down_columns(a, b, c):
    """Known wrong: right values, but consecutive threads walk down a column of c (K and N elements apart)."""
    t = cuda.threadIdx.y * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + t % cuda.blockDim.y
    col = cuda.blockIdx.x * cuda.blockDim.x + t // cuda.blockDim.y
    if row < c.shape[0] and col < c.shape[1]:
        acc = float32(0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


def _tiled(first_sync: bool = True, second_sync: bool = True, a_index_swapped: bool = False,
           b_transposed: bool = False):
    """The tiled GEMM with one mistake switched on."""

    @cuda.jit
    def kernel(a, b, c):
        sa = cuda.shared.array((TILE, TILE), float32)
        sb = cuda.shared.array((TILE, TILE), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        acc = float32(0)
        for k0 in range(0, a.shape[1], TILE):
            ka = k0 + (ty if a_index_swapped else tx)
            sa[ty, tx] = a[row, ka] if row < a.shape[0] and ka < a.shape[1] else float32(0)
            v = b[k0 + ty, col] if k0 + ty < b.shape[0] and col < b.shape[1] else float32(0)
            if b_transposed:
                sb[tx, ty] = v
            else:
                sb[ty, tx] = v
            if first_sync:
                cuda.syncthreads()
            for k in range(TILE):
                acc += sa[ty, k] * (sb[tx, k] if b_transposed else sb[k, tx])
            if second_sync:
                cuda.syncthreads()
        if row < c.shape[0] and col < c.shape[1]:
            c[row, col] = acc

    return kernel


@cuda.jit(device=True)
def dp4a_unsigned(a, b, c):
    """Known wrong: lanes taken as 0..255, never sign-extended."""
    for s in range(0, 32, 8):
        c += ((a >> s) & 0xFF) * ((b >> s) & 0xFF)
    return c


@cuda.jit(device=True)
def dp4a_unpacked(a, b, c):
    """Known wrong: multiplies the packed words as if they were one number."""
    return c + a * b


@cuda.jit(device=True)
def dp4a_wraparound(a, b, c):
    """Known wrong on a GPU: sign extension by shifting a lane to the top of a 32-bit word and back."""
    for s in range(0, 32, 8):
        c += ((a << (24 - s)) >> 24) * ((b << (24 - s)) >> 24)
    return c


def _int8(acc_type=None, saturate: bool = True):
    """The tiled INT8 GEMM with a narrow accumulator (int8/int16) or without saturation."""
    acc_dtype = int32 if acc_type is None else acc_type

    @cuda.jit
    def kernel(a4, b4, out, m0, shift, zero_point):
        sa = cuda.shared.array((TILE, TILE), int32)
        sb = cuda.shared.array((TILE, TILE), int32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * TILE + ty
        col = cuda.blockIdx.x * TILE + tx
        acc = cuda.local.array(1, acc_dtype)
        acc[0] = 0
        for k0 in range(0, a4.shape[1], TILE):
            sa[ty, tx] = a4[row, k0 + tx] if row < a4.shape[0] and k0 + tx < a4.shape[1] else 0
            sb[ty, tx] = b4[k0 + ty, col] if k0 + ty < b4.shape[0] and col < b4.shape[1] else 0
            cuda.syncthreads()
            for k in range(TILE):
                acc[0] = dp4a(sa[ty, k], sb[k, tx], acc[0])
            cuda.syncthreads()
        if row < out.shape[0] and col < out.shape[1]:
            total = 31 + shift[col]
            r = ((acc[0] * m0[col]) + (1 << (total - 1))) >> total
            out[row, col] = min(max(r + zero_point, -128), 127) if saturate else r + zero_point

    return kernel


@pytest.mark.parametrize("exercise, kernel", [
    ("lab11.naive", gemm.gemm_naive), ("lab11.tiled", gemm.tiled(8)), ("lab11.dp4a", gemm.dp4a),
    ("lab11.int8", gemm.tiled_int8(8))])
def test_reference_kernels_pass_visible_and_hidden_cases(exercise, kernel):
    verify(exercise, kernel)


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("exercise, kernel, why", [
    ("lab11.naive", naive_down_columns, "not coalesced"),
    ("lab11.tiled", _tiled(first_sync=False), "elements differ(.|\n)*data race"),
    ("lab11.tiled", _tiled(second_sync=False), "elements differ(.|\n)*data race"),
    ("lab11.tiled", _tiled(a_index_swapped=True), "elements differ"),
    ("lab11.tiled", _tiled(b_transposed=True), "bank conflicts"),
    ("lab11.tiled", gemm.gemm_naive, "reads A and B 48.0 times per output"),
    ("lab11.dp4a", dp4a_unsigned, "elements differ"),
    ("lab11.dp4a", dp4a_unpacked, "elements differ"),
    ("lab11.dp4a", dp4a_wraparound, "wrong with 64-bit ones"),
    ("lab11.int8", _int8(acc_type=int16), "int16"),
    ("lab11.int8", _int8(acc_type=int8), "int8"),
    ("lab11.int8", _int8(saturate=False), "int8"),
])
def test_known_wrong_kernels_are_rejected(exercise, kernel, why):
    with pytest.raises(CheckFailed, match=why):
        check(exercise, kernel, plot=False, perf=False)


def test_int8_cases_saturate_at_both_ends():
    from helpers.grading.exercise import get

    ex = get("lab11.int8")
    for case in ex.visible() + ex.hidden():
        out = ex.expected(case)
        assert out.min() == -128 and out.max() == 127, case.label
        assert -128 < np.median(out) < 127, case.label


def test_packing_round_trips_and_dp4a_reference_matches_int64_dot_products():
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (3, 8)).astype(np.int8)
    b = rng.integers(-128, 128, (8, 5)).astype(np.int8)
    a4, b4 = gemm.pack_rows(a), gemm.pack_cols(b)
    assert a4.shape == (3, 2) and b4.shape == (2, 5)
    assert np.array_equal(gemm.unpack(a4).reshape(3, 8), a)
    assert np.array_equal(gemm.unpack(b4).transpose(0, 2, 1).reshape(8, 5), b)
    acc = np.zeros((3, 5), np.int64)
    for w in range(2):
        acc = gemm.dp4a_reference(a4[:, w:w + 1], b4[w:w + 1, :], acc)
    assert np.array_equal(acc, a.astype(np.int64) @ b.astype(np.int64))
    assert gemm.dp4a_reference(np.int32(-0x7F7F7F80), np.int32(-0x7F7F7F80), 5) == 5 + 4 * 128 * 128


def test_pack_rejects_k_not_a_multiple_of_4():
    from helpers.errors import InputError

    with pytest.raises(InputError, match="multiple of 4"):
        gemm.pack_rows(np.zeros((2, 6), np.int8))


@pytest.mark.gpu
def test_gpu_steps_are_exact_and_recorded():
    from helpers import bench
    from helpers.labs.lab11_gemm_kernels import bench as gemm_bench

    steps = gemm_bench.measure(gemm.gemm_naive, _tiled(), _int8(), n=256, tiles=(16,), repeats=2)
    assert {s.key for s in steps} >= {"naive", "tiled16", "int8_t16", "dp4a_cu", "torch_fp32", "int_mm"}
    speedups = gemm_bench.record(steps, n=256)
    assert set(speedups) == set(gemm_bench.SPEEDUPS) and all(v > 0 for v in speedups.values())
    assert any(r.name == "lab11.tiled_over_naive" for r in bench.session_records())
