"""Lab 3: remove warp divergence from a kernel, and write a shared-memory block reduction.

Serves: lab03 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.labs.lab03_divergence_and_reduction import kit

SIM_ITERS = 3


def _divergence_cases() -> list[Case]:
    """Two blocks of inputs in 1..2, three recurrence steps."""
    rng = np.random.default_rng(4)
    return [Case("512 values, 3 steps", (1 + rng.random(512, dtype=np.float32), SIM_ITERS))]


def _hidden_divergence_cases() -> list[Case]:
    """One block, five steps."""
    rng = np.random.default_rng(30)
    return [Case("hidden: 256 values, 5 steps", (rng.random(256, dtype=np.float32), 5))]


def divergence_spec(x: np.ndarray, iters: int) -> np.ndarray:
    """What the divergent kernel computes (even threads path A, odd threads path B)."""
    from helpers.kernels.divergence import reference

    return reference(x, iters, "mod2", kit.SUM_THREADS)


def _sum_cases() -> list[Case]:
    """Integer-valued floats (exact sums): two full blocks, and a partly filled last block."""
    rng = np.random.default_rng(5)
    return [Case(f"{n} values", (rng.integers(0, 10, n).astype(np.float32),)) for n in (512, 300)]


def _hidden_sum_cases() -> list[Case]:
    """Three blocks, and a block that is almost empty."""
    rng = np.random.default_rng(31)
    return [Case("hidden: 768 values", (rng.integers(0, 9, 768).astype(np.float32),)),
            Case("hidden: 10 values", (rng.integers(0, 9, 10).astype(np.float32),))]


def block_sums_spec(x: np.ndarray) -> np.ndarray:
    """Sums of consecutive 256-element chunks (the last one zero-padded)."""
    from helpers.kernels.reduction import block_sums_reference

    return block_sums_reference(x)


register(
    Exercise(
        id="lab03.branch_free", title="remove the divergence", spec=divergence_spec, cases=_divergence_cases,
        hidden=_hidden_divergence_cases, run=kit.run_divergence, compare=kit.compare_divergence,
        perf=kit.divergence, plot=False,
        hint="Both paths do the same kind of step with different constants: choose the constants per "
             "thread, then let every lane run one and the same loop.",
        hints=("A one-line conditional expression (value_a if condition else value_b) selects a value without "
               "branching the warp; the loop body then has no if at all.",),
    ),
    Exercise(
        id="lab03.block_sum", title="shared-memory block reduction", spec=block_sums_spec, cases=_sum_cases,
        hidden=_hidden_sum_cases, run=kit.run_block_sum, compare=kit.compare_block_sum,
        perf=kit.block_sum, plot=False,
        hint="Each block adds its 256 values as a tree in shared memory: halve the number of active threads "
             "at each step, and wait for the whole block between steps.",
        hints=("Threads past the end of x store 0. At each step thread t (t below the half) adds the value one "
               "half further along; cuda.syncthreads() after the first store and after every step. Thread 0 "
               "writes the block's total.",),
    ),
)
