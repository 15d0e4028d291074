"""Matrix-multiply kernels in numba: naive FP32, shared-memory tiled FP32, and tiled INT8 with dp4a.

The INT8 kernel works on int8 values packed four to an int32 word along K (what ``__dp4a`` eats):
``a4[m, w]`` holds a[m, 4w..4w+3] and ``b4[w, n]`` holds b[4w..4w+3, n], lane j in bits 8j..8j+7.
It accumulates in integers and requantizes each int32 sum to int8 with the fixed-point multiplier of
chapter 5 (per output column): clamp(((acc * M0) >> (31 + shift), rounded) + zero_point).
Tiled kernels take one TILE x TILE block of threads per TILE x TILE block of C; ``tiled(tile)`` and
``tiled_int8(tile)`` build them for any tile size (shared-array shapes are compile-time constants).

Serves: core — used by lab 11 (reference kernels, packing, specs, launch grids).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import cuda, float32, int32

from helpers.errors import InputError
from helpers.quant.intgemm import gemm_int8_ref, quantize_multiplier, requantize_fixed
from helpers.validation import require_dtype, require_ndim, require_nonempty

NAIVE_BLOCK = (32, 8)  # a warp is one row of C: lanes read one element of A and 32 neighbours of B


@cuda.jit
def gemm_naive(a, b, c):
    """c = a @ b, one output per thread, every operand straight from global memory."""
    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    if row < c.shape[0] and col < c.shape[1]:
        acc = float32(0)
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


@functools.cache
def tiled(tile: int) -> Any:
    """The shared-memory tiled FP32 GEMM for one tile size (blocks of tile x tile threads)."""

    @cuda.jit
    def kernel(a, b, c):
        sa = cuda.shared.array((tile, tile), float32)
        sb = cuda.shared.array((tile, tile), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * tile + ty
        col = cuda.blockIdx.x * tile + tx
        acc = float32(0)
        for k0 in range(0, a.shape[1], tile):
            sa[ty, tx] = a[row, k0 + tx] if row < a.shape[0] and k0 + tx < a.shape[1] else float32(0)
            sb[ty, tx] = b[k0 + ty, col] if k0 + ty < b.shape[0] and col < b.shape[1] else float32(0)
            cuda.syncthreads()  # the whole tile is in shared memory
            for k in range(tile):
                acc += sa[ty, k] * sb[k, tx]
            cuda.syncthreads()  # everyone is done with it before the next one overwrites it
        if row < c.shape[0] and col < c.shape[1]:
            c[row, col] = acc

    return kernel


@cuda.jit(device=True)
def dp4a(a, b, c):
    """c + the dot product of the four signed bytes of word a with those of word b (what __dp4a does)."""
    for shift in range(0, 32, 8):
        x = (a >> shift) & 0xFF
        y = (b >> shift) & 0xFF
        x -= (x & 0x80) << 1  # sign extension: 128..255 stand for -128..-1
        y -= (y & 0x80) << 1
        c += x * y
    return c


@functools.cache
def tiled_int8(tile: int) -> Any:
    """The tiled INT8 GEMM on packed words, requantized to int8 per output column."""

    @cuda.jit
    def kernel(a4, b4, out, m0, shift, zero_point):
        sa = cuda.shared.array((tile, tile), int32)
        sb = cuda.shared.array((tile, tile), int32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row = cuda.blockIdx.y * tile + ty
        col = cuda.blockIdx.x * tile + tx
        acc = 0
        for k0 in range(0, a4.shape[1], tile):
            sa[ty, tx] = a4[row, k0 + tx] if row < a4.shape[0] and k0 + tx < a4.shape[1] else 0
            sb[ty, tx] = b4[k0 + ty, col] if k0 + ty < b4.shape[0] and col < b4.shape[1] else 0
            cuda.syncthreads()
            for k in range(tile):
                acc = dp4a(sa[ty, k], sb[k, tx], acc)
            cuda.syncthreads()
        if row < out.shape[0] and col < out.shape[1]:
            total = 31 + shift[col]
            r = ((acc * m0[col]) + (1 << (total - 1))) >> total
            out[row, col] = min(max(r + zero_point, -128), 127)

    return kernel


def naive_grid(m: int, n: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) of the naive kernel for an m x n result."""
    bx, by = NAIVE_BLOCK
    return (math.ceil(n / bx), math.ceil(m / by)), NAIVE_BLOCK


