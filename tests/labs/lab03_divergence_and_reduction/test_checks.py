"""Lab 3 checks: the reference kernels pass; a divergent kernel and a reduction without barriers fail."""

from __future__ import annotations

import pytest
from numba import cuda, float32

from helpers.grading.check import CheckFailed, check
from helpers.kernels.divergence import BRANCHY, branch_free
from helpers.kernels.reduction import block_sums


@cuda.jit(device=True)
def load_block(x, s):
    """Each thread copies its element of x (0 past the end) into the block's shared array; returns its index."""
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < x.size else float32(0)
    return tid


@cuda.jit
def block_sum_no_sync(x, partial):
    """Known wrong: the tree reduction without cuda.syncthreads()."""
    s = cuda.shared.array(256, float32)
    tid = load_block(x, s)
    k = 128
    while k > 0:
        if tid < k:
            s[tid] += s[tid + k]
        k //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


def test_branch_free_passes():
    assert check("lab03.branch_free", branch_free, plot=False, perf=False).passed


def test_divergent_kernel_rejected():
    # Known wrong: the lab's original kernel, the branch on threadIdx.x % 2 left in.
    with pytest.raises(CheckFailed, match="diverges"):
        check("lab03.branch_free", BRANCHY["mod2"], plot=False, perf=False)


def test_block_sum_passes():
    assert check("lab03.block_sum", block_sums, plot=False, perf=False).passed


def test_missing_syncthreads_rejected_every_time():
    for _ in range(3):
        with pytest.raises(CheckFailed, match="elements differ"):
            check("lab03.block_sum", block_sum_no_sync, plot=False, perf=False)


def test_not_a_kernel_is_explained():
    with pytest.raises(CheckFailed, match="@cuda.jit"):
        check("lab03.block_sum", lambda x, p: None, plot=False, perf=False)


@cuda.jit
def block_sum_strided_index(x, partial):
    """Known wrong for this lab: right values, but the interleaved tree with a strided index (2·k·tid)."""
    s = cuda.shared.array(256, float32)
    tid = load_block(x, s)
    cuda.syncthreads()
    k = 1
    while k < 256:
        j = 2 * k * tid
        if j < 256:
            s[j] += s[j + k]
        cuda.syncthreads()
        k *= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


def test_strided_index_tree_rejected_for_its_bank_conflicts():
    with pytest.raises(CheckFailed, match="bank conflicts"):
        check("lab03.block_sum", block_sum_strided_index, plot=False, perf=False)
