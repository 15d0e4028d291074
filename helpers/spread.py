"""The spread of a measured value, stored with its record: repeated runs, seeds, or a bootstrap.

A difference between two measurements is a finding only when it is larger than their noise. The noise
travels with the record, in its extras, as an interval and the method that gave it:

    from helpers import bench, spread
    s = spread.bootstrap(per_window_losses)               # 95 % interval of the mean, over the eval set
    bench.record("ch12.ppl.g128", ppl, "perplexity", **s.extra())
    s = spread.of_samples(ratios_of_each_round)           # p10..p90 of repeated rounds
    s = spread.of_timing(bench.timeit(fn))                 # p10..p90 of a Timing, by bench's own percentiles
    spread.of_record(rec)                                 # back from a stored record (or None)

``helpers.findings`` reads it back and says "not resolved at this noise" when a difference is inside it.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.errors import InputError

INTERLEAVED = "interleaved rounds"  # in the method of a spread over rounds that timed every kernel in turn
LEVEL = 0.95          # bootstrap interval level
ROUNDS = 1000         # bootstrap resamples


@dataclass(frozen=True)
class Spread:
    """An interval [lo, hi] around a measured value, and how it was obtained."""

    lo: float
    hi: float
    method: str       # 'p10..p90 of 20 runs', 'bootstrap 95 % over 192 windows', 'min..max of 3 seeds'

    def __post_init__(self) -> None:
        if not (np.isfinite(self.lo) and np.isfinite(self.hi)) or self.lo > self.hi:
            raise InputError(f"a spread needs finite lo <= hi, got {self.lo}..{self.hi}.")

    def contains(self, x: float) -> bool:
        """True when x lies inside the interval (ends included)."""
        return self.lo <= x <= self.hi

    def extra(self) -> dict[str, Any]:
        """The keyword extras that store it with a record: ``bench.record(..., **s.extra())``."""
        return {"lo": float(self.lo), "hi": float(self.hi), "spread": self.method}

    def __str__(self) -> str:
        return f"{self.lo:.3g}..{self.hi:.3g} ({self.method})"


def geomean(values: Iterable[float]) -> float:
    """The geometric mean of positive numbers, the course's mean of ratios over shapes (InputError when empty or when
    one is not > 0)."""
    vals = list(values)
    if not vals:
        raise InputError("a geometric mean needs at least one value; none was measured.")
    bad = [v for v in vals if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
    if bad:
        raise InputError(f"a geometric mean needs positive, finite values; got {bad[:3]}.")
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _finite(values: Sequence[float], what: str) -> np.ndarray:
    """The values as a 1-D float array; a clear error when empty or not finite."""
    a = np.asarray(values, dtype=float).ravel()
    if a.size == 0 or not np.isfinite(a).all():
        raise InputError(f"{what} must be a non-empty list of finite numbers, got {a.size} values.")
    return a


def of_samples(samples: Sequence[float], what: str = "runs") -> Spread:
    """p10..p90 of repeated measurements of one value (at least 2: rounds, seeds)."""
    a = _finite(samples, "samples")
    if a.size < 2:
        raise InputError("a spread of repeated runs needs at least 2 of them; measure again.")
    lo, hi = np.percentile(a, [10, 90]) if a.size >= 5 else (a.min(), a.max())
    how = "p10..p90" if a.size >= 5 else "min..max"
    return Spread(float(lo), float(hi), f"{how} of {a.size} {what}")


def of_timing(t: Any, per_call: Callable[[float], float] | None = None) -> Spread:
    """p10..p90 of a ``helpers.bench.Timing`` (its own percentiles), in seconds or mapped by per_call(seconds);
    a decreasing map such as GB/s = bytes / s swaps the ends."""
    ends = [t.percentile_s(10), t.percentile_s(90)]
    if per_call is not None:
        ends = sorted(per_call(e) for e in ends)
    return Spread(float(ends[0]), float(ends[1]), f"p10..p90 of {len(t.samples_s)} timed samples")


def bootstrap(per_item: Sequence[float], stat: Callable[[np.ndarray], float] = np.mean, *,
              what: str = "items", level: float = LEVEL, rounds: int = ROUNDS, seed: int = 0) -> Spread:
    """A percentile-bootstrap interval of `stat` over the evaluation set's per-item values."""
    a = _finite(per_item, "per_item")
    if not 0 < level < 1:
        raise InputError(f"level must be between 0 and 1, got {level}.")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(rounds, a.size))
    stats = a[idx].mean(axis=1) if stat is np.mean else np.array([stat(a[i]) for i in idx])
    lo, hi = np.percentile(stats, [50 * (1 - level), 50 * (1 + level)])
    return Spread(float(lo), float(hi), f"bootstrap {level:.0%} over {a.size} {what}")


