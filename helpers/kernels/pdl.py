"""Programmatic dependent launch (PDL, Hopper and later): launch a cupy kernel so that it may start while the kernel
before it in the stream is still finishing.

    pdl.launch(fn, grid, block, args)      # fn a cupy kernel; args as for fn(grid, block, args)

A kernel launched this way must call ``griddepcontrol.wait`` before it reads anything the kernel before wrote (the
course's GEMVs and decode attention do, after their first weight loads): its blocks can then take the SMs that the
kernel before leaves idle in its last wave, and the weights they stream need nothing from it. They start once every
block of the kernel before has called ``griddepcontrol.launch_dependents`` (the course's kernels do, first thing) or
exited. cupy's launch takes no launch attributes, so this calls the driver's cuLaunchKernelEx through ctypes on
torch's current stream; inside a CUDA-graph capture the launch becomes a programmatic edge of the graph.
`supported()` says whether this GPU has it. Whether it pays is measured, not assumed: chapter 12's table
``ch12.decode.pdl`` times the decode step both ways.

Serves: core — used by chapter 12 and lab 13.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

import numpy as np

from helpers.errors import InputError

PROGRAMMATIC_STREAM_SERIALIZATION = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION


class _Attribute(ctypes.Structure):
    """CUlaunchAttribute: an id (padded to 8 bytes) and a 64-byte value union."""

    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_char * 64)]


class _Config(ctypes.Structure):
    """CUlaunchConfig."""

    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_Attribute)), ("numAttrs", ctypes.c_uint)]


_CTYPES = {np.uint64: ctypes.c_uint64, np.int64: ctypes.c_int64, np.int32: ctypes.c_int32, np.uint32: ctypes.c_uint32,
           np.float32: ctypes.c_float}


@functools.cache
def _driver() -> Any:
    """libcuda with cuLaunchKernelEx's signature."""
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernelEx.argtypes = [ctypes.POINTER(_Config), ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.c_void_p]
    lib.cuLaunchKernelEx.restype = ctypes.c_int
    return lib


@functools.cache
def supported() -> bool:
    """True on a GPU of compute capability 9.0 or later (where griddepcontrol exists)."""
    import torch

    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 9


def _dims(d: Any) -> tuple[int, int, int]:
    """A grid or block given as an int or a tuple of up to three, as (x, y, z)."""
    t = (d,) if isinstance(d, int) else tuple(d)
    return tuple(int(v) for v in t) + (1,) * (3 - len(t))  # type: ignore[return-value]


def launch(fn: Any, grid: Any, block: Any, args: tuple) -> None:
    """Launch cupy kernel `fn` with the PDL attribute on torch's current stream; args are numpy scalars (np.uint64 for
    pointers, np.int32, np.int64, np.float32), as cupy takes them."""
    import torch

    values = []
    for a in args:
        kind = _CTYPES.get(type(a))
        if kind is None:
            raise InputError(f"pdl.launch takes numpy scalar arguments (np.uint64, np.int32, np.int64, np.float32), "
                             f"got {type(a).__name__}.")
        values.append(kind(a.item()))
    params = (ctypes.c_void_p * len(values))(*[ctypes.cast(ctypes.pointer(v), ctypes.c_void_p) for v in values])
    attr = _Attribute(id=PROGRAMMATIC_STREAM_SERIALIZATION)
    ctypes.memmove(attr.value, ctypes.byref(ctypes.c_int(1)), ctypes.sizeof(ctypes.c_int))
    (gx, gy, gz), (bx, by, bz) = _dims(grid), _dims(block)
    config = _Config(gx, gy, gz, bx, by, bz, 0, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
                     ctypes.pointer(attr), 1)
    function = getattr(fn, "kernel", fn).ptr  # a cupy RawKernel holds its Function; a Function is one
    err = _driver().cuLaunchKernelEx(ctypes.byref(config), ctypes.c_void_p(function), params, None)
    if err:
        raise RuntimeError(f"cuLaunchKernelEx failed with CUDA driver error {err} (a PDL launch of "
                           f"{getattr(fn, 'name', 'a kernel')}).")
