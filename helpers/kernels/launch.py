"""Launch plumbing shared by the kernel modules: grid sizes, array conversion, cupy argument types.

Serves: core — used by chapters 3, 4, 11, 12 and labs 02, 03, 12.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from helpers.errors import InputError

BLOCKS_PER_SM = 8  # with 256 threads: 2048 threads, the most an SM holds


def sm_count() -> int:
    """Streaming multiprocessors of GPU 0 (2 in the simulator, so that simulated grids stay tiny)."""
    from helpers.device import gpu_info

    info = gpu_info()
    return info.sm_count if info else 2


def blocks_for(n: int, threads: int, per_thread: int = 1) -> int:
    """Blocks that cover n elements at per_thread elements a thread."""
    return max(1, math.ceil(n / (threads * per_thread)))


def grid_stride_blocks(n: int, threads: int, per_thread: int = 1) -> int:
    """Blocks for a grid-stride loop: enough to fill every SM, never more than the data needs."""
    return min(BLOCKS_PER_SM * sm_count() * max(1, 256 // threads), blocks_for(n, threads, per_thread))


def check_threads(threads: int, multiple: int = 32) -> None:
    """Require a block size that is a positive multiple of `multiple`, at most 1024."""
    if not isinstance(threads, (int, np.integer)) or threads <= 0 or threads > 1024 or threads % multiple:
        raise InputError(f"threads must be a multiple of {multiple} in {multiple}..1024, got {threads!r}.")


def as_numba(x: Any) -> Any:
    """A numpy array stays as is (numba copies it); a cupy/torch GPU array becomes a numba device array."""
    from numba import cuda

    if isinstance(x, np.ndarray) or hasattr(x, "copy_to_host"):
        return x
    if hasattr(x, "__cuda_array_interface__"):
        return cuda.as_cuda_array(x)
    return x


def same_array_pair(src: Any, dst: Any, ndim: int = 1) -> None:
    """Require two arrays of the same dtype and size (and `ndim` dimensions)."""
    from helpers.validation import require_array, require_ndim, require_nonempty

    for a, name in ((src, "src"), (dst, "dst")):
        require_array(a, name)
        require_ndim(a, (ndim,), name)
        require_nonempty(a, name)
    if str(src.dtype) != str(dst.dtype):
        raise InputError(f"src and dst must have the same dtype, got {src.dtype} and {dst.dtype}.")


def require_float32(x: Any, name: str) -> None:
    """Require float32 (the dtype the CUDA C kernels are written for)."""
    from helpers.validation import require_dtype

    require_dtype(x, ("float32",), name)
