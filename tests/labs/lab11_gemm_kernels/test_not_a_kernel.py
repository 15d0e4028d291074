"""Lab 11 judges kernels as kernels: a GEMM written as whole-array numpy is rejected (even with a dummy
shared-memory write), the course's reference kernels bound to the answer names are refused in the students'
and graded copies, and correct kernels written in another style still pass."""

from __future__ import annotations

import pytest
from numba import cuda, float32

from helpers.grading import kernel_source
from helpers.grading.check import CheckFailed, check
from helpers.kernels import gemm

TILE = 8
NOT_A_KERNEL = "does not compile for a GPU|at once, not one element"


@cuda.jit
def gemm_numpy(a, b, c):
    """Known wrong: the whole product in numpy, no per-element work."""
    c[:, :] = a[:, :] @ b[:, :]


@cuda.jit
def gemm_numpy_shared(a, b, c):
    """Known wrong: whole-array numpy plus one dummy shared-memory write for the shared-memory check."""
    s = cuda.shared.array((TILE, TILE), float32)
    s[0, 0] = 0
    c[:, :] = a[:, :] @ b[:, :]


@cuda.jit
def naive_grid2(a, b, c):
    """Another style: cuda.grid(2), the K loop over a local accumulator written once."""
    col, row = cuda.grid(2)
    if row >= c.shape[0] or col >= c.shape[1]:
        return
    total = float32(0)
    k = 0
    while k < a.shape[1]:
        total += a[row, k] * b[k, col]
        k += 1
    c[row, col] = total


@cuda.jit
def tiled_phases(a, b, c):
    """Another style: a loop over phases, loads guarded with if/else statements, two-name unpacking."""
    sa = cuda.shared.array((TILE, TILE), float32)
    sb = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    acc = float32(0)
    for phase in range((a.shape[1] + TILE - 1) // TILE):
        k0 = phase * TILE
        if row < a.shape[0] and k0 + tx < a.shape[1]:
            sa[ty, tx] = a[row, k0 + tx]
        else:
            sa[ty, tx] = 0
        if k0 + ty < b.shape[0] and col < b.shape[1]:
            sb[ty, tx] = b[k0 + ty, col]
        else:
            sb[ty, tx] = 0
        cuda.syncthreads()
        for k in range(TILE):
            acc += sa[ty, k] * sb[k, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@pytest.mark.parametrize("exercise, kernel", [("lab11.naive", gemm_numpy), ("lab11.tiled", gemm_numpy),
                                              ("lab11.tiled", gemm_numpy_shared)])
def test_numpy_on_whole_arrays_is_not_a_kernel(exercise, kernel):
    with pytest.raises(CheckFailed, match=NOT_A_KERNEL):
        check(exercise, kernel, plot=False, perf=False)


@pytest.mark.parametrize("exercise, bound", [("lab11.naive", gemm.gemm_naive), ("lab11.tiled", gemm.tiled(8)),
                                             ("lab11.int8", gemm.tiled_int8(8)), ("lab11.dp4a", gemm.dp4a)])
def test_a_bound_reference_kernel_is_refused_in_the_students_copy(monkeypatch, exercise, bound):
    monkeypatch.setattr(kernel_source, "course_kernels_allowed", lambda: False)
    with pytest.raises(CheckFailed, match="one of the course's own kernels"):
        check(exercise, bound, plot=False, perf=False)


@pytest.mark.parametrize("exercise, kernel", [("lab11.naive", naive_grid2), ("lab11.tiled", tiled_phases)])
def test_correct_kernels_in_another_style_pass(exercise, kernel):
    assert check(exercise, kernel, plot=False, perf=False).passed
