"""Load the CUDA C kernels in this folder (``*.cu``) with cupy.RawModule, compiled once per file.

Serves: core — used by chapters 3, 4, 11, 12 and labs 02, 03, 13.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.errors import InputError, require_package

HERE = Path(__file__).resolve().parent
CUPY_INSTALL = "pip install cupy-cuda12x (or cupy-cuda13x, matching your CUDA driver)"


def sources() -> list[str]:
    """Names of the .cu files shipped with the course (without the suffix)."""
    return sorted(p.stem for p in HERE.glob("*.cu"))


@functools.cache
def module(name: str) -> Any:
    """The compiled cupy.RawModule of ``<name>.cu`` (needs cupy and a GPU)."""
    if name not in sources():
        raise InputError(f"no CUDA source {name!r}.cu in helpers/kernels; known: {', '.join(sources())}.")
    from helpers.device import require_gpu

    require_gpu(f"compiling {name}.cu")
    cupy = cupy_module()
    code = (HERE / f"{name}.cu").read_text(encoding="utf-8")
    return cupy.RawModule(code=code, options=("--std=c++17", "-lineinfo"))


def kernel(name: str, function: str) -> Any:
    """One ``extern "C"`` kernel of ``<name>.cu`` as a cupy RawKernel."""
    return module(name).get_function(function)


def cupy_module() -> Any:
    """cupy, or MissingPackageError with the install line."""
    return require_package("cupy", CUPY_INSTALL, "the CUDA C kernels are launched through cupy")


_streams: dict[int, Any] = {}


def torch_stream() -> Any:
    """cupy's view of torch's current stream, as a context for launches (so that graph capture and torch's ordering
    see them)."""
    import torch

    ptr = torch.cuda.current_stream().cuda_stream
    if ptr not in _streams:
        _streams[ptr] = cupy_module().cuda.ExternalStream(ptr)
    return _streams[ptr]


def bound_launch(name: str, function: str, blocks: Any, threads: Any, args: tuple) -> Callable[[], Any]:
    """A zero-argument cupy launch of one kernel with pre-built arguments (no per-call validation)."""
    k = kernel(name, function)
    return lambda: k(blocks, threads, args)
