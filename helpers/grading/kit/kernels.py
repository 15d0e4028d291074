"""Kernel exercises (labs 2 and 3): run a student's numba kernel traced in the simulator, send the
output and the access trace as plain data, and judge values, coalescing, bank conflicts and divergence.

Serves: lab02 and lab03 (checks that judge kernels by their access traces).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from helpers.grading.compare import BadAnswer, compare_arrays
from helpers.kernels import simtrace
from helpers.perf import access_patterns

COPY_THREADS = 128
SUM_THREADS = 256
_FIELDS = ("array", "bx", "by", "bz", "thread", "line", "seq", "offset", "size", "write")


def trace_to_data(trace: simtrace.Trace) -> dict:
    """A Trace as plain data: one int64 row per access, and each thread's executed lines."""
    rows = [[a.space == "shared", a.array, *a.block, a.thread, a.line, a.seq, a.offset, a.size, a.write]
            for a in trace.accesses]
    table = np.asarray(rows, dtype=np.int64).reshape(-1, 1 + len(_FIELDS))
    lines = [[*block, thread, list(map(int, ls))] for (block, thread), ls in trace.lines.items()]
    return {"block_dim": list(trace.block_dim), "accesses": table, "lines": lines}


def trace_from_data(data: dict) -> simtrace.Trace:
    """Rebuild a Trace from trace_to_data()'s plain data (in the grader's own process)."""
    try:
        bx, by, bz = (int(v) for v in data["block_dim"])
        trace = simtrace.Trace(block_dim=(bx, by, bz))
        for r in np.asarray(data["accesses"], dtype=np.int64).reshape(-1, 1 + len(_FIELDS)).tolist():
            trace.accesses.append(simtrace.Access("shared" if r[0] else "global", r[1], (r[2], r[3], r[4]),
                                                  r[5], r[6], r[7], r[8], r[9], bool(r[10])))
        for x, y, z, thread, ls in data["lines"]:
            trace.lines[((int(x), int(y), int(z)), int(thread))] = [int(v) for v in ls]
    except (KeyError, TypeError, ValueError) as err:
        raise BadAnswer(f"the kernel's trace is malformed ({err}).") from None
    return trace


def _launch(fn: Any, griddim: Any, blockdim: Any, args: tuple, out_index: int, lines: bool = False) -> dict:
    """Launch `fn` traced in the simulator; return {'out': argument out_index afterwards, 'trace': data}."""
    if getattr(fn, "py_func", None) is None:
        raise BadAnswer(f"expected a numba @cuda.jit kernel, got {type(fn).__name__}. Decorate your "
                        "function with @cuda.jit and pass the function itself.")
    results, trace = simtrace.run_traced(fn, griddim, blockdim, *args, lines=lines)
    return {"out": results[out_index], "trace": trace_to_data(trace)}


def run_copy(fn: Any, x: np.ndarray) -> dict:
    """copy_kernel[ceil(n/128), 128](src, dst), traced."""
    return _launch(fn, math.ceil(x.size / COPY_THREADS), COPY_THREADS, (x, np.zeros_like(x)), 1)


def run_transpose(fn: Any, a: np.ndarray) -> dict:
    """transpose_kernel[(cols/32, rows/32), (32, 8)](src, dst), traced."""
    from helpers.kernels.transpose import grid

    blocks, threads = grid(*a.shape)
    return _launch(fn, blocks, threads, (a, np.zeros(a.shape[::-1], np.float32)), 1)


def run_divergence(fn: Any, x: np.ndarray, iters: int) -> dict:
    """kernel[n/256, 256](x, out, iters), recording each lane's lines."""
    return _launch(fn, math.ceil(x.size / SUM_THREADS), SUM_THREADS, (x, np.zeros_like(x), iters), 1, lines=True)


def run_block_sum(fn: Any, x: np.ndarray) -> dict:
    """block_sum[ceil(n/256), 256](x, partial), traced."""
    blocks = math.ceil(x.size / SUM_THREADS)
    return _launch(fn, blocks, SUM_THREADS, (x, np.zeros(blocks, np.float32)), 1)


