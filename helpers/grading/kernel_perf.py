"""GPU speed checks of a student's kernel: time it beside the course's reference kernel and pass when it reaches
a share of its speed, saying too what fraction of the card's speed-of-light limit it reached (kernel labs; skipped
without a GPU).

Serves: core of the labs' checks (labs 02, 03, 11, 12).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

ROUNDS, PER_ROUND = 5, 4  # interleaved rounds, each timing both kernels (numba events, medians of PER_ROUND)


def perf_ratio(student: Callable[[], Any], reference: Callable[[], Any], needed: float,
               what: str, note: Callable[[float], str] | None = None) -> tuple[float, float, str]:
    """Time both launches in interleaved rounds; return (median of the rounds' reference ÷ student time, needed,
    detail with the rounds' spread). `note(seconds)`, given the student's median time, adds a sentence (the kernel
    labs' fraction of the speed-of-light limit, helpers.grading.speed_of_light.note)."""
    from helpers.bench import timeit

    ref_ms, you_ms = [], []
    for r in range(ROUNDS):
        warmup = 3 if r == 0 else 1
        ref_ms.append(timeit(reference, backend="numba", warmup=warmup, repeats=PER_ROUND).median_ms)
        you_ms.append(timeit(student, backend="numba", warmup=warmup, repeats=PER_ROUND).median_ms)
    ratios = [a / b for a, b in zip(ref_ms, you_ms)]
    light = "" if note is None else " " + note(statistics.median(you_ms) / 1e3)
    return (statistics.median(ratios), needed,
            f"{what}: yours {statistics.median(you_ms):.3f} ms, reference {statistics.median(ref_ms):.3f} ms "
            f"(medians of {ROUNDS} interleaved rounds; your share of its speed {min(ratios):.2f}–{max(ratios):.2f})."
            + light)
