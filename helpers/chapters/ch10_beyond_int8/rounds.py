"""Speed ratios with their noise: medians of interleaved rounds, and the rounds' spread (helpers.spread).

Chapter 10 compares two ways of running the same work (dense vs 2:4, NCHW vs NHWC, INT8 vs FP16 layers).
Each round times both, one after the other, so a slow moment of the machine slows both alike; the
ratio is the median of the rounds' ratios, and its spread (p10..p90, min..max under 5 rounds) is stored
with the record, so that a verdict can say "not resolved at this noise" when the spread holds 1.

Serves: chapter 10.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

from helpers.bench import Timing, timeit
from helpers.errors import InputError
from helpers.spread import Spread, of_samples
from helpers.spread import paired_ratio as paired
from helpers.validation import require_int_range

ROUNDS, PER_ROUND = 5, 4  # interleaved rounds; timed calls of each function per round (their median)


def paired_ratio(timings: Mapping[str, Timing], base: str, other: str) -> tuple[float, Spread | None]:
    """base ÷ other time (> 1: `other` is faster) from ``timeit_interleaved`` timings, whose i-th samples
    share a round: the median of the per-round ratios and their spread (None for a single round)."""
    if base not in timings or other not in timings:
        raise InputError(f"paired_ratio needs timings named {base!r} and {other!r}; got {', '.join(timings)}.")
    return paired(timings[base].samples_s, timings[other].samples_s)


def speed_ratio(base: Callable[[], Any], other: Callable[[], Any], *, backend: str, rounds: int = ROUNDS,
                per_round: int = PER_ROUND, warmup: int = 3) -> tuple[float, Spread | None, dict[str, float]]:
    """(median over interleaved rounds of base ÷ other time, the rounds' spread, {'base ms', 'other ms'}).

    Each round times `per_round` calls of each with ``helpers.bench.timeit`` (CUDA events on a GPU
    backend) and keeps their medians; the ms are the medians over the rounds.
    """
    require_int_range(rounds, 1, 1000, "rounds")
    ratios, t_base, t_other = [], [], []
    for r in range(rounds):
        tb = timeit(base, backend=backend, warmup=warmup if r == 0 else 1, repeats=per_round).median_s
        to = timeit(other, backend=backend, warmup=warmup if r == 0 else 1, repeats=per_round).median_s
        t_base.append(tb)
        t_other.append(to)
        ratios.append(tb / to if to > 0 else float("inf"))
    finite = [x for x in ratios if x != float("inf")]
    if not finite:
        raise InputError("every timed call of the second function took 0 s: time more work per call.")
    spread = of_samples(finite, "interleaved rounds") if len(finite) > 1 else None
    ms = {"base ms": statistics.median(t_base) * 1e3, "other ms": statistics.median(t_other) * 1e3}
    return statistics.median(finite), spread, ms


def row_spread(row: Mapping[str, Any], key: str) -> Spread | None:
    """The spread a timing row holds for `key` under '<key> spread' (None when it has none)."""
    s = row.get(f"{key} spread")
    return s if isinstance(s, Spread) else None


def with_spread(row: dict[str, Any], key: str, spread: Spread | None) -> dict[str, Any]:
    """`row` with the spread of its `key` added as '<key> spread' (a table shows it as 'lo..hi (method)')."""
    if spread is not None:
        row[f"{key} spread"] = spread
    return row


def extra(row: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The record extras of a row's spread for `key`: ``bench.record(..., **rounds.extra(row, key))``."""
    s = row_spread(row, key)
    return {} if s is None else s.extra()
