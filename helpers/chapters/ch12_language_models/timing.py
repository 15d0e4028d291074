"""Chapter 12's GPU timing: L2-defeating weight copies, one CUDA graph per kernel, kernels interleaved over rounds.

A decoding step reads each layer's weights once, never from cache, so each timed kernel walks through enough copies
of its weight to exceed the L2 cache several times; the calls are captured back to back in one CUDA graph, so that
Python's launch gaps do not count. Every table then times its kernels *interleaved* (``helpers.bench.interleaved``):
round after round, each graph is replayed in turn (the order rotating), so that a clock or temperature change
touches every kernel alike.
The result keeps the spread: median, quartiles, min and max over the rounds, stored with each record.

Serves: chapter 12.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helpers.bench import GRAPH_HARNESS

ROUNDS = 7


@dataclass(frozen=True)
class Spread:
    """Microseconds per call over the rounds: median, quartiles, min, max."""

    samples_us: tuple[float, ...]

    @property
    def median(self) -> float:
        """Median µs per call."""
        return statistics.median(self.samples_us)

    def quartiles(self) -> tuple[float, float]:
        """(first, third) quartile, µs."""
        q = statistics.quantiles(self.samples_us, n=4, method="inclusive") if len(self.samples_us) > 1 else \
            [self.samples_us[0]] * 3
        return q[0], q[2]

    def extra(self) -> dict[str, Any]:
        """The spread as record fields."""
        q1, q3 = self.quartiles()
        return {"min_us": min(self.samples_us), "max_us": max(self.samples_us), "q1_us": q1, "q3_us": q3,
                "rounds": len(self.samples_us)}


def graph(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture fn in a CUDA graph (warmed up first); return its replay."""
    from helpers.bench import graph_replay

    return graph_replay(fn)


def interleaved(calls: dict[str, list[Callable[[], Any]]], rounds: int = ROUNDS, replays: int = 3) -> dict[str, Spread]:
    """µs per call of each list of calls (one graph each), timed round-robin over `rounds` rounds, the order
    rotating (``helpers.bench.interleaved`` in its CUDA-graph replay mode)."""
    from helpers import bench

    fns = {name: (lambda cs=cs: [c() for c in cs]) for name, cs in calls.items()}
    r = bench.interleaved(fns, rounds=rounds, clock="torch", graph=True, rotate=True, inner=replays, warmup=1)
    return {n: Spread(tuple(s * 1e6 / len(calls[n]) for s in r.seconds[n])) for n in calls}


HARNESS = GRAPH_HARNESS  # what every table of this module's timings records


AGREE = 0.05  # two tables showing the same kernel, shape and batch in one harness must agree within 5 %
