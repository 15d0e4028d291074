"""Transpose kernels (chapter 3): naive, shared-memory tiled, padded (bank-conflict-free); numba and cupy.

Blocks of 32 x 8 threads move a 32 x 32 tile, four elements a thread, as in NVIDIA's
"An Efficient Matrix Transpose in CUDA C/C++". ``copy_tiled`` is the yardstick with the same tiling.

Serves: core — used by chapters 3, 4, 11, 12 and lab 02.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda, float32

from helpers.errors import InputError
from helpers.kernels import launch
from helpers.kernels.cuda_source import kernel

TILE = 32
ROWS = 8
VARIANTS = ("copy", "naive", "tiled", "padded")


def _direct(transposed: bool) -> Any:
    """A tiled kernel without shared memory: dst = src (the yardstick) or dst = src.T (the naive transpose)."""

    @cuda.jit
    def kernel(src, dst):
        x = cuda.blockIdx.x * TILE + cuda.threadIdx.x
        y = cuda.blockIdx.y * TILE + cuda.threadIdx.y
        for j in range(0, TILE, ROWS):
            if x < src.shape[1] and y + j < src.shape[0]:
                if transposed:
                    dst[x, y + j] = src[y + j, x]  # writes a column: one 32-byte sector per element
                else:
                    dst[y + j, x] = src[y + j, x]

    return kernel


# dst = src with the transposes' tiling: the speed a transpose should approach.
copy_tiled = _direct(False)
# dst[x, y] = src[y, x]: reads coalesced, writes strided.
transpose_naive = _direct(True)


def _tile_transpose(pitch: int) -> Any:
    """A shared-tile transpose kernel whose tile has `pitch` columns (a compile-time constant)."""

    @cuda.jit
    def kernel(src, dst):
        tile = cuda.shared.array((TILE, pitch), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        x = cuda.blockIdx.x * TILE + tx
        y = cuda.blockIdx.y * TILE + ty
        for j in range(0, TILE, ROWS):
            if x < src.shape[1] and y + j < src.shape[0]:
                tile[ty + j, tx] = src[y + j, x]
        cuda.syncthreads()
        x = cuda.blockIdx.y * TILE + tx  # the block's tile lands at the mirrored position
        y = cuda.blockIdx.x * TILE + ty
        for j in range(0, TILE, ROWS):
            if x < dst.shape[1] and y + j < dst.shape[0]:
                dst[y + j, x] = tile[tx, ty + j]

    return kernel


# Through a 32 x 32 shared tile: both global sides coalesced, but a tile column sits in one bank.
transpose_tiled = _tile_transpose(TILE)
# The same with 33 columns: a column's 32 words fall in 32 different banks.
transpose_padded = _tile_transpose(TILE + 1)

NUMBA_KERNELS = {"copy": copy_tiled, "naive": transpose_naive, "tiled": transpose_tiled,
                 "padded": transpose_padded}


def grid(rows: int, cols: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) for a rows x cols source: one 32 x 8 block per 32 x 32 tile."""
    return (math.ceil(cols / TILE), math.ceil(rows / TILE)), (TILE, ROWS)


def _check(src: Any, dst: Any, variant: str) -> None:
    """Require 2-D float32 arrays with dst shaped like src.T (like src for the copy)."""
    from helpers.validation import require_choice, require_ndim, require_nonempty

    require_choice(variant, VARIANTS, "variant")
    for a, name in ((src, "src"), (dst, "dst")):
        require_ndim(a, (2,), name)
        require_nonempty(a, name)
        launch.require_float32(a, name)
    want = tuple(src.shape) if variant == "copy" else tuple(src.shape)[::-1]
    if tuple(dst.shape) != want:
        raise InputError(f"dst must have shape {want} for variant {variant!r}, got {tuple(dst.shape)}.")


def numba_transpose(src: Any, dst: Any, variant: str = "padded") -> Any:
    """dst = src.T (or src for 'copy') with a numba kernel; float32 2-D arrays; returns dst."""
    _check(src, dst, variant)
    blocks, threads = grid(*src.shape)
    NUMBA_KERNELS[variant][blocks, threads](launch.as_numba(src), launch.as_numba(dst))
    return dst


def cupy_transpose(src: Any, dst: Any, variant: str = "padded") -> Any:
    """dst = src.T (or src for 'copy') with a transpose.cu kernel on cupy arrays; returns dst."""
    _check(src, dst, variant)
    rows, cols = (int(v) for v in src.shape)
    blocks, threads = grid(rows, cols)
    name = "copy_tiled" if variant == "copy" else f"transpose_{variant}"
    kernel("transpose", name)(blocks, threads, (src, dst, np.int32(rows), np.int32(cols)))
    return dst
