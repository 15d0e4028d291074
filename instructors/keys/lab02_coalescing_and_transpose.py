"""Lab 2: a coalesced copy and a bank-conflict-free shared-memory transpose, written in numba.

Serves: lab02 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.labs.lab02_coalescing_and_transpose import kit


def _copy_cases() -> list[Case]:
    """A size that does not fill the last block, and one that does."""
    rng = np.random.default_rng(2)
    return [Case(f"{n} floats", (rng.random(n, dtype=np.float32),)) for n in (1000, 512)]


def _hidden_copy_cases() -> list[Case]:
    """Odd sizes."""
    rng = np.random.default_rng(20)
    return [Case(f"hidden: {n} floats", (rng.random(n, dtype=np.float32),)) for n in (777, 129)]


def _transpose_cases() -> list[Case]:
    """One tile, then a 32 x 64 matrix (two blocks)."""
    rng = np.random.default_rng(3)
    return [Case(f"{r}x{c}", (rng.random((r, c), dtype=np.float32),)) for r, c in ((32, 32), (32, 64))]


def _hidden_transpose_cases() -> list[Case]:
    """A tall matrix and partial tiles."""
    rng = np.random.default_rng(21)
    return [Case("hidden: 64x32", (rng.random((64, 32), dtype=np.float32),)),
            Case("hidden: 20x40 (partial tiles)", (rng.random((20, 40), dtype=np.float32),))]


def copy_spec(x: np.ndarray) -> np.ndarray:
    """The copied array."""
    return x.copy()


def transpose_spec(a: np.ndarray) -> np.ndarray:
    """The transposed array."""
    return np.ascontiguousarray(a.T)


register(
    Exercise(
        id="lab02.copy", title="coalesced copy kernel", spec=copy_spec, cases=_copy_cases,
        hidden=_hidden_copy_cases, run=kit.run_copy, compare=kit.compare_copy,
        perf=kit.copy, plot=False,
        hint="Give each thread of the whole grid one element, so that neighbouring threads touch "
             "neighbouring elements; the last block runs past the end of the array.",
        hints=("cuda.grid(1) is the thread's index in the whole grid. Guard against indices at or past "
               "src.size before touching memory.",),
    ),
    Exercise(
        id="lab02.transpose", title="padded shared-memory transpose", spec=transpose_spec,
        cases=_transpose_cases, hidden=_hidden_transpose_cases, run=kit.run_transpose,
        compare=kit.compare_transpose, perf=kit.transpose, plot=False,
        hint="Stage a 32x32 tile in shared memory: read it with coalesced rows, wait for the whole block, "
             "then write the transposed tile out with coalesced rows too.",
        hints=("One extra column of padding in the shared tile moves each row to a different bank. After the "
               "barrier, the block writes the tile whose block indices are swapped; each thread handles "
               "four rows, 8 apart.",),
    ),
)
