"""Lab 12's answer key: the cases, hidden cases, spec and hints of its two histogram exercises (global
atomics, shared-memory bins). How a kernel is run and judged lives on the student's side, in
helpers.labs.lab12_histogram_kernels.kit.

Serves: lab12 (its answer key).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.kernels import histogram
from helpers.labs.lab12_histogram_kernels import kit


def case(n: int, num_bins: int, seed: int, label: str = "") -> Case:
    """n calibration-like values into num_bins bins."""
    return Case(label or f"{n} values, {num_bins} bins", (histogram.activations(np.random.default_rng(seed), n), num_bins))


def spec(x: np.ndarray, num_bins: int) -> dict:
    """The course Histogram's counts (int32), its max |x|, and the percentile and entropy amax from it."""
    ref = histogram.reference(x, num_bins)
    return {"counts": ref.counts.astype(np.int32), "max_abs": float(ref.max_seen), "amax": histogram.amaxes(ref)}


def _cases() -> list[Case]:
    """2048 values into 512 bins (two blocks of 256 threads, four values a thread)."""
    return [case(2048, 512, 120)]


def _hidden() -> list[Case]:
    """A partial last block, and another bin count."""
    return [case(1500, 300, 1200, "hidden: 1500 values, 300 bins")]


register(
    Exercise(
        id="lab12.global_atomics", title="histogram with global atomics", spec=spec, cases=_cases, hidden=_hidden,
        run=kit.run, compare=kit.compare_global, perf=kit.perf_global, plot=False,
        hint="Walk the input with a grid-stride loop and put every value in its bin. Many threads add to "
             "one bin at the same time.",
        hints=("The bin is how many bin widths fit under |x|, computed in float64 like numpy, with the top "
               "edge going to the last bin; the addition must be indivisible (an atomic).",),
    ),
    Exercise(
        id="lab12.shared_bins", title="histogram with shared-memory bins", spec=spec, cases=_cases,
        hidden=_hidden, run=kit.run, compare=kit.compare_shared, perf=kit.perf_shared, plot=False,
        hint="Give each block its own bins in fast shared memory, and touch the global bins only once per "
             "block and bin. Shared memory starts with garbage.",
        hints=("The block's bins go through three phases: cleared, counted into, merged. No thread may start a "
               "phase before every thread of its block has finished the one before, and within the counting "
               "phase many threads still hit the same shared bin.",),
    ),
)
