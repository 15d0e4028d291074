"""Lab 3: remove warp divergence from a kernel, and write a shared-memory block reduction.

Serves: lab03 (its exercises: spec, visible cases, hint).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.grading.exercises import kernel_checks as kc

THREADS = 256
GPU_N = 1 << 24
GPU_ITERS = 256
SIM_ITERS = 3


def _divergence_cases() -> list[Case]:
    """Two blocks of inputs in 1..2, three recurrence steps."""
    rng = np.random.default_rng(4)
    return [Case("512 values, 3 steps", (1 + rng.random(512, dtype=np.float32), SIM_ITERS))]


def _divergence_spec(x: np.ndarray, iters: int) -> np.ndarray:
    """What the divergent kernel computes (even threads path A, odd threads path B)."""
    from helpers.kernels.divergence import reference

    return reference(x, iters, "mod2", THREADS)


def _run_divergence(fn: Any, case: Case) -> kc.KernelRun:
    """Launch kernel[n/256, 256](x, out, iters) in the simulator, recording each lane's lines."""
    x, iters = case.args
    return kc.traced(fn, math.ceil(x.size / THREADS), THREADS, (x, np.zeros_like(x), iters), 1, lines=True)


def _compare_divergence(got: kc.KernelRun, expected: np.ndarray) -> None:
    """Values to float32 round-off, then one path per warp."""
    kc.values(got, expected, exact=False)
    kc.no_divergence(got)


def _perf_divergence(fn: Any) -> tuple[float, float, str]:
    """Your kernel vs the reference branch-free kernel (and the divergent one, for information)."""
    from numba import cuda

    from helpers.bench import timeit
    from helpers.kernels.divergence import BRANCHY, branch_free

    x = cuda.to_device(np.ones(GPU_N, np.float32))
    out = cuda.device_array_like(x)
    blocks = GPU_N // THREADS
    ratio, needed, detail = kc.perf_ratio(lambda: fn[blocks, THREADS](x, out, GPU_ITERS),
                                          lambda: branch_free[blocks, THREADS](x, out, GPU_ITERS),
                                          0.8, "16M values, 256 steps, vs branch-free reference")
    div = timeit(lambda: BRANCHY["mod2"][blocks, THREADS](x, out, GPU_ITERS), backend="numba")
    return ratio, needed, detail + f" The divergent original took {div.median_ms:.3f} ms."


def _sum_cases() -> list[Case]:
    """Integer-valued floats (exact sums): two full blocks, and a partly filled last block."""
    rng = np.random.default_rng(5)
    return [Case(f"{n} values", (rng.integers(0, 10, n).astype(np.float32),)) for n in (512, 300)]


def _block_sums_spec(x: np.ndarray) -> np.ndarray:
    """Sums of consecutive 256-element chunks (the last one zero-padded)."""
    from helpers.kernels.reduction import block_sums_reference

    return block_sums_reference(x)


def _run_sum(fn: Any, case: Case) -> kc.KernelRun:
    """Launch block_sum[ceil(n/256), 256](x, partial) in the simulator (threads run in turn)."""
    (x,) = case.args
    blocks = math.ceil(x.size / THREADS)
    return kc.traced(fn, blocks, THREADS, (x, np.zeros(blocks, np.float32)), 1)


def _perf_sum(fn: Any) -> tuple[float, float, str]:
    """Your block sums vs the reference shared-memory tree, 16M values, same run."""
    from numba import cuda

    from helpers.kernels.reduction import block_sums

    x = cuda.to_device(np.ones(GPU_N, np.float32))
    partial = cuda.device_array(GPU_N // THREADS, np.float32)
    blocks = GPU_N // THREADS
    return kc.perf_ratio(lambda: fn[blocks, THREADS](x, partial),
                         lambda: block_sums[blocks, THREADS](x, partial), 0.8, "16M-value block sums")


register(
    Exercise(
        id="lab03.branch_free", title="remove the divergence",
        spec=_divergence_spec, cases=_divergence_cases, run=_run_divergence,
        compare=_compare_divergence, perf=_perf_divergence, plot=False, rtol=1e-5, atol=1e-6,
        hint="Both paths are the same recurrence v = v * m + c with different constants. Pick m and c "
             "with a one-line conditional expression (m = A_MUL if even else B_MUL), then run one loop.",
    ),
    Exercise(
        id="lab03.block_sum", title="shared-memory block reduction",
        spec=_block_sums_spec, cases=_sum_cases, run=_run_sum, compare=kc.values,
        perf=_perf_sum, plot=False,
        hint="Each thread stores its element (0 past the end) in a shared array of 256 floats; then "
             "halve k from 128 to 1: if tid < k, s[tid] += s[tid + k], and cuda.syncthreads() after "
             "the store and after every step. Thread 0 writes s[0] to partial[blockIdx.x].",
    ),
)
