"""Run a numba kernel in the CUDA simulator, deterministically, and record what each thread touched.

Threads run one at a time in threadIdx order, each until it reaches ``syncthreads`` or ends, so a
missing barrier gives a wrong answer every time instead of now and then. Every global and shared
array access is logged (thread, byte offset, read/write); optionally each thread's executed lines.
``helpers.perf.access_patterns`` turns a trace into sectors per warp request and bank conflicts.
Works on any machine: on a GPU machine the kernel's Python source is run by the simulator too.

Serves: core — used by chapter 4 and labs 02, 03, 11–13.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from helpers.errors import InputError

_LOCK = threading.Lock()
FIELDS = ("array", "bx", "by", "bz", "thread", "line", "seq", "offset", "size", "write")  # to_data()'s columns, after "shared"
_ACTIVE: list["Trace"] = []


@dataclass(frozen=True)
class Access:
    """One element access by one simulated thread."""

    space: str  # "global" or "shared"
    array: int  # which array (numbered in order of first appearance)
    block: tuple[int, int, int]
    thread: int  # linear thread index inside the block (x fastest)
    line: int  # source line of the kernel that made the access
    seq: int  # this thread's n-th access to this memory space from this line
    offset: int  # byte offset inside the array
    size: int  # bytes
    write: bool


@dataclass
class Trace:
    """Everything one traced launch did, with the block shape to map threads to warps."""

    block_dim: tuple[int, int, int]
    accesses: list[Access] = field(default_factory=list)
    lines: dict[tuple[tuple[int, int, int], int], list[int]] = field(default_factory=dict)
    bulk: list[tuple[int, int, bool, str]] = field(default_factory=list)  # (line, array, write, index): not one element
    _seq: dict = field(default_factory=lambda: defaultdict(int), repr=False)

    def requests(self, space: str) -> dict[tuple, list[Access]]:
        """Warp-level requests: the k-th access from one source line by the lanes of a warp, grouped."""
        out: dict[tuple, list[Access]] = defaultdict(list)
        for a in self.accesses:
            if a.space == space:
                out[(a.block, a.thread // 32, a.line, a.seq)].append(a)
        return dict(out)

    def paths_per_warp(self) -> dict[tuple, int]:
        """How many different line sequences the lanes of each warp executed (1 = no divergence)."""
        seqs: dict[tuple, set] = defaultdict(set)
        for (block, thread), lines in self.lines.items():
            seqs[(block, thread // 32)].add(tuple(lines))
        return {k: len(v) for k, v in seqs.items()}


def to_data(trace: Trace) -> dict:
    """A Trace as plain data: one int64 row per access, each thread's executed lines, the non-element accesses."""
    rows = [[a.space == "shared", a.array, *a.block, a.thread, a.line, a.seq, a.offset, a.size, a.write]
            for a in trace.accesses]
    table = np.asarray(rows, dtype=np.int64).reshape(-1, 1 + len(FIELDS))
    lines = [[*block, thread, list(map(int, ls))] for (block, thread), ls in trace.lines.items()]
    bulk = [[int(line), int(array), bool(write), str(index)] for line, array, write, index in trace.bulk]
    return {"block_dim": list(trace.block_dim), "accesses": table, "lines": lines, "bulk": bulk}


class TracedArray(np.ndarray):
    """A numpy array that logs element reads and writes made by simulated CUDA threads."""

    _space = "global"
    _array_id = 0

    def __getitem__(self, idx: Any) -> Any:
        _log(self, idx, False)
        return super().__getitem__(idx)

    def __setitem__(self, idx: Any, value: Any) -> None:
        _log(self, idx, True)
        super().__setitem__(idx, value)


def _log(arr: TracedArray, idx: Any, write: bool) -> None:
    """Append one access to the active trace (ignored outside simulated threads)."""
    if not _ACTIVE:
        return
    me = threading.current_thread()
    if not hasattr(me, "thread_id"):
        return
    ix = idx if isinstance(idx, tuple) else (idx,)
    if len(ix) != arr.ndim or not all(isinstance(i, (int, np.integer)) for i in ix):
        _ACTIVE[-1].bulk.append((_kernel_line(), arr._array_id, write, _index_text(ix, arr.ndim)))
        return
    try:
        flat = int(np.ravel_multi_index(tuple(int(i) for i in ix), arr.shape, mode="raise"))
    except ValueError:
        return
    trace = _ACTIVE[-1]
    block = tuple(me.blockIdx)
    line = _kernel_line()
    key = (block, me.thread_id, arr._space, line)
    seq = trace._seq[key]
    trace._seq[key] = seq + 1
    trace.accesses.append(Access(arr._space, arr._array_id, block, me.thread_id, line, seq,
                                 flat * arr.itemsize, arr.itemsize, write))


