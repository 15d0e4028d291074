"""Speed checks of the kernel labs, run only on a GPU in the student's own notebook: the student's
kernel and the course's reference kernel, timed in the same run, as a ratio.

Serves: lab02 and lab03 (speed checks on a GPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

COPY_THREADS, THREADS = 128, 256
GPU_COPY_N = 1 << 26  # 256 MB of float32: several times the H200's 50 MB L2
GPU_TRANSPOSE = 8192
GPU_N, GPU_ITERS = 1 << 24, 256


def perf_ratio(student: Callable[[], Any], reference: Callable[[], Any], needed: float,
               what: str) -> tuple[float, float, str]:
    """Time both launches in the same run (numba events); return (reference ÷ student time, needed, detail)."""
    from helpers.bench import timeit

    t_ref = timeit(reference, backend="numba", warmup=3, repeats=20)
    t_you = timeit(student, backend="numba", warmup=3, repeats=20)
    return (t_ref.median_s / t_you.median_s, needed,
            f"{what}: yours {t_you.median_ms:.3f} ms, reference {t_ref.median_ms:.3f} ms (medians of 20).")


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


def divergence(fn: Any) -> tuple[float, float, str]:
    """Your kernel vs the reference branch-free kernel (and the divergent one, for information)."""
    from numba import cuda

    from helpers.bench import timeit
    from helpers.kernels.divergence import BRANCHY, branch_free

    x = cuda.to_device(np.ones(GPU_N, np.float32))
    out = cuda.device_array_like(x)
    blocks = GPU_N // THREADS
    ratio, needed, detail = perf_ratio(lambda: fn[blocks, THREADS](x, out, GPU_ITERS),
                                       lambda: branch_free[blocks, THREADS](x, out, GPU_ITERS),
                                       0.8, "16M values, 256 steps, vs branch-free reference")
    div = timeit(lambda: BRANCHY["mod2"][blocks, THREADS](x, out, GPU_ITERS), backend="numba")
    return ratio, needed, detail + f" The divergent original took {div.median_ms:.3f} ms."


def block_sum(fn: Any) -> tuple[float, float, str]:
    """Your block sums vs the reference shared-memory tree, 16M values, same run."""
    from numba import cuda

    from helpers.kernels.reduction import block_sums

    x = cuda.to_device(np.ones(GPU_N, np.float32))
    partial = cuda.device_array(GPU_N // THREADS, np.float32)
    blocks = GPU_N // THREADS
    return perf_ratio(lambda: fn[blocks, THREADS](x, partial),
                      lambda: block_sums[blocks, THREADS](x, partial), 0.8, "16M-value block sums")