def bootstrap_paired(a: Sequence[float], b: Sequence[float], stat: Callable[[np.ndarray], float] = np.mean,
                     *, what: str = "items", level: float = LEVEL, rounds: int = ROUNDS,
                     seed: int = 0) -> Spread:
    """Interval of stat(a) − stat(b) when a and b are scored on the same items (the same windows, images)."""
    x, y = _finite(a, "a"), _finite(b, "b")
    if x.size != y.size:
        raise InputError(f"paired values need the same items: got {x.size} and {y.size}.")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(rounds, x.size))
    diffs = (x[idx].mean(axis=1) - y[idx].mean(axis=1) if stat is np.mean
             else np.array([stat(x[i]) - stat(y[i]) for i in idx]))
    lo, hi = np.percentile(diffs, [50 * (1 - level), 50 * (1 + level)])
    return Spread(float(lo), float(hi), f"paired bootstrap {level:.0%} over {x.size} {what}")


def ratio(num: Spread, den: Spread) -> Spread:
    """The widest interval of num / den from the two intervals (both positive)."""
    if num.lo <= 0 or den.lo <= 0:
        raise InputError("ratio() of spreads needs positive intervals.")
    return Spread(num.lo / den.hi, num.hi / den.lo, f"{num.method} / {den.method}")


def interleaved(spread: Spread | None) -> bool:
    """True when a spread comes from interleaved rounds (``paired_ratio``, or rounds' ends of interleaved timings):
    drift of the GPU between kernels then touched both sides of a ratio alike. A quotient of two timings taken one
    after another, or no spread, leaves that drift in the ratio."""
    return spread is not None and INTERLEAVED in spread.method


def paired_ratio(base_s: Sequence[float], other_s: Sequence[float]) -> tuple[float, Spread | None]:
    """base ÷ other time from interleaved rounds (the i-th samples share a round): the median of the per-round
    ratios and their spread (None for a single round)."""
    if len(base_s) != len(other_s):
        raise InputError(f"interleaved timings have one sample per round each; got {len(base_s)} and {len(other_s)}.")
    ratios = [x / y for x, y in zip(base_s, other_s) if y > 0]
    if not ratios:
        raise InputError("every timed call took 0 s: time more work per call.")
    return float(np.median(ratios)), of_samples(ratios, INTERLEAVED) if len(ratios) > 1 else None


def of_extra(extra: Mapping[str, Any]) -> Spread | None:
    """The spread stored in a record's extras by ``Spread.extra()`` (None when it has none)."""
    lo, hi = extra.get("lo"), extra.get("hi")
    if not isinstance(lo, (int, float)) or not isinstance(hi, (int, float)) or lo > hi:
        return None
    return Spread(float(lo), float(hi), str(extra.get("spread", "stored interval")))


def of_record(rec: Any) -> Spread | None:
    """The spread stored with a ``helpers.bench.Record`` (None when it was recorded without one)."""
    return of_extra(getattr(rec, "extra", None) or {})
