"""GPU speed checks of a student's kernel: time it beside the course's reference kernel and pass when it reaches
a share of its speed (kernel labs; skipped without a GPU).

Serves: core of the labs' checks (labs 02, 03, 11, 12).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def perf_ratio(student: Callable[[], Any], reference: Callable[[], Any], needed: float,
               what: str) -> tuple[float, float, str]:
    """Time both launches in the same run (numba events); return (reference ÷ student time, needed, detail)."""
    from helpers.bench import timeit

    t_ref = timeit(reference, backend="numba", warmup=3, repeats=20)
    t_you = timeit(student, backend="numba", warmup=3, repeats=20)
    return (t_ref.median_s / t_you.median_s, needed,
            f"{what}: yours {t_you.median_ms:.3f} ms, reference {t_ref.median_ms:.3f} ms (medians of 20).")
