"""The traced-kernel runner every kernel lab shares. On the student's side a runner sends the kernel as source
and its launch as plain data (``run_traced``, ``launch``); the checker compiles it for a GPU and replays it
traced in a helper process of its own (``helpers.grading.kernel_compile``), then judges values, data races,
coalescing, bank conflicts and divergence from that record, which no code of the submission could touch.

Serves: core of the labs' checks (labs 02, 03, 11, 12, 13).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.grading import kernel_compile
from helpers.grading.compare import BadAnswer, compare_arrays
from helpers.grading.kernel_source import describe
from helpers.kernels import races, simtrace
from helpers.perf import access_patterns

_FIELDS = simtrace.FIELDS
_LAUNCH = ("kernel", "grid", "block", "args", "out_index")
_EXTENSIONS: list[str] = []  # the simulator extensions active now, as 'module:name'


def simulator_extension(make: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a course context manager that adds to the simulator (e.g. warp shuffles, no arguments): a launch
    made inside it is replayed inside it, in the checker's helper."""
    ref = f"{make.__module__}:{make.__qualname__}"

    @functools.wraps(make)
    @contextlib.contextmanager
    def active() -> Iterator[None]:
        with make():
            _EXTENSIONS.append(ref)
            try:
                yield
            finally:
                _EXTENSIONS.remove(ref)

    active.simulator_extension = True  # type: ignore[attr-defined]
    return active


def trace_to_data(trace: simtrace.Trace) -> dict:
    """A Trace as plain data: one int64 row per access, each thread's executed lines, the non-element accesses."""
    return simtrace.to_data(trace)


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
        trace.bulk = [(int(ln), int(arr), bool(w), str(ix)) for ln, arr, w, ix in data.get("bulk", [])]
    except (KeyError, TypeError, ValueError) as err:
        raise BadAnswer(f"the kernel's trace is malformed ({err}).") from None
    return trace


def _request(fn: Any, griddim: Any, blockdim: Any, args: tuple, out_index: int, lines: bool = False,
             **constants: Any) -> dict:
    """A launch as plain data: the kernel's source and globals (constants replaced), grid, block, arguments."""
    return {"kernel": describe(fn, **constants), "grid": griddim, "block": blockdim, "args": tuple(args),
            "out_index": int(out_index), "lines": bool(lines), "extensions": list(dict.fromkeys(_EXTENSIONS))}


def run_traced(fn: Any, griddim: Any, blockdim: Any, args: tuple, out_index: int, lines: bool = False) -> dict:
    """The launch of `fn` as plain data, to be compiled and replayed traced by the checker (unpack())."""
    return _request(fn, griddim, blockdim, args, out_index, lines)


def non_elements(trace: simtrace.Trace, names: dict[int, str] | None = None) -> None:
    """Fail when the kernel touched a whole slice or row of an array instead of single elements."""
    if trace.bulk:
        line, array, write, index = trace.bulk[0]
        what = (names or {}).get(array, "a shared array" if array >= 1000 else f"array #{array}")
        raise AssertionError(
            f"line {line} of your kernel {'writes' if write else 'reads'} {what}{index} at once, not one element. "
            f"{kernel_compile.EXPLAIN}")


def replayed(got: Any, names: dict[int, str] | None = None) -> dict:
    """Compile and replay a runner's launch in the checker's helper; {'out', 'trace', 'sync'} as plain data."""
    if not isinstance(got, dict) or not set(_LAUNCH) <= set(got) or not isinstance(got["kernel"], dict):
        raise AssertionError("the kernel run sent no kernel source and launch to replay.")
    args = got["args"] if isinstance(got["args"], (tuple, list)) else ()
    data = kernel_compile.replay(got["kernel"], got["grid"], got["block"], tuple(args), got["out_index"],
                                 bool(got.get("lines", False)), list(got.get("extensions", [])))
    non_elements(trace_from_data(data["trace"]), names)
    return data


def unpack(got: Any, names: tuple[str, ...] = ()) -> tuple[np.ndarray, simtrace.Trace]:
    """(output, trace) of a runner's launch, replayed by the checker (names: the array arguments', for messages)."""
    data = replayed(got, dict(enumerate(names)))
    return np.asarray(data["out"]), trace_from_data(data["trace"])


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


TILE_UNUSED = "stage the tile in cuda.shared.array so that both global sides stay coalesced."
TILE_FIX = "(words of one column of a 32-wide tile all sit in one bank). Pad the tile."


def conflict_free(trace: simtrace.Trace, *, unused: str = TILE_UNUSED, fix: str = TILE_FIX) -> None:
    """Fail unless shared memory is used and no warp access has a bank conflict; `unused` and `fix` finish
    the two messages for the exercise at hand (by default the transpose's tile, labs 02 and 11)."""
    s = access_patterns.summarize(trace)
    if s["shared_requests"] == 0:
        raise AssertionError(f"your kernel never touched shared memory; {unused}")
    if s["worst_bank_conflict"] > 1:
        req = _worst(trace.requests("shared"), lambda r: access_patterns.bank_conflict_degree(a.offset for a in r))
        _show_request(req, True, "your worst shared-memory access")
        raise AssertionError(f"the values are right, but shared-memory accesses have up to "
                             f"{s['worst_bank_conflict']}-way bank conflicts {fix}")


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
    """The launch of `fn` (its globals `constants` replaced) as plain data, replayed with its barrier/atomic log by decode()."""
    return _request(fn, griddim, blockdim, args, out_index, **constants)


@dataclass
class Run:
    """A decoded traced run: output, trace, barrier/atomic log, names of the global arrays, K."""

    out: np.ndarray
    trace: simtrace.Trace
    log: races.SyncLog
    names: dict[int, str]
    k: int = 0


def decode(got: Any, names: tuple[str, ...]) -> Run:
    """A Run from launch()'s plain data, compiled and replayed by the checker (AssertionError when it is no kernel)."""
    named = dict(enumerate(names))
    data = replayed(got, named)
    return Run(np.asarray(data["out"]), trace_from_data(data["trace"]), races.SyncLog.from_data(data["sync"]),
               named, int(got.get("k", 0)))


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