def _index_text(ix: tuple, ndim: int) -> str:
    """An index as written in a kernel, e.g. '[:, :]' or '[3]' (of a 2-D array)."""
    def one(i: Any) -> str:
        if isinstance(i, slice):
            return ":" if (i.start, i.stop, i.step) == (None, None, None) else f"{i.start}:{i.stop}"
        return "..." if i is Ellipsis else (str(int(i)) if isinstance(i, (int, np.integer)) else type(i).__name__)
    text = f"[{', '.join(map(one, ix))}]"
    return text if len(ix) >= ndim else f"{text} (a whole part of a {ndim}-D array)"


def _kernel_line() -> int:
    """Line number of the innermost frame outside this module and numba's simulator (the kernel's)."""
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename == __file__ or "simulator" in f.f_code.co_filename):
        f = f.f_back
    return f.f_lineno if f is not None else -1


def _traced(a: np.ndarray, space: str, array_id: int) -> TracedArray:
    """A traced view of a C-contiguous array."""
    t = np.ascontiguousarray(a).view(TracedArray)
    t._space, t._array_id = space, array_id
    return t


def _wait(t: threading.Thread) -> None:
    """Wait until a simulated thread is parked at syncthreads or has ended."""
    while t.is_alive() and not t.syncthreads_blocked:
        time.sleep(0)


def _sequential_run(self: Any, grid_point: tuple, *args: Any) -> None:
    """Replacement for the simulator's BlockManager.run: one thread at a time, in threadIdx order."""
    from numba.cuda.simulator.kernel import BlockThread

    def target() -> None:
        self._f(*args)

    threads = [BlockThread(target, self, grid_point, p, self._debug) for p in np.ndindex(*self._block_dim)]
    threads.sort(key=lambda t: t.thread_id)
    for t in threads:
        t.start()
        _wait(t)
    while any(t.is_alive() for t in threads):
        if any(t.exception for t in threads):
            for t in threads:
                t.abort = True
        for t in threads:
            if t.is_alive() and t.syncthreads_blocked:
                t.syncthreads_blocked = False
                t.syncthreads_event.set()
                _wait(t)
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def _shared_array_factory(counter: list[int]) -> Any:
    """A FakeCUDAShared.array replacement: NaN/-1-filled traced arrays, one per source line."""

    def array(self: Any, shape: Any, dtype: Any, alignment: Any = None) -> np.ndarray:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = np.dtype(str(dtype))  # a numba type such as numba.float32
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        res = self._allocations.get(key)
        if res is None:
            fill = np.nan if dt.kind == "f" else -1
            counter[0] += 1
            res = _traced(np.full(shape, fill, dt), "shared", 1000 + counter[0])
            self._allocations[key] = res
        return res

    return array


def simulated(kern: Any) -> Any:
    """A simulator kernel running the Python source of `kern` (a numba @cuda.jit kernel)."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    py = getattr(kern, "py_func", None) or getattr(kern, "fn", None)
    if py is None or not callable(py):
        raise InputError(f"expected a numba @cuda.jit kernel, got {type(kern).__name__}. "
                         "Decorate your function with @cuda.jit and pass the function itself.")
    return FakeCUDAKernel(py, device=False)


@contextlib.contextmanager
def _patched(counter: list[int]) -> Iterator[None]:
    """Swap in the sequential scheduler and traced shared memory for the duration of a launch."""
    from numba.cuda.simulator import kernel as sim_kernel
    from numba.cuda.simulator import kernelapi

    old_run, old_array = sim_kernel.BlockManager.run, kernelapi.FakeCUDAShared.array
    sim_kernel.BlockManager.run = _sequential_run
    kernelapi.FakeCUDAShared.array = _shared_array_factory(counter)
    try:
        yield
    finally:
        sim_kernel.BlockManager.run, kernelapi.FakeCUDAShared.array = old_run, old_array


def _line_tracer(code: Any, trace: Trace) -> Any:
    """A settrace hook recording the kernel's executed line numbers per simulated thread."""

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            me = threading.current_thread()
            trace.lines.setdefault((tuple(me.blockIdx), me.thread_id), []).append(frame.f_lineno)
        return local

    def hook(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code is code else None

    return hook


def run_traced(kern: Any, griddim: Any, blockdim: Any, *args: Any,
               lines: bool = False) -> tuple[list[Any], Trace]:
    """Launch `kern` in the simulator on numpy arguments; return the arguments afterwards and the trace."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    sim = simulated(kern)
    bd = tuple(blockdim) if isinstance(blockdim, tuple) else (blockdim,)
    trace = Trace(block_dim=tuple(bd) + (1,) * (3 - len(bd)))
    arrays = {}
    fake = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            arrays[i] = _traced(a.copy(), "global", len(arrays))
            fake.append(FakeCUDAArray(arrays[i]))
        else:
            fake.append(a)
    counter = [0]
    with _LOCK, _patched(counter):
        _ACTIVE.append(trace)
        if lines:
            threading.settrace(_line_tracer(sim.fn.__code__, trace))
        try:
            sim[griddim, blockdim](*fake)
        finally:
            threading.settrace(None)  # type: ignore[arg-type]
            _ACTIVE.pop()
    return [np.asarray(arrays[i]).view(np.ndarray).copy() if i in arrays else a
            for i, a in enumerate(args)], trace
