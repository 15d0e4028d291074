"""Lab 2: a coalesced copy and a bank-conflict-free shared-memory transpose, written in numba.

Serves: lab02 (its exercises: spec, visible cases, hint).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.grading.exercises import kernel_checks as kc

COPY_THREADS = 128
GPU_COPY_N = 1 << 26  # 256 MB of float32: several times the H200's 50 MB L2
GPU_TRANSPOSE = 8192


def _copy_cases() -> list[Case]:
    """A size that does not fill the last block, and one that does."""
    rng = np.random.default_rng(2)
    return [Case(f"{n} floats", (rng.random(n, dtype=np.float32),)) for n in (1000, 512)]


def _run_copy(fn: Any, case: Case) -> kc.KernelRun:
    """Launch copy_kernel[ceil(n/128), 128](src, dst) in the simulator, traced."""
    (x,) = case.args
    return kc.traced(fn, math.ceil(x.size / COPY_THREADS), COPY_THREADS, (x, np.zeros_like(x)), 1)


def _compare_copy(got: kc.KernelRun, expected: np.ndarray) -> None:
    """Exact values, then coalesced accesses."""
    kc.values(got, expected)
    kc.coalesced(got)


def _perf_copy(fn: Any) -> tuple[float, float, str]:
    """Your copy vs the reference one-element-per-thread copy, 256 MB, same run."""
    from numba import cuda

    from helpers.kernels.copy import copy_simple

    src = cuda.to_device(np.ones(GPU_COPY_N, np.float32))
    dst = cuda.device_array_like(src)
    blocks = math.ceil(GPU_COPY_N / COPY_THREADS)
    return kc.perf_ratio(lambda: fn[blocks, COPY_THREADS](src, dst),
                         lambda: copy_simple[blocks, COPY_THREADS](src, dst), 0.9, "256 MB copy")


def _transpose_cases() -> list[Case]:
    """One tile, then a 32 x 64 matrix (two blocks)."""
    rng = np.random.default_rng(3)
    return [Case(f"{r}x{c}", (rng.random((r, c), dtype=np.float32),)) for r, c in ((32, 32), (32, 64))]


def _run_transpose(fn: Any, case: Case) -> kc.KernelRun:
    """Launch transpose_kernel[(cols/32, rows/32), (32, 8)](src, dst) in the simulator, traced."""
    from helpers.kernels.transpose import grid

    (a,) = case.args
    blocks, threads = grid(*a.shape)
    return kc.traced(fn, blocks, threads, (a, np.zeros(a.shape[::-1], np.float32)), 1)


def _compare_transpose(got: kc.KernelRun, expected: np.ndarray) -> None:
    """Exact values, coalesced global accesses, conflict-free shared memory."""
    kc.values(got, expected)
    kc.coalesced(got)
    kc.conflict_free(got)


def _perf_transpose(fn: Any) -> tuple[float, float, str]:
    """Your transpose vs the reference padded transpose, 8192 x 8192 float32, same run."""
    from numba import cuda

    from helpers.kernels.transpose import grid, transpose_padded

    n = GPU_TRANSPOSE
    src = cuda.to_device(np.ones((n, n), np.float32))
    dst = cuda.device_array_like(src)
    blocks, threads = grid(n, n)
    return kc.perf_ratio(lambda: fn[blocks, threads](src, dst),
                         lambda: transpose_padded[blocks, threads](src, dst), 0.8, "8192² transpose")


register(
    Exercise(
        id="lab02.copy", title="coalesced copy kernel",
        spec=lambda x: x.copy(), cases=_copy_cases, run=_run_copy, compare=_compare_copy,
        perf=_perf_copy, plot=False,
        hint="i = cuda.grid(1) gives thread i of the whole grid; guard with if i < src.size, "
             "then dst[i] = src[i]. Consecutive threads must touch consecutive elements.",
    ),
    Exercise(
        id="lab02.transpose", title="padded shared-memory transpose",
        spec=lambda a: np.ascontiguousarray(a.T), cases=_transpose_cases, run=_run_transpose,
        compare=_compare_transpose, perf=_perf_transpose, plot=False,
        hint="Read a 32x32 tile row by row into cuda.shared.array((32, 33), float32), "
             "cuda.syncthreads(), then write it out row by row from the tile's columns, with "
             "blockIdx.x and blockIdx.y swapped. Each thread handles rows ty, ty+8, ty+16, ty+24.",
    ),
)
