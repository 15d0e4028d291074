"""Matrix-multiply kernels in numba: naive FP32, shared-memory tiled FP32, and tiled INT8 with dp4a.

The INT8 kernel works on int8 values packed four to an int32 word along K (what ``__dp4a`` eats):
``a4[m, w]`` holds a[m, 4w..4w+3] and ``b4[w, n]`` holds b[4w..4w+3, n], lane j in bits 8j..8j+7.
It accumulates in integers and requantizes each int32 sum to int8 with the fixed-point multiplier of
chapter 5 (per output column): clamp(((acc * M0) >> (31 + shift), rounded) + zero_point).
Tiled kernels take one TILE x TILE block of threads per TILE x TILE block of C; ``tiled(tile)`` and
``tiled_int8(tile)`` build them for any tile size (shared-array shapes are compile-time constants).

Serves: core — used by lab 11.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
from numba import cuda, float32, int32

from helpers.errors import InputError
from helpers.quant.intgemm import gemm_int8_ref, quantize_multiplier, requantize_fixed
from helpers.validation import (require_array, require_dtype, require_instance, require_int_range, require_ndim,
                                require_nonempty, require_size)

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


MAX_TILE = 32  # a block of tile x tile threads holds at most 1024


def tiled(tile: int) -> Any:
    """The shared-memory tiled FP32 GEMM for one tile size (blocks of tile x tile threads)."""
    return _tiled(_require_tile(tile))


def tiled_int8(tile: int) -> Any:
    """The tiled INT8 GEMM on packed words, requantized to int8 per output column."""
    return _tiled_int8(_require_tile(tile))


def _require_tile(tile: int) -> int:
    """A tile size in 1..32 (tile x tile threads a block); returned as an int."""
    require_int_range(tile, 1, MAX_TILE, "tile (a block runs tile x tile <= 1024 threads)")
    return int(tile)


@functools.cache
def _tiled(tile: int) -> Any:
    """tiled(tile), built once per tile size (shared-array shapes are compile-time constants)."""

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
def _tiled_int8(tile: int) -> Any:
    """tiled_int8(tile), built once per tile size."""

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
    m, n = require_size(m, "m"), require_size(n, "n")
    bx, by = NAIVE_BLOCK
    return (math.ceil(n / bx), math.ceil(m / by)), NAIVE_BLOCK


def tiled_grid(m: int, n: int, tile: int) -> tuple[tuple[int, int], tuple[int, int]]:
    """(blocks, threads) of a tiled kernel for an m x n result: one tile x tile block per tile of C."""
    m, n, tile = require_size(m, "m"), require_size(n, "n"), _require_tile(tile)
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
    words = _int32_words(words, "words")
    require_nonempty(words, "words")
    return np.ascontiguousarray(np.asarray(words, np.int32)).astype("<i4").view(np.int8).reshape(*np.shape(words), 4)


def dp4a_reference(a: Any, b: Any, c: Any) -> np.ndarray:
    """c + sum over the 4 lanes of signed byte products, elementwise over arrays of int32 words."""
    a, b = _int32_words(a, "a"), _int32_words(b, "b")
    c = np.asarray(c)
    if c.dtype.kind not in "iu":
        raise InputError(f"c must be an integer accumulator (int or int32 array), got dtype {c.dtype}; "
                         "start from 0 or an int32 array.")
    try:
        np.broadcast_shapes(a.shape, b.shape, c.shape)
    except ValueError:
        raise InputError(f"a {a.shape}, b {b.shape} and c {c.shape} do not broadcast; pass words of one shape "
                         "(or a single word).") from None
    prods = unpack(a).astype(np.int64) * unpack(b).astype(np.int64)
    return np.asarray(c, np.int64) + prods.sum(axis=-1)


def int8_gemm_reference(a: np.ndarray, b: np.ndarray, m0: np.ndarray, shift: np.ndarray,
                        zero_point: int) -> np.ndarray:
    """The INT8 kernel's answer: requantize_fixed(a @ b exactly, per-column M0/shift, zero point)."""
    n = np.shape(b)[-1] if np.ndim(b) else 0
    for v, name in ((m0, "m0"), (shift, "shift")):
        if np.shape(v) not in ((), (n,)):
            raise InputError(f"{name} needs one value per output column ({n},) or a single value, got shape "
                             f"{np.shape(v)}; compute it with quantize_multiplier(scales).")
    require_int_range(zero_point, -128, 127, "zero_point")
    return requantize_fixed(gemm_int8_ref(a, b), m0, shift, zero_point, axis=1)


def float_gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b in float64, rounded once to float32 (exact for the small integer-valued inputs the lab uses)."""
    for x, name in ((a, "a"), (b, "b")):
        require_array(x, name)
        require_ndim(x, (2,), name)
        require_nonempty(x, name)
        if np.asarray(x).dtype.kind not in "iuf":
            raise InputError(f"{name} must hold numbers, got dtype {np.asarray(x).dtype}; use np.float32 values.")
    if a.shape[1] != b.shape[0]:
        raise InputError(f"inner sizes differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}; a's columns must "
                         "equal b's rows.")
    return (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(np.float32)


def integer_floats(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """float32 integers in -4..4: every sum of products below 2**24 is exact, in any order."""
    require_instance(rng, np.random.Generator, "rng", "pass np.random.default_rng(0).")
    if not isinstance(shape, tuple) or len(shape) != 2:
        raise InputError(f"shape must be a tuple (rows, columns), got {shape!r}.")
    shape = (require_size(shape[0], "shape[0]"), require_size(shape[1], "shape[1]"))
    return rng.integers(-4, 5, shape).astype(np.float32)


def int8_problem(rng: np.random.Generator, m: int, n: int, k: int,
                 zero_point: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """(a, b, m0, shift, zero_point): int8 a (row 0 all -128) and b, per-column multipliers that saturate some outputs."""
    require_instance(rng, np.random.Generator, "rng", "pass np.random.default_rng(0).")
    m, n, k = require_size(m, "m"), require_size(n, "n"), require_size(k, "k")
    require_int_range(zero_point, -128, 127, "zero_point")
    a = rng.integers(-128, 128, (m, k)).astype(np.int8)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[0] = -128
    scale = 127.0 / (6000.0 * math.sqrt(k / 64))  # sums spread ~ 5500 sqrt(K/64): some columns saturate
    m0, shift = quantize_multiplier(scale * rng.uniform(0.05, 3.0, n))
    return a, b, m0, shift, int(zero_point)


def _int32_words(words: Any, name: str) -> np.ndarray:
    """Integer words (an int, an array) that fit in int32, as a numpy array."""
    w = np.asarray(words)
    if w.dtype.kind not in "iu":
        raise InputError(f"{name} must be int32 words (integers), got dtype {w.dtype}; pack them with "
                         "pack_rows / pack_cols.")
    if w.size and (int(w.min()) < -(2 ** 31) or int(w.max()) >= 2 ** 31):
        raise InputError(f"{name} holds values outside int32; pass words as pack_rows / pack_cols return them.")
    return w