def _run(got: Any) -> tuple[np.ndarray, simtrace.Trace]:
    """(output, trace) from a runner's plain data."""
    if not isinstance(got, dict) or "out" not in got or "trace" not in got:
        raise BadAnswer("the kernel run sent no output and trace.")
    return got["out"], trace_from_data(got["trace"])


def _worst(requests: dict, cost: Callable[[list], int]) -> list:
    """The warp request with the highest cost."""
    return max(requests.values(), key=cost)


def _show_request(req: list, shared: bool, title: str) -> None:
    """Draw one warp request (sectors or banks) as feedback, GPU-Puzzles style."""
    from helpers.grading import feedback

    if not feedback.PICTURES:
        return
    try:
        if shared:
            access_patterns.draw_banks([a.offset for a in req], title)
        else:
            by_lane = {a.thread % 32: a.offset // a.size for a in req}
            access_patterns.draw_warp(lambda t: by_lane.get(t), title, itemsize=req[0].size)
    except Exception:  # noqa: BLE001 - a picture must never hide the verdict
        pass


def coalesced(trace: simtrace.Trace) -> None:
    """Fail when a warp's global requests touch more 32-byte sectors than its bytes need."""
    s = access_patterns.summarize(trace)
    if s["sectors_per_request"] > s["ideal_sectors_per_request"] + 1e-9:
        req = _worst(trace.requests("global"), lambda r: access_patterns.sectors([a.offset for a in r], r[0].size))
        _show_request(req, False, f"your worst warp request ({'write' if req[0].write else 'read'})")
        raise AssertionError(
            f"the values are right, but your global accesses are not coalesced: a warp request touches "
            f"{s['sectors_per_request']:.1f} sectors of 32 bytes on average where "
            f"{s['ideal_sectors_per_request']:.1f} would do. Neighbouring threads (threadIdx.x, x+1, ...) "
            f"must touch neighbouring elements.")


def conflict_free(trace: simtrace.Trace) -> None:
    """Fail unless shared memory is used and no warp access has a bank conflict."""
    s = access_patterns.summarize(trace)
    if s["shared_requests"] == 0:
        raise AssertionError("your kernel never touched shared memory; stage the tile in "
                             "cuda.shared.array so that both global sides stay coalesced.")
    if s["worst_bank_conflict"] > 1:
        req = _worst(trace.requests("shared"), lambda r: access_patterns.bank_conflict_degree(a.offset for a in r))
        _show_request(req, True, "your worst shared-memory access")
        raise AssertionError(f"the values are right, but shared-memory accesses have up to "
                             f"{s['worst_bank_conflict']}-way bank conflicts (words of one column of a "
                             f"32-wide tile all sit in one bank). Pad the tile.")


def _no_divergence(trace: simtrace.Trace) -> None:
    """Fail when the lanes of a warp executed different lines of the kernel."""
    paths = trace.paths_per_warp()
    worst = max(paths.values(), default=1)
    if worst > 1:
        (block, warp) = next(k for k, v in paths.items() if v == worst)
        raise AssertionError(f"the values are right, but the lanes of warp {warp} of block {block[0]} "
                             f"ran {worst} different paths through your kernel: the warp diverges. "
                             "Choose values with a one-line conditional expression or arithmetic, "
                             "or map work so that a whole warp takes the same branch.")


def compare_copy(got: Any, expected: np.ndarray) -> None:
    """Exact values, then coalesced accesses."""
    out, trace = _run(got)
    compare_arrays(out, expected, True, 0, 0)
    coalesced(trace)


def compare_transpose(got: Any, expected: np.ndarray) -> None:
    """Exact values, coalesced global accesses, conflict-free shared memory."""
    out, trace = _run(got)
    compare_arrays(out, expected, True, 0, 0)
    coalesced(trace)
    conflict_free(trace)


def compare_divergence(got: Any, expected: np.ndarray) -> None:
    """Values to float32 round-off, then one path per warp."""
    out, trace = _run(got)
    compare_arrays(out, expected, False, 1e-5, 1e-6)
    _no_divergence(trace)


def compare_values(got: Any, expected: np.ndarray) -> None:
    """Exact output values only."""
    out, _ = _run(got)
    compare_arrays(out, expected, True, 0, 0)
