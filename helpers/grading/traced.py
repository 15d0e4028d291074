"""The traced-kernel runner every kernel lab shares: run a student's numba kernel in the simulator with its
access trace (and barrier/atomic log), send it as plain data, rebuild it in the grader's process, and judge
values, data races, coalescing, bank conflicts and divergence from it.

Serves: core of the labs' checks (labs 02, 03, 11, 12, 13).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.grading.compare import BadAnswer, compare_arrays
from helpers.kernels import pytwin, races, simtrace
from helpers.perf import access_patterns

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


def run_traced(fn: Any, griddim: Any, blockdim: Any, args: tuple, out_index: int, lines: bool = False) -> dict:
    """Launch `fn` traced in the simulator; return {'out': argument out_index afterwards, 'trace': data}."""
    if getattr(fn, "py_func", None) is None:
        raise BadAnswer(f"expected a numba @cuda.jit kernel, got {type(fn).__name__}. Decorate your "
                        "function with @cuda.jit and pass the function itself.")
    results, trace = simtrace.run_traced(fn, griddim, blockdim, *args, lines=lines)
    return {"out": results[out_index], "trace": trace_to_data(trace)}


def unpack(got: Any) -> tuple[np.ndarray, simtrace.Trace]:
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


def no_divergence(trace: simtrace.Trace) -> None:
    """Fail when the lanes of a warp executed different lines of the kernel."""
    paths = trace.paths_per_warp()
    worst = max(paths.values(), default=1)
    if worst > 1:
        (block, warp) = next(k for k, v in paths.items() if v == worst)
        raise AssertionError(f"the values are right, but the lanes of warp {warp} of block {block[0]} "
                             f"ran {worst} different paths through your kernel: the warp diverges. "
                             "Choose values with a one-line conditional expression or arithmetic, "
                             "or map work so that a whole warp takes the same branch.")


def compare_values(got: Any, expected: np.ndarray) -> None:
    """Exact output values only."""
    out, _ = unpack(got)
    compare_arrays(out, expected, True, 0, 0)


# --- traced runs with a barrier/atomic log (labs 11, 12, 13): data races, atomics ---

FIX_RACE = ("Order the two with cuda.syncthreads() (threads of one block), or make the update "
            "atomic (cuda.atomic.add) when several threads add to one element.")


def launch(fn: Any, griddim: Any, blockdim: Any, args: tuple, out_index: int, **constants: Any) -> dict:
    """Run `fn` traced in the simulator (device functions as Python, `constants` replaced) as plain data."""
    kern = pytwin.simulator_kernel(fn, **constants)
    results, trace, log = races.run_traced(kern, griddim, blockdim, *args)
    return {"out": results[out_index], "trace": trace_to_data(trace), "sync": log.to_data()}


@dataclass
class Run:
    """A decoded traced run: output, trace, barrier/atomic log, names of the global arrays, K."""

    out: np.ndarray
    trace: simtrace.Trace
    log: races.SyncLog
    names: dict[int, str]
    k: int = 0


def decode(got: Any, names: tuple[str, ...]) -> Run:
    """A Run from launch()'s plain data (BadAnswer when it is not one)."""
    if not isinstance(got, dict) or not {"out", "trace", "sync"} <= set(got):
        raise BadAnswer("the kernel run sent no output, trace and barrier log.")
    return Run(np.asarray(got["out"]), trace_from_data(got["trace"]), races.SyncLog.from_data(got["sync"]),
               dict(enumerate(names)), int(got.get("k", 0)))


def first_race(run: Run) -> str | None:
    """The first data race of a run, described, or None."""
    found = races.find_races(run.trace, run.log, limit=1)
    return found[0].describe(run.names) if found else None


def values(run: Run, expected: np.ndarray) -> None:
    """Exact values; when they differ and a race exists, name it as the likely cause."""
    try:
        compare_arrays(run.out, expected, True, 0, 0)
    except AssertionError as err:
        race = first_race(run)
        if race:
            raise AssertionError(f"{err}\nA likely cause, a data race: {race}. {FIX_RACE}") from None
        raise


def race_free(run: Run) -> None:
    """Fail on any data race, even when the one-thread-at-a-time run gave the right values."""
    race = first_race(run)
    if race:
        raise AssertionError(
            "the values are right here, because the checker runs one thread at a time; on a GPU threads "
            f"run together and this is a data race: {race}. {FIX_RACE}")


def reads_only(trace: simtrace.Trace) -> simtrace.Trace:
    """The same trace with only its reads (to judge the coalescing of loads alone)."""
    return simtrace.Trace(trace.block_dim, [a for a in trace.accesses if not a.write])
