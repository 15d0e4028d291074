"""Sum reductions (chapter 4): atomics, shared-memory trees (interleaved and sequential), warp shuffles.

Each kernel leaves the sum of a float32 vector in out[0] (zero it first). Blocks have THREADS threads.
The shuffle kernel needs a real GPU: the CUDA simulator has no warp shuffles.

Serves: core — used by chapters 4, 11, 12 and lab 03.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, float32

from helpers.errors import InputError
from helpers.kernels import launch
from helpers.kernels.cuda_source import kernel

THREADS = 256
WARPS = THREADS // 32
VARIANTS = ("atomic", "shared", "interleaved", "shuffle")
FULL_MASK = 0xFFFFFFFF


@cuda.jit
def reduce_atomic(x, out):
    """Every thread atomically adds its element into out[0]."""
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])


def _tree_reduction(sequential: bool) -> Any:
    """A shared-memory tree kernel: sequential addressing (tid < k) or interleaved (tid % 2k == 0)."""

    @cuda.jit
    def kernel(x, out):
        s = cuda.shared.array(THREADS, float32)
        tid = cuda.threadIdx.x
        v = float32(0)
        i = cuda.grid(1)
        while i < x.size:  # grid-stride partial sum per thread
            v += x[i]
            i += cuda.gridsize(1)
        s[tid] = v
        cuda.syncthreads()
        if sequential:  # halves of the block: whole warps retire together
            k = THREADS // 2
            while k > 0:
                if tid < k:
                    s[tid] += s[tid + k]
                cuda.syncthreads()
                k //= 2
        else:  # neighbours: every warp keeps some lanes busy, so every warp diverges
            k = 1
            while k < THREADS:
                if tid % (2 * k) == 0:
                    s[tid] += s[tid + k]
                cuda.syncthreads()
                k *= 2
        if tid == 0:
            cuda.atomic.add(out, 0, s[0])

    return kernel


reduce_shared = _tree_reduction(True)
reduce_interleaved = _tree_reduction(False)


@cuda.jit
def reduce_shuffle(x, out):
    """Warp shuffles inside each warp, one shared slot per warp, then the first warp finishes."""
    sums = cuda.shared.array(WARPS, float32)
    tid = cuda.threadIdx.x
    v = float32(0)
    i = cuda.grid(1)
    while i < x.size:
        v += x[i]
        i += cuda.gridsize(1)
    o = 16
    while o > 0:
        v += cuda.shfl_down_sync(FULL_MASK, v, o)
        o //= 2
    lane, warp = tid % 32, tid // 32
    if lane == 0:
        sums[warp] = v
    cuda.syncthreads()
    if warp == 0:
        v = sums[lane] if lane < WARPS else float32(0)
        o = 16
        while o > 0:
            v += cuda.shfl_down_sync(FULL_MASK, v, o)
            o //= 2
        if lane == 0:
            cuda.atomic.add(out, 0, v)


NUMBA_KERNELS = {"atomic": reduce_atomic, "shared": reduce_shared, "interleaved": reduce_interleaved,
                 "shuffle": reduce_shuffle}


def blocks(n: int, variant: str) -> int:
    """Grid size: one block per THREADS elements for atomics, a full-GPU grid-stride grid otherwise."""
    return launch.blocks_for(n, THREADS) if variant == "atomic" else launch.grid_stride_blocks(n, THREADS)


def _check(x: Any, out: Any, variant: str) -> None:
    """Require a non-empty float32 vector, a float32 output of at least one element, a known variant."""
    from helpers.device import simulator_enabled
    from helpers.validation import require_choice, require_ndim, require_nonempty

    require_choice(variant, VARIANTS, "variant")
    require_ndim(x, (1,), "x")
    require_nonempty(x, "x")
    launch.require_float32(x, "x")
    launch.require_float32(out, "out")
    if variant == "shuffle" and simulator_enabled():
        raise InputError("the CUDA simulator has no warp shuffles, so variant='shuffle' needs a real GPU. "
                         "Use variant='shared' here.")


def numba_sum(x: Any, out: Any, variant: str = "shared") -> Any:
    """Add sum(x) into out[0] with a numba kernel (zero out first); returns out."""
    _check(x, out, variant)
    NUMBA_KERNELS[variant][blocks(x.size, variant), THREADS](launch.as_numba(x), launch.as_numba(out))
    return out


def cupy_sum(x: Any, out: Any, variant: str = "shuffle") -> Any:
    """Add sum(x) into out[0] with a reduction.cu kernel on cupy arrays (zero out first); returns out."""
    _check(x, out, variant)
    n = int(x.size)
    kernel("reduction", f"reduce_{variant}")((blocks(n, variant),), (THREADS,), (x, out, np.int64(n)))
    return out


@cuda.jit
def block_sums(x, partial):
    """Block b writes sum(x[b*THREADS:(b+1)*THREADS]) to partial[b]: one element a thread, shared tree."""
    s = cuda.shared.array(THREADS, float32)
    tid = cuda.threadIdx.x
    i = cuda.grid(1)
    s[tid] = x[i] if i < x.size else float32(0)
    cuda.syncthreads()
    k = THREADS // 2
    while k > 0:
        if tid < k:
            s[tid] += s[tid + k]
        cuda.syncthreads()
        k //= 2
    if tid == 0:
        partial[cuda.blockIdx.x] = s[0]


def block_sums_reference(x: np.ndarray) -> np.ndarray:
    """numpy spec of `block_sums`: float32 sums of consecutive THREADS-element chunks."""
    n_blocks = launch.blocks_for(x.size, THREADS)
    padded = np.zeros(n_blocks * THREADS, dtype=np.float64)
    padded[: x.size] = x
    return padded.reshape(n_blocks, THREADS).sum(axis=1).astype(np.float32)
