"""Lab 02 on the student's side: run the copy and transpose kernels traced in the simulator and judge their
values, coalescing and bank conflicts; the GPU speed checks.

Serves: lab 02.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from helpers.grading.compare import compare_arrays
from helpers.grading.kernel_perf import perf_ratio
from helpers.grading.traced import coalesced, conflict_free, run_traced, unpack

COPY_THREADS = 128
NAMES = ("src", "dst")  # the kernels' array arguments


def run_copy(fn: Any, x: np.ndarray) -> dict:
    """copy_kernel[ceil(n/128), 128](src, dst), traced."""
    return run_traced(fn, math.ceil(x.size / COPY_THREADS), COPY_THREADS, (x, np.zeros_like(x)), 1)


def run_transpose(fn: Any, a: np.ndarray) -> dict:
    """transpose_kernel[(cols/32, rows/32), (32, 8)](src, dst), traced."""
    from helpers.kernels.transpose import grid

    blocks, threads = grid(*a.shape)
    return run_traced(fn, blocks, threads, (a, np.zeros(a.shape[::-1], np.float32)), 1)


def compare_copy(got: Any, expected: np.ndarray) -> None:
    """Exact values, then coalesced accesses."""
    out, trace = unpack(got, NAMES)
    compare_arrays(out, expected, True, 0, 0)
    coalesced(trace)


def compare_transpose(got: Any, expected: np.ndarray) -> None:
    """Exact values, coalesced global accesses, conflict-free shared memory."""
    out, trace = unpack(got, NAMES)
    compare_arrays(out, expected, True, 0, 0)
    coalesced(trace)
    conflict_free(trace)


# --- speed checks, run only on a GPU in the student's own notebook (same run, as a ratio) ---

GPU_COPY_N = 1 << 26  # 256 MB of float32: several times the H200's 50 MB L2


GPU_TRANSPOSE = 8192


def copy(fn: Any) -> tuple[float, float, str]:
    """Your copy vs the reference one-element-per-thread copy, 256 MB, same run."""
    from numba import cuda

    from helpers.kernels.copy import copy_simple

    src = cuda.to_device(np.ones(GPU_COPY_N, np.float32))
    dst = cuda.device_array_like(src)
    blocks = math.ceil(GPU_COPY_N / COPY_THREADS)
    return perf_ratio(lambda: fn[blocks, COPY_THREADS](src, dst),
                      lambda: copy_simple[blocks, COPY_THREADS](src, dst), 0.9, "256 MB copy")


def transpose(fn: Any) -> tuple[float, float, str]:
    """Your transpose vs the reference padded transpose, 8192 x 8192 float32, same run."""
    from numba import cuda

    from helpers.kernels.transpose import grid, transpose_padded

    n = GPU_TRANSPOSE
    src = cuda.to_device(np.ones((n, n), np.float32))
    dst = cuda.device_array_like(src)
    blocks, threads = grid(n, n)
    return perf_ratio(lambda: fn[blocks, threads](src, dst),
                      lambda: transpose_padded[blocks, threads](src, dst), 0.8, "8192² transpose")