def tiled_grid(m: int, n: int, tile: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) of a tiled kernel for an m x n result: one tile x tile block per tile of C."""
    return (math.ceil(n / tile), math.ceil(m / tile)), (tile, tile)


def _require_int8_k4(x: Any, name: str, k_axis: int) -> None:
    """A non-empty 2-D int8 array whose K axis is a multiple of 4."""
    require_dtype(x, ("int8",), name)
    require_ndim(x, (2,), name)
    require_nonempty(x, name)
    if x.shape[k_axis] % 4:
        raise InputError(f"{name} has K = {x.shape[k_axis]}, not a multiple of 4; pad K with zeros.")


def pack_rows(a: np.ndarray) -> np.ndarray:
    """int8 A (M x K) as int32 words a4 (M x K/4): a4[m, w] holds a[m, 4w..4w+3], lane j in bits 8j.."""
    _require_int8_k4(a, "a", 1)
    return np.ascontiguousarray(a).view("<i4").astype(np.int32)


def pack_cols(b: np.ndarray) -> np.ndarray:
    """int8 B (K x N) as int32 words b4 (K/4 x N): b4[w, n] holds b[4w..4w+3, n], lane j in bits 8j.."""
    _require_int8_k4(b, "b", 0)
    k, n = b.shape
    lanes = np.ascontiguousarray(np.asarray(b).reshape(k // 4, 4, n).transpose(0, 2, 1))
    return lanes.view("<i4").reshape(k // 4, n).astype(np.int32)


def unpack(words: np.ndarray) -> np.ndarray:
    """The four signed bytes of each int32 word, as a trailing axis of length 4 (lane 0 first)."""
    return np.ascontiguousarray(np.asarray(words, np.int32)).astype("<i4").view(np.int8).reshape(*np.shape(words), 4)


def dp4a_reference(a: Any, b: Any, c: Any) -> np.ndarray:
    """c + sum over the 4 lanes of signed byte products, elementwise over arrays of int32 words."""
    prods = unpack(a).astype(np.int64) * unpack(b).astype(np.int64)
    return np.asarray(c, np.int64) + prods.sum(axis=-1)


def int8_gemm_reference(a: np.ndarray, b: np.ndarray, m0: np.ndarray, shift: np.ndarray,
                        zero_point: int) -> np.ndarray:
    """The INT8 kernel's answer: requantize_fixed(a @ b exactly, per-column M0/shift, zero point)."""
    return requantize_fixed(gemm_int8_ref(a, b), m0, shift, zero_point, axis=1)


def float_gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float64, rounded once to float32 (exact for the small integer-valued inputs the lab uses)."""
    return (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)


def integer_floats(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """float32 integers in -4..4: every sum of products below 2**24 is exact, in any order."""
    return rng.integers(-4, 5, shape).astype(np.float32)


def int8_problem(rng: np.random.Generator, m: int, n: int, k: int,
                 zero_point: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """(a, b, m0, shift, zero_point): int8 a (row 0 all -128) and b, per-column multipliers that saturate some outputs."""
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[0] = -128
    scale = 127.0 / (6000.0 * math.sqrt(k / 64))  # sums spread ~ 5500 sqrt(K/64): some columns saturate
    m0, shift = quantize_multiplier(scale * rng.uniform(0.05, 3.0, n))
    return a, b, m0, shift, int(zero_point)
