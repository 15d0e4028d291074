"""Lab 2 checks: the reference kernels pass; strided, unsynchronized and conflicting variants fail."""

from __future__ import annotations

import pytest
from numba import cuda, float32

from helpers.grading.check import CheckFailed, check
from helpers.kernels.copy import copy_simple
from helpers.kernels.transpose import transpose_naive, transpose_padded, transpose_tiled


@cuda.jit
def copy_strided_index(src, dst):
    """Known wrong: right values, but thread i of a warp sits gridDim.x elements from thread i+1."""
    i = cuda.threadIdx.x * cuda.gridDim.x + cuda.blockIdx.x
    if i < src.size:
        dst[i] = src[i]


@cuda.jit
def copy_off_by_one(src, dst):
    """Known wrong: misses the last element."""
    i = cuda.grid(1)
    if i < src.size - 1:
        dst[i] = src[i]


@cuda.jit
def transpose_no_sync(src, dst):
    """Known wrong: the padded transpose without cuda.syncthreads()."""
    tile = cuda.shared.array((32, 33), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * 32 + tx
    y = cuda.blockIdx.y * 32 + ty
    for j in range(0, 32, 8):
        tile[ty + j, tx] = src[y + j, x]
    x = cuda.blockIdx.y * 32 + tx
    y = cuda.blockIdx.x * 32 + ty
    for j in range(0, 32, 8):
        dst[y + j, x] = tile[tx, ty + j]


def test_reference_copy_passes():
    assert check("lab02.copy", copy_simple, plot=False, perf=False).passed


@pytest.mark.parametrize("kernel, why", [(copy_strided_index, "not coalesced"),
                                         (copy_off_by_one, "elements differ")])
def test_wrong_copies_rejected(kernel, why):
    with pytest.raises(CheckFailed, match=why):
        check("lab02.copy", kernel, plot=False, perf=False)


def test_reference_transpose_passes():
    assert check("lab02.transpose", transpose_padded, plot=False, perf=False).passed


@pytest.mark.parametrize("kernel, why", [
    (transpose_tiled, "bank conflicts"),       # unpadded 32 x 32 tile
    (transpose_no_sync, "elements differ"),    # missing syncthreads, wrong every time
    (transpose_naive, "not coalesced"),        # no shared memory: strided writes
])
def test_wrong_transposes_rejected(kernel, why):
    with pytest.raises(CheckFailed, match=why):
        check("lab02.transpose", kernel, plot=False, perf=False)


def test_rejection_draws_the_offending_request():
    import matplotlib.pyplot as plt

    plt.close("all")
    with pytest.raises(CheckFailed):
        check("lab02.copy", copy_strided_index, plot=False, perf=False)
    titles = [ax.get_title() for n in plt.get_fignums() for ax in plt.figure(n).axes]
    assert any("worst warp request" in t and "32 sectors" in t for t in titles), titles
    plt.close("all")
