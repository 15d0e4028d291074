"""Copy kernels (chapter 3): coalesced, grid-stride, wide accesses with ILP, strided and offset; numba and cupy.

numba kernels run on the GPU and in the CUDA simulator; ``cupy_*`` launchers run ``copy.cu`` on a GPU.

Serves: core — used by chapters 3, 4, 11, 12 and lab 02.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from helpers.errors import InputError
from helpers.kernels import launch
from helpers.kernels.cuda_source import kernel

NUMBA_VARIANTS = ("simple", "grid_stride", "ilp4", "ilp4_u64", "ilp8_u64")
ILP8_BLOCKS_PER_SM = 32  # with 256 threads; the best of a block-size x grid sweep on the H200 (2026-11-29)
CUPY_VARIANTS = ("simple", "grid_stride", "float4")


@cuda.jit
def copy_simple(src, dst):
    """One element per thread: dst[i] = src[i]."""
    i = cuda.grid(1)
    if i < src.size:
        dst[i] = src[i]


@cuda.jit
def copy_grid_stride(src, dst):
    """A fixed grid walks the array: thread i copies i, i + gridsize, ..."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = src.size
    while i < n:
        dst[i] = src[i]
        i += step


@cuda.jit
def copy_ilp4(src, dst):
    """Grid-stride with four independent loads in flight per thread (any dtype; uint64 views move 8 bytes each)."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = src.size
    while i + 3 * step < n:
        a = src[i]
        b = src[i + step]
        c = src[i + 2 * step]
        d = src[i + 3 * step]
        dst[i] = a
        dst[i + step] = b
        dst[i + 2 * step] = c
        dst[i + 3 * step] = d
        i += 4 * step
    while i < n:
        dst[i] = src[i]
        i += step


@cuda.jit
def copy_ilp8(src, dst):
    """Grid-stride with eight independent loads in flight per thread (used on uint64 views)."""
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = src.size
    while i + 7 * step < n:
        v0 = src[i]
        v1 = src[i + step]
        v2 = src[i + 2 * step]
        v3 = src[i + 3 * step]
        v4 = src[i + 4 * step]
        v5 = src[i + 5 * step]
        v6 = src[i + 6 * step]
        v7 = src[i + 7 * step]
        dst[i] = v0
        dst[i + step] = v1
        dst[i + 2 * step] = v2
        dst[i + 3 * step] = v3
        dst[i + 4 * step] = v4
        dst[i + 5 * step] = v5
        dst[i + 6 * step] = v6
        dst[i + 7 * step] = v7
        i += 8 * step
    while i < n:
        dst[i] = src[i]
        i += step


@cuda.jit
def copy_strided(src, dst, n, stride):
    """Thread i copies element i * stride: a warp touches 32 * stride elements."""
    i = cuda.grid(1)
    if i < n:
        dst[i * stride] = src[i * stride]


@cuda.jit
def copy_offset(src, dst, n, offset):
    """Thread i copies element i + offset: misaligned unless offset is a multiple of 32 floats."""
    i = cuda.grid(1)
    if i < n:
        dst[i + offset] = src[i + offset]


def _wide_view(src: Any, dst: Any) -> tuple[Any, Any]:
    """uint64 views of two arrays (8-byte accesses), or InputError when the byte count is odd."""
    if (src.size * src.dtype.itemsize) % 8:
        raise InputError(f"the uint64 copy needs a byte count divisible by 8; {src.size} x "
                         f"{src.dtype.itemsize} bytes is not. Use variant='ilp4' instead.")
    return src.view(np.uint64), dst.view(np.uint64)


def numba_copy_fn(src: Any, dst: Any, variant: str = "simple", threads: int = 256) -> Callable[[], None]:
    """A zero-argument function that launches one numba copy (NUMBA_VARIANTS), everything pre-bound for timing."""
    from helpers.validation import require_choice

    require_choice(variant, NUMBA_VARIANTS, "variant")
    launch.same_array_pair(src, dst)
    launch.check_threads(threads)
    s, d = launch.as_numba(src), launch.as_numba(dst)
    n = src.size
    if variant == "simple":
        k = copy_simple[launch.blocks_for(n, threads), threads]
    elif variant == "grid_stride":
        k = copy_grid_stride[launch.grid_stride_blocks(n, threads), threads]
    elif variant == "ilp8_u64":
        s, d = _wide_view(s, d)
        blocks = min(ILP8_BLOCKS_PER_SM * launch.sm_count() * max(1, 256 // threads),
                     launch.blocks_for(s.size, threads, 8))
        k = copy_ilp8[blocks, threads]
    else:
        if variant == "ilp4_u64":
            s, d = _wide_view(s, d)
        k = copy_ilp4[launch.grid_stride_blocks(s.size, threads, 4), threads]
    return lambda: k(s, d)


def numba_copy(src: Any, dst: Any, variant: str = "simple", threads: int = 256) -> Any:
    """Copy src into dst with one of the numba kernels (NUMBA_VARIANTS); returns dst."""
    numba_copy_fn(src, dst, variant, threads)()
    return dst


def numba_strided(src: Any, dst: Any, n: int, stride: int, threads: int = 256) -> Any:
    """Copy elements 0, stride, 2*stride, ... (n of them) from src to dst; returns dst."""
    _check_span(src, dst, n, stride, 0)
    copy_strided[launch.blocks_for(n, threads), threads](launch.as_numba(src), launch.as_numba(dst), n, stride)
    return dst


def numba_offset(src: Any, dst: Any, n: int, offset: int, threads: int = 256) -> Any:
    """Copy elements offset .. offset+n-1 from src to dst; returns dst."""
    _check_span(src, dst, n, 1, offset)
    copy_offset[launch.blocks_for(n, threads), threads](launch.as_numba(src), launch.as_numba(dst), n, offset)
    return dst


def _check_span(src: Any, dst: Any, n: int, stride: int, offset: int) -> None:
    """Require n >= 1, stride >= 1, offset >= 0 and arrays long enough for (n-1)*stride+offset."""
    launch.same_array_pair(src, dst)
    if not all(isinstance(v, (int, np.integer)) for v in (n, stride, offset)) or n < 1 or stride < 1 \
            or offset < 0:
        raise InputError(f"need integers n >= 1, stride >= 1, offset >= 0; got n={n}, stride={stride}, "
                         f"offset={offset}.")
    last = (n - 1) * stride + offset
    if last >= min(src.size, dst.size):
        raise InputError(f"the copy reaches element {last}, but the arrays hold {min(src.size, dst.size)}. "
                         f"Allocate at least {last + 1} elements.")


def cupy_copy_fn(src: Any, dst: Any, variant: str = "float4", threads: int = 256,
                 shared_bytes: int = 0) -> Callable[[], None]:
    """A zero-argument function launching one copy.cu copy of float32 cupy arrays (CUPY_VARIANTS).

    ``shared_bytes`` reserves unused dynamic shared memory per block, which caps how many blocks
    fit on an SM: the occupancy experiment of chapter 4.
    """
    from helpers.validation import require_choice

    require_choice(variant, CUPY_VARIANTS, "variant")
    launch.same_array_pair(src, dst)
    launch.require_float32(src, "src")
    launch.check_threads(threads)
    if not isinstance(shared_bytes, (int, np.integer)) or shared_bytes < 0:
        raise InputError(f"shared_bytes must be a non-negative integer, got {shared_bytes!r}.")
    n = int(src.size)
    if variant == "float4":
        if any(int(a.data.ptr) % 16 for a in (src, dst)):
            raise InputError("the float4 copy needs 16-byte aligned arrays (a slice starting at an odd "
                             "element is not). Use variant='grid_stride' or copy the slice first.")
        n4 = n // 4
        k = kernel("copy", "copy_float4")
        grid, args = launch.grid_stride_blocks(max(n4, 1), threads), (src, dst, np.int64(n4))
    else:
        k = kernel("copy", f"copy_{variant}")
        blocks = launch.blocks_for(n, threads)
        grid, args = (blocks if variant == "simple" else launch.grid_stride_blocks(n, threads)), \
            (src, dst, np.int64(n))
    if shared_bytes > 48 * 1024:
        k.max_dynamic_shared_size_bytes = int(shared_bytes)
    tail = variant == "float4" and n % 4

    def run() -> None:
        k((grid,), (threads,), args, shared_mem=int(shared_bytes))
        if tail:
            dst[n - n % 4:] = src[n - n % 4:]

    return run


def cupy_copy(src: Any, dst: Any, variant: str = "float4", threads: int = 256, shared_bytes: int = 0) -> Any:
    """Copy float32 cupy src into dst with a copy.cu kernel (CUPY_VARIANTS); returns dst."""
    cupy_copy_fn(src, dst, variant, threads, shared_bytes)()
    return dst


def cupy_strided(src: Any, dst: Any, n: int, stride: int, threads: int = 256) -> Any:
    """Strided float32 copy with copy.cu: elements 0, stride, 2*stride, ... (n of them); returns dst."""
    _check_span(src, dst, n, stride, 0)
    kernel("copy", "copy_strided")((launch.blocks_for(n, threads),), (threads,),
                                   (src, dst, np.int64(n), np.int32(stride)))
    return dst


def cupy_offset(src: Any, dst: Any, n: int, offset: int, threads: int = 256) -> Any:
    """Offset (misaligned) float32 copy with copy.cu; returns dst."""
    _check_span(src, dst, n, 1, offset)
    kernel("copy", "copy_offset")((launch.blocks_for(n, threads),), (threads,),
                                  (src, dst, np.int64(n), np.int32(offset)))
    return dst


def cupy_stencil(src: Any, dst: Any, radius: int, variant: str = "plain", threads: int = 256) -> Any:
    """1-D box stencil from readonly.cu: variant 'plain', 'restrict' or 'ldg' (the read-only path)."""
    from helpers.validation import require_choice

    require_choice(variant, ("plain", "restrict", "ldg"), "variant")
    launch.same_array_pair(src, dst)
    launch.require_float32(src, "src")
    n = int(src.size)
    if not isinstance(radius, (int, np.integer)) or not 0 <= radius < n // 2:
        raise InputError(f"radius must be an integer in 0..{n // 2 - 1}, got {radius!r}.")
    kernel("readonly", f"stencil_{variant}")((launch.blocks_for(n, threads),), (threads,),
                                             (src, dst, np.int32(n), np.int32(radius)))
    return dst


def stencil_reference(x: np.ndarray, radius: int) -> np.ndarray:
    """numpy spec of the box stencil: sums of 2*radius+1 neighbours, zeros at the edges."""
    out = np.zeros_like(x)
    c = np.concatenate([[0.0], np.cumsum(x, dtype=np.float64)])
    w = 2 * radius + 1
    out[radius:len(x) - radius] = (c[w:] - c[:-w]).astype(x.dtype)
    return out
