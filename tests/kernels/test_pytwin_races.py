"""The tools behind labs 11-12: race detection on simulator traces (a missing barrier or atomic is found
even though threads run one at a time) and Python twins of kernels (constants replaced, device functions
run as Python)."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, float32

from helpers.errors import InputError
from helpers.kernels import pytwin, races

N = 4  # a constant the twin tests replace


def _shared_handoff(barrier: bool):
    """Thread t writes s[t], then reads its neighbour's s[t+1], with or without a barrier between."""

    @cuda.jit
    def kernel(out):
        s = cuda.shared.array(64, float32)
        t = cuda.threadIdx.x
        s[t] = t
        if barrier:
            cuda.syncthreads()
        out[t] = s[(t + 1) % 64]

    return kernel


@cuda.jit
def every_block_writes_zero(out):
    """Thread 0 of every block writes out[0] without an atomic."""
    if cuda.threadIdx.x == 0:
        out[0] = cuda.blockIdx.x


@cuda.jit
def atomic_adds(out):
    """Every thread adds 1 to out[0] atomically."""
    cuda.atomic.add(out, 0, 1)


@cuda.jit
def atomic_add_then_plain_read(out, seen):
    """Atomics on out[0], and a plain read of it by every thread in the same interval."""
    cuda.atomic.add(out, 0, 1)
    seen[cuda.threadIdx.x] = out[0]


def _races(kern, grid, block, *args):
    """Races found in one traced launch."""
    _, trace, log = races.run_traced(kern, grid, block, *args)
    return races.find_races(trace, log)


def test_missing_barrier_is_a_race_and_a_barrier_fixes_it():
    found = _races(_shared_handoff(False), 1, 64, np.zeros(64, np.float32))
    assert found and found[0].space == "shared"
    assert "no barrier orders the two" in found[0].describe()
    assert _races(_shared_handoff(True), 1, 64, np.zeros(64, np.float32)) == []


def test_plain_writes_from_two_blocks_race_and_atomics_do_not():
    found = _races(every_block_writes_zero, 2, 32, np.zeros(1, np.int32))
    assert len(found) == 1 and found[0].describe({0: "out"}).startswith("out[0]: thread 0 of block 0 writes")
    assert _races(atomic_adds, 2, 32, np.zeros(1, np.int32)) == []


def test_atomic_write_against_a_plain_read_is_a_race():
    found = _races(atomic_add_then_plain_read, 1, 32, np.zeros(1, np.int32), np.zeros(32, np.int32))
    assert found and (found[0].first_atomic or found[0].second_atomic)


def test_sync_log_travels_as_plain_data():
    _, _, log = races.run_traced(_shared_handoff(True), 1, 64, np.zeros(64, np.float32))
    back = races.SyncLog.from_data(log.to_data())
    assert back.atomic == log.atomic and dict(back.barriers) == dict(log.barriers)
    with pytest.raises(InputError, match="malformed"):
        races.SyncLog.from_data({"atomic": []})


@cuda.jit
def fill_n(out):
    """out[i] = N for the first N elements."""
    i = cuda.grid(1)
    if i < N:
        out[i] = N


class CUDADispatcher:
    """Stands in for a compiled numba device function on a GPU machine: Python cannot call it."""

    targetoptions = {"device": True}

    def __init__(self, fn):
        self.py_func = fn

    def __call__(self, *args):
        raise RuntimeError("a compiled device function cannot be called from Python")


def _triple(v):
    """A device function's Python source."""
    return 3 * v


triple = CUDADispatcher(_triple)


@cuda.jit
def apply_triple(out):
    """out[i] = triple(out[i]) through a (stand-in) compiled device function."""
    i = cuda.grid(1)
    out[i] = triple(out[i])


def test_twin_sees_replaced_constants():
    out = np.zeros(8, np.int32)
    pytwin.simulator_kernel(fill_n, N=6)[1, 8](out)
    assert out.tolist() == [6] * 6 + [0, 0]
    with pytest.raises(InputError, match="does not use the global"):
        pytwin.twin(fill_n, TILE=8)


def test_device_functions_run_as_python_in_a_simulator_twin():
    out = np.arange(4, dtype=np.int32)
    pytwin.simulator_kernel(apply_triple)[1, 4](out)
    assert out.tolist() == [0, 3, 6, 9]
    assert pytwin.simulator_device(triple)(5) == 15
    with pytest.raises(InputError, match="cuda.jit"):
        pytwin.python_function(42)
