"""Shared by the kernel labs (2 and 3): run a student's numba kernel traced in the simulator, judge
its access pattern, and time it against a reference kernel on a GPU.

Serves: lab02 and lab03 (checks that judge kernels by their access traces).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from helpers.perf import access_patterns
from helpers.grading.compare import compare_arrays
from helpers.kernels import simtrace


@dataclass
class KernelRun:
    """The output array of a traced simulator launch, and the trace."""

    out: np.ndarray
    trace: simtrace.Trace


def traced(fn: Any, griddim: Any, blockdim: Any, args: tuple, out_index: int, lines: bool = False) -> KernelRun:
    """Launch `fn` in the simulator on copies of `args`; keep argument `out_index` and the trace."""
    results, trace = simtrace.run_traced(fn, griddim, blockdim, *args, lines=lines)
    return KernelRun(results[out_index], trace)


def values(got: KernelRun, expected: np.ndarray, exact: bool = True) -> None:
    """Compare the output values (exact, or to float32 round-off)."""
    compare_arrays(got.out, expected, exact, 1e-5, 1e-6)


def _worst(requests: dict, cost: Callable[[list], int]) -> list:
    """The warp request with the highest cost."""
    return max(requests.values(), key=cost)


def _show_request(req: list, shared: bool, title: str) -> None:
    """Draw one warp request (sectors or banks) as feedback, GPU-Puzzles style."""
    try:
        if shared:
            access_patterns.draw_banks([a.offset for a in req], title)
        else:
            by_lane = {a.thread % 32: a.offset // a.size for a in req}
            access_patterns.draw_warp(lambda t: by_lane.get(t), title, itemsize=req[0].size)
    except Exception:  # noqa: BLE001 - a picture must never hide the verdict
        pass


def coalesced(got: KernelRun) -> None:
    """Fail when a warp's global requests touch more 32-byte sectors than its bytes need."""
    s = access_patterns.summarize(got.trace)
    if s["sectors_per_request"] > s["ideal_sectors_per_request"] + 1e-9:
        req = _worst(got.trace.requests("global"),
                     lambda r: access_patterns.sectors([a.offset for a in r], r[0].size))
        _show_request(req, False, f"your worst warp request ({'write' if req[0].write else 'read'})")
        raise AssertionError(
            f"the values are right, but your global accesses are not coalesced: a warp request touches "
            f"{s['sectors_per_request']:.1f} sectors of 32 bytes on average where "
            f"{s['ideal_sectors_per_request']:.1f} would do. Neighbouring threads (threadIdx.x, x+1, ...) "
            f"must touch neighbouring elements.")


def conflict_free(got: KernelRun) -> None:
    """Fail unless shared memory is used and no warp access has a bank conflict."""
    s = access_patterns.summarize(got.trace)
    if s["shared_requests"] == 0:
        raise AssertionError("your kernel never touched shared memory; stage the tile in "
                             "cuda.shared.array so that both global sides stay coalesced.")
    if s["worst_bank_conflict"] > 1:
        req = _worst(got.trace.requests("shared"),
                     lambda r: access_patterns.bank_conflict_degree(a.offset for a in r))
        _show_request(req, True, "your worst shared-memory access")
        raise AssertionError(f"the values are right, but shared-memory accesses have up to "
                             f"{s['worst_bank_conflict']}-way bank conflicts (words of one column of a "
                             f"32-wide tile all sit in one bank). Pad the tile.")


def no_divergence(got: KernelRun) -> None:
    """Fail when the lanes of a warp executed different lines of the kernel."""
    paths = got.trace.paths_per_warp()
    worst = max(paths.values(), default=1)
    if worst > 1:
        (block, warp) = next(k for k, v in paths.items() if v == worst)
        raise AssertionError(f"the values are right, but the lanes of warp {warp} of block {block[0]} "
                             f"ran {worst} different paths through your kernel: the warp diverges. "
                             "Choose values with a one-line conditional expression or arithmetic, "
                             "or map work so that a whole warp takes the same branch.")


def perf_ratio(student: Callable[[], Any], reference: Callable[[], Any], needed: float,
               what: str) -> tuple[float, float, str]:
    """Time both launches in the same run (numba events); return (reference ÷ student time, needed, detail)."""
    from helpers.bench import timeit

    t_ref = timeit(reference, backend="numba", warmup=3, repeats=20)
    t_you = timeit(student, backend="numba", warmup=3, repeats=20)
    return (t_ref.median_s / t_you.median_s, needed,
            f"{what}: yours {t_you.median_ms:.3f} ms, reference {t_ref.median_ms:.3f} ms (medians of 20).")
