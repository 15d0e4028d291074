"""Data races found in a simulator trace: two threads touching one address with nothing ordering them.

``helpers.kernels.simtrace`` runs threads one at a time, so a kernel that forgets an atomic or a
barrier can still give the right numbers there. On a GPU the threads run together. This module
records, during a traced launch, which accesses were made by atomics and where each thread passed
``syncthreads``; then two accesses race when they come from different threads, touch the same
element, at least one writes, at least one is not atomic, and no barrier orders them (same block and
same barrier interval; threads of different blocks are never ordered within a launch).

Serves: core — used by labs 02, 03, 11–13.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from helpers.errors import InputError
from helpers.kernels import simtrace

ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min", "nanmax", "nanmin",
           "compare_and_swap", "cas")
_PATCH_LOCK = threading.Lock()


@dataclass
class SyncLog:
    """Which trace entries atomics made, and where each (block, thread) passed a barrier."""

    atomic: set[int] = field(default_factory=set)
    barriers: dict[tuple, list[int]] = field(default_factory=lambda: defaultdict(list))

    def to_data(self) -> dict[str, np.ndarray]:
        """Plain data: atomic trace indices, and one row (bx, by, bz, thread, trace index) per barrier."""
        rows = [[*block, thread, mark] for (block, thread), marks in self.barriers.items() for mark in marks]
        return {"atomic": np.array(sorted(self.atomic), np.int64),
                "barriers": np.array(rows, np.int64).reshape(-1, 5)}

    @classmethod
    def from_data(cls, data: dict) -> "SyncLog":
        """Rebuild a log from to_data()'s plain data."""
        try:
            log = cls(atomic={int(i) for i in np.asarray(data["atomic"]).ravel()})
            for bx, by, bz, thread, mark in np.asarray(data["barriers"], np.int64).reshape(-1, 5).tolist():
                log.barriers[((bx, by, bz), thread)].append(mark)
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"the kernel's barrier and atomic log is malformed ({err}).") from None
        for marks in log.barriers.values():
            marks.sort()
        return log


@dataclass(frozen=True)
class Race:
    """Two unordered accesses to one element, at least one a write and not both atomic."""

    space: str
    array: int
    element: int
    first: simtrace.Access
    second: simtrace.Access
    first_atomic: bool
    second_atomic: bool

    def describe(self, names: dict[int, str] | None = None) -> str:
        """One sentence naming the element, the two threads and their source lines (names: global array id -> name)."""
        def who(a: simtrace.Access, atomic: bool) -> str:
            verb = "writes" if a.write else "reads"
            how = " with an atomic" if atomic else ""
            block = a.block[0] if a.block[1:] == (0, 0) else a.block[:2]
            return f"thread {a.thread} of block {block} {verb} it{how} (line {a.line})"

        if self.space == "shared":
            what = f"element {self.element} of shared array #{self.array - 1000} (in order of allocation)"
        else:
            what = f"{(names or {}).get(self.array, f'global array #{self.array}')}[{self.element}]"
        return (f"{what}: {who(self.first, self.first_atomic)}, {who(self.second, self.second_atomic)}, "
                "and no barrier orders the two")


def _active_trace() -> simtrace.Trace | None:
    """The trace being recorded now (simtrace keeps a stack of them)."""
    return simtrace._ACTIVE[-1] if simtrace._ACTIVE else None


