"""Lab 03 on the student's side: run the divergence and block-sum kernels traced in the simulator and judge
their values, divergence and shared-memory bank conflicts; the GPU speed checks.

Serves: lab 03.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from helpers.grading.compare import compare_arrays
from helpers.grading.kernel_perf import perf_ratio
from helpers.grading.traced import conflict_free, no_divergence, run_traced, unpack

SUM_THREADS = 256


def run_divergence(fn: Any, x: np.ndarray, iters: int) -> dict:
    """kernel[n/256, 256](x, out, iters), recording each lane's lines."""
    return run_traced(fn, math.ceil(x.size / SUM_THREADS), SUM_THREADS, (x, np.zeros_like(x), iters), 1, lines=True)


def run_block_sum(fn: Any, x: np.ndarray) -> dict:
    """block_sum[ceil(n/256), 256](x, partial), traced."""
    blocks = math.ceil(x.size / SUM_THREADS)
    return run_traced(fn, blocks, SUM_THREADS, (x, np.zeros(blocks, np.float32)), 1)


def compare_divergence(got: Any, expected: np.ndarray) -> None:
    """Values to float32 round-off, then one path per warp."""
    out, trace = unpack(got, ("x", "out"))
    compare_arrays(out, expected, False, 1e-5, 1e-6)
    no_divergence(trace)


def compare_block_sum(got: Any, expected: np.ndarray) -> None:
    """Exact values, then a tree in shared memory whose warp accesses have no bank conflicts."""
    out, trace = unpack(got, ("x", "partial"))
    compare_arrays(out, expected, True, 0, 0)
    conflict_free(trace, unused="add the block's values as a tree in a cuda.shared.array.",
                  fix="(with a strided index such as 2·k·tid, lanes of one warp land in the same bank). "
                      "Keep the active threads contiguous.")


# --- speed checks, run only on a GPU in the student's own notebook (same run, as a ratio) ---

GPU_N, GPU_ITERS = 1 << 24, 256


def divergence(fn: Any) -> tuple[float, float, str]:
    """Your kernel vs the reference branch-free kernel (and the divergent one, for information)."""
    from numba import cuda

    from helpers.bench import timeit
    from helpers.kernels.divergence import BRANCHY, branch_free

    x = cuda.to_device(np.ones(GPU_N, np.float32))
    out = cuda.device_array_like(x)
    blocks = GPU_N // SUM_THREADS
    ratio, needed, detail = perf_ratio(lambda: fn[blocks, SUM_THREADS](x, out, GPU_ITERS),
                                       lambda: branch_free[blocks, SUM_THREADS](x, out, GPU_ITERS),
                                       0.8, "16M values, 256 steps, vs branch-free reference")
    div = timeit(lambda: BRANCHY["mod2"][blocks, SUM_THREADS](x, out, GPU_ITERS), backend="numba")
    return ratio, needed, detail + f" The divergent original took {div.median_ms:.3f} ms."


def block_sum(fn: Any) -> tuple[float, float, str]:
    """Your block sums vs the reference shared-memory tree, 16M values, same run."""
    from numba import cuda

    from helpers.kernels.reduction import block_sums

    x = cuda.to_device(np.ones(GPU_N, np.float32))
    partial = cuda.device_array(GPU_N // SUM_THREADS, np.float32)
    blocks = GPU_N // SUM_THREADS
    return perf_ratio(lambda: fn[blocks, SUM_THREADS](x, partial),
                      lambda: block_sums[blocks, SUM_THREADS](x, partial), 0.8, "16M-value block sums")
