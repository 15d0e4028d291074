"""Warp divergence kernels (chapter 4): one branch, four conditions, and the branch-free rewrite.

Each thread runs ``iters`` steps of recurrence A (v*0.999+0.5) or B (v*0.998-0.25). MODES name the
branch conditions; when lanes of one warp disagree, the warp runs both loops one after the other.
Each numba kernel is compiled for one mode (a constant), so the ``uniform`` kernel has no branch at all;
the CUDA C kernel in divergence.cu takes the mode at run time.

Serves: core — used by chapter 4 and lab 03.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from helpers.errors import InputError
from helpers.kernels import launch
from helpers.kernels.cuda_source import kernel

MODES = {"uniform": 0, "mod2": 1, "lane0": 2, "warp_uniform": 3}
A_MUL, A_ADD = np.float32(0.999), np.float32(0.5)
B_MUL, B_ADD = np.float32(0.998), np.float32(-0.25)


def _branchy(mode: int) -> Any:
    """The kernel of one branch mode (a compile-time constant): path A or B per thread."""

    @cuda.jit
    def kernel(x, out, iters):
        i = cuda.grid(1)
        if i < x.size:
            t = cuda.threadIdx.x
            take_a = mode == 0 or (mode == 1 and t % 2 == 0) or (mode == 2 and t % 32 == 0) \
                or (mode == 3 and (t // 32) % 2 == 0)
            v = x[i]
            if take_a:
                for _ in range(iters):
                    v = v * A_MUL + A_ADD
            else:
                for _ in range(iters):
                    v = v * B_MUL + B_ADD
            out[i] = v

    return kernel


BRANCHY = {name: _branchy(code) for name, code in MODES.items()}


@cuda.jit
def branch_free(x, out, iters):
    """Mode 'mod2' without a branch: select the constants, then every lane runs the same loop."""
    i = cuda.grid(1)
    if i < x.size:
        even = cuda.threadIdx.x % 2 == 0
        m = A_MUL if even else B_MUL
        c = A_ADD if even else B_ADD
        v = x[i]
        for _ in range(iters):
            v = v * m + c
        out[i] = v


def reference(x: np.ndarray, iters: int, mode: str, threads: int = 256) -> np.ndarray:
    """numpy spec: the result of BRANCHY[mode] (and of `branch_free` for mode 'mod2') in float32."""
    t = np.arange(x.size) % threads
    take_a = {"uniform": np.ones(x.size, bool), "mod2": t % 2 == 0, "lane0": t % 32 == 0,
              "warp_uniform": (t // 32) % 2 == 0}[mode]
    m = np.where(take_a, A_MUL, B_MUL).astype(np.float32)
    c = np.where(take_a, A_ADD, B_ADD).astype(np.float32)
    v = np.asarray(x, dtype=np.float32).copy()
    for _ in range(iters):
        v = v * m + c
    return v


def _check(x: Any, out: Any, iters: int, mode: str, threads: int) -> None:
    """Validate the arguments shared by both launchers."""
    from helpers.validation import require_choice

    launch.same_array_pair(x, out)
    launch.require_float32(x, "x")
    launch.check_threads(threads, 64)
    require_choice(mode, tuple(MODES) + ("branch_free",), "mode")
    if not isinstance(iters, (int, np.integer)) or iters < 0:
        raise InputError(f"iters must be a non-negative integer, got {iters!r}.")


def numba_divergence(x: Any, out: Any, iters: int, mode: str = "mod2", threads: int = 256) -> Any:
    """Run the numba kernel of one mode (MODES or 'branch_free'); returns out."""
    _check(x, out, iters, mode, threads)
    blocks = launch.blocks_for(x.size, threads)
    xs, o = launch.as_numba(x), launch.as_numba(out)
    (branch_free if mode == "branch_free" else BRANCHY[mode])[blocks, threads](xs, o, iters)
    return out


def cupy_divergence(x: Any, out: Any, iters: int, mode: str = "mod2", threads: int = 256) -> Any:
    """Run the divergence.cu kernel of one mode (MODES or 'branch_free') on cupy arrays; returns out."""
    _check(x, out, iters, mode, threads)
    n = int(x.size)
    blocks = (launch.blocks_for(n, threads),)
    if mode == "branch_free":
        kernel("divergence", "branch_free")(blocks, (threads,), (x, out, np.int32(n), np.int32(iters)))
    else:
        kernel("divergence", "branchy")(blocks, (threads,),
                                        (x, out, np.int32(n), np.int32(iters), np.int32(MODES[mode])))
    return out