@contextlib.contextmanager
def _recording(log: SyncLog) -> Iterator[None]:
    """Wrap the simulator's atomics and syncthreads so that they leave marks in `log`."""
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator import kernelapi

    def atomic(orig: Any) -> Any:
        def method(self: Any, *args: Any) -> Any:
            trace = _active_trace()
            start = len(trace.accesses) if trace else 0
            out = orig(self, *args)
            if trace is not None:
                log.atomic.update(range(start, len(trace.accesses)))
            return out
        return method

    def syncthreads(self: Any) -> Any:
        trace = _active_trace()
        if trace is not None:
            log.barriers[(tuple(self.blockIdx), self.thread_id)].append(len(trace.accesses))
        return old_sync(self)

    cls = kernelapi.FakeCUDAAtomic
    old = {name: getattr(cls, name) for name in ATOMICS if hasattr(cls, name)}
    old_sync = sim_kernel.BlockThread.syncthreads
    with _PATCH_LOCK:
        for name, fn in old.items():
            setattr(cls, name, atomic(fn))
        sim_kernel.BlockThread.syncthreads = syncthreads  # type: ignore[method-assign]
        try:
            yield
        finally:
            for name, fn in old.items():
                setattr(cls, name, fn)
            sim_kernel.BlockThread.syncthreads = old_sync  # type: ignore[method-assign]


def run_traced(kern: Any, griddim: Any, blockdim: Any, *args: Any,
               lines: bool = False) -> tuple[list[Any], simtrace.Trace, SyncLog]:
    """simtrace.run_traced, also logging atomics and barriers; returns (arguments after, trace, log)."""
    log = SyncLog()
    with _recording(log):
        results, trace = simtrace.run_traced(kern, griddim, blockdim, *args, lines=lines)
    return results, trace, log


def _pair(xs: dict, ys: dict) -> tuple[int, int] | None:
    """Trace indices (x, y) of accesses by two different actors, x from `xs`, y from `ys` (actor -> index)."""
    for xa, xi in xs.items():
        for ya, yi in ys.items():
            if xa != ya:
                return xi, yi
    return None


class _Group:
    """The accesses to one element within one unordered interval, by actor (thread or block)."""

    __slots__ = ("plain_writes", "atomic_writes", "plain", "every")

    def __init__(self) -> None:
        self.plain_writes: dict = {}
        self.atomic_writes: dict = {}
        self.plain: dict = {}
        self.every: dict = {}

    def add(self, actor: Any, index: int, write: bool, atomic: bool) -> None:
        """Remember the first access of each kind by `actor`."""
        self.every.setdefault(actor, index)
        if not atomic:
            self.plain.setdefault(actor, index)
        if write:
            (self.atomic_writes if atomic else self.plain_writes).setdefault(actor, index)

    def race(self) -> tuple[int, int] | None:
        """A plain write against any access, or an atomic write against a plain access, by two actors."""
        return _pair(self.plain_writes, self.every) or _pair(self.atomic_writes, self.plain)


def find_races(trace: simtrace.Trace, log: SyncLog, limit: int = 5) -> list[Race]:
    """Up to `limit` races in a traced launch (one per element), in trace order."""
    threads: dict[tuple, _Group] = defaultdict(_Group)  # (element, block, interval) -> threads
    blocks: dict[tuple, _Group] = defaultdict(_Group)  # global element -> blocks
    written = {(a.space, a.array, a.offset) for a in trace.accesses if a.write}  # only these can race
    for i, a in enumerate(trace.accesses):
        if (a.space, a.array, a.offset) not in written:
            continue
        atomic = i in log.atomic
        marks = log.barriers.get((a.block, a.thread))
        interval = bisect.bisect_right(marks, i) if marks else 0
        element = (a.space, a.array, a.offset // a.size)
        threads[(element, a.block, interval)].add(a.thread, i, a.write, atomic)
        if a.space == "global":
            blocks[element].add(a.block, i, a.write, atomic)
    candidates = [(key[0], g) for key, g in threads.items()] + list(blocks.items())
    found: dict[tuple, tuple[int, Race]] = {}
    for element, group in candidates:
        pair = group.race()
        if pair is None or element in found:
            continue
        i, j = sorted(pair)
        found[element] = (i, Race(element[0], element[1], element[2], trace.accesses[i], trace.accesses[j],
                                  i in log.atomic, j in log.atomic))
    return [race for _, race in sorted(found.values(), key=lambda p: p[0])][:limit]
