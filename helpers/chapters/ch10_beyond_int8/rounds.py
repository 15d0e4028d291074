"""Speed ratios with their noise: medians of interleaved rounds, and the rounds' spread (helpers.spread).

Chapter 10 compares two ways of running the same work (dense vs 2:4, NCHW vs NHWC, INT8 vs FP16 layers).
Each round times both, one after the other, so a slow moment of the machine slows both alike; the
ratio is the median of the rounds' ratios, and its spread (p10..p90, min..max under 5 rounds) is stored
with the record, so that a verdict can say "not resolved at this noise" when the spread holds 1.

Serves: chapter 10.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from helpers.bench import Timing, interleaved, timeit
from helpers.errors import InputError
from helpers.spread import Spread
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

    ``helpers.bench.interleaved``: each round times `per_round` calls of each (CUDA events on a GPU backend),
    after one settling call, and keeps their median; the ms are the medians over the rounds.
    """
    require_int_range(rounds, 1, 1000, "rounds")
    require_int_range(warmup, 1, 10**9, "warmup")
    if rounds == 1:  # one round: a ratio without a spread
        tb = timeit(base, backend=backend, warmup=warmup, repeats=per_round).median_s
        to = timeit(other, backend=backend, warmup=warmup, repeats=per_round).median_s
        if to <= 0:
            raise InputError("every timed call of the second function took 0 s: time more work per call.")
        return tb / to, None, {"base ms": tb * 1e3, "other ms": to * 1e3}
    r = interleaved({"base": base, "other": other}, rounds=rounds, clock=backend, warmup=warmup - 1, settle=1,
                    per_round=per_round)
    ratio, spread = r.ratio("base", "other")
    return ratio, spread, {"base ms": r.median_s("base") * 1e3, "other ms": r.median_s("other") * 1e3}


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
