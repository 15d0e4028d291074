"""The timing primitives of the weight-only GEMM check (``wo_gemm_check``): weight copies that defeat L2, CUDA-graph
capture of a list of calls, interleaved rounds of graph replays, and the answer check that every timed launch passes
first.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

TOLERANCE = 5e-3  # max error / max |y| (FP16 output rounding is 5e-4; FP16 weights and sums add a little)


def relative_error(y: torch.Tensor, ref: torch.Tensor) -> float:
    """max |y - ref| / max |ref|."""
    return float((y.float() - ref.float()).abs().max() / ref.float().abs().max().clamp_min(1e-6))



def capture(calls: list[Callable[[], Any]]) -> Callable[[], Any]:
    """The calls, warmed up on a side stream, captured back to back in one CUDA graph; its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    return g.replay


def time_graphs(graphs: dict[str, tuple[Callable[[], Any], int]], rounds: int, replays: int = 3) -> dict[str, list]:
    """µs per call of each graph (replay, calls in it), one timing of each per round (helpers.bench.timed_rounds)."""
    from helpers.bench import timed_rounds

    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def timer(replay: Callable[[], Any], count: int) -> float:
        begin.record()
        for _ in range(replays):
            replay()
        end.record()
        end.synchronize()
        return begin.elapsed_time(end) * 1e3 / replays / count

    return timed_rounds({name: (lambda r=r, c=c: timer(r, c)) for name, (r, c) in graphs.items()}, rounds)


def answering(calls: dict[str, list], ref: torch.Tensor) -> dict[str, list]:
    """The launches whose first call's answer is within TOLERANCE of `ref` (the dispatch table never picks a launch
    for its speed alone); says which were left out and by how much."""
    kept = {}
    for name, cs in calls.items():
        err = relative_error(cs[0](), ref)
        if err <= TOLERANCE:
            kept[name] = cs
        else:
            print(f"{name} left out of the dispatch table at M = {len(ref)}: error {err:.1e} of max |y| "
                  f"(allowed {TOLERANCE:.0e}).")
    return kept
