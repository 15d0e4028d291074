"""The ranked problems: for an exercise and a shape, fresh inputs from a seed, the launch, and the exact answer,
so that every timed run gets new inputs and every output is checked; and the re-check itself (``recheck``), which
the ranking runs with a seed drawn where the submission cannot see it (``secret_seed``).

Shapes for the GPU come from ``helpers.grading.speed_of_light``; the simulator (no GPU) re-checks at ``SIM_DIMS``,
a few blocks each, with the lab's simulator tile.

Serves: instructors (ranking of labs 11, 12 and 13).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers.errors import InputError
from helpers.grading.speed_of_light import target
from helpers.kernels import gemm, histogram

GPU_TILE, SIM_TILE = 16, 8
WARP = 32  # lab 13 launches one warp per output row
SIM_DIMS = {"lab11.naive": (16, 32, 24), "lab11.tiled": (16, 16, 24), "lab11.int8": (16, 16, 64),
            "lab12.global_atomics": (1024, 64), "lab12.shared_bins": (1024, 64), "lab13.gemv": (3, 128, 32)}
OUT_INDEX = {"lab11.naive": 2, "lab11.tiled": 2, "lab11.int8": 2, "lab12.global_atomics": 1,
             "lab12.shared_bins": 1, "lab13.gemv": 3}
POISON = {np.dtype(np.float32): np.float32(np.nan), np.dtype(np.int8): np.int8(-77)}


@dataclass
class Problem:
    """Host inputs (numpy arrays and scalars) of one launch, which argument is the output, the launch's grid and
    block, the constants the kernel is compiled with, and the exact answer."""

    args: tuple
    out: int
    grid: Any
    block: Any
    constants: dict
    expected: np.ndarray


def secret_seed() -> int:
    """A seed from the operating system's randomness, drawn in the ranking's process after the kernel is read."""
    return secrets.randbits(63)


def poisoned(a: np.ndarray) -> np.ndarray:
    """The output buffer before a launch: NaN (float) or -77 (int8) everywhere, so a kernel that skips work fails;
    zeros for counts that a kernel adds to."""
    out = np.empty_like(a)
    out[...] = POISON.get(a.dtype, 0)
    return out


def _gemm(exercise: str, dims: tuple, rng: np.random.Generator, tile: int) -> Problem:
    """Lab 11: FP32 naive/tiled or the tiled INT8 GEMM, integer-valued inputs (exact in any order)."""
    m, n, k = dims
    if exercise == "lab11.int8":
        a, b, m0, shift, _ = gemm.int8_problem(rng, m, n, k, 0)
        zp = int(rng.integers(-5, 6))
        out = poisoned(np.zeros((m, n), np.int8))
        grid, block = gemm.tiled_grid(m, n, tile)
        return Problem((gemm.pack_rows(a), gemm.pack_cols(b), out, np.asarray(m0, np.int64),
                        np.asarray(shift, np.int64), zp), 2, grid, block, {"TILE": tile},
                       gemm.int8_gemm_reference(a, b, m0, shift, zp))
    a, b = gemm.integer_floats(rng, (m, k)), gemm.integer_floats(rng, (k, n))
    c = poisoned(np.zeros((m, n), np.float32))
    if exercise == "lab11.naive":
        grid, block = gemm.naive_grid(m, n)
        constants: dict = {}
    else:
        grid, block = gemm.tiled_grid(m, n, tile)
        constants = {"TILE": tile}
    return Problem((a, b, c), 2, grid, block, constants, gemm.float_gemm_reference(a, b))


def _hist(dims: tuple, rng: np.random.Generator) -> Problem:
    """Lab 12: calibration-like values into bins of the course Histogram's width; counts start at zero."""
    n, bins = dims
    x = histogram.activations(rng, n)
    ref = histogram.reference(x, bins)
    blocks, threads = histogram.grid(n)
    return Problem((x, np.zeros(bins, np.int32), np.float64(ref.bin_width)), 1, blocks, threads,
                   {"MAX_BINS": histogram.MAX_BINS}, ref.counts.astype(np.int32))


def _gemv(dims: tuple, rng: np.random.Generator) -> Problem:
    """Lab 13: W4A16 GEMV (lab 13's format: offset-binary bytes, element 2j in the low nibble, one float32 scale
    per row and group), power-of-two scales and integer activations (exact in any order). The bytes are drawn
    directly: every byte is two codes in -8..7."""
    n, k, group = dims
    packed = rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
    scales = np.exp2(rng.integers(-4, 2, (n, k // group))).astype(np.float32)
    x = rng.integers(-4, 5, k).astype(np.float32)
    return Problem((packed, scales, x, poisoned(np.zeros(n, np.float32))), 3, n, WARP, {},
                   gemv_answer(packed, scales, x))


def gemv_answer(packed: np.ndarray, scales: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y of the W4A16 GEMV, exact: each group's sum of code × x is a small integer (exact in float32), scaled by a
    power of two and summed in float64; without the weight-sized float64 arrays of a plain dequantization."""
    n, half = packed.shape
    groups = scales.shape[1]
    q = np.empty((n, 2 * half), np.float32)
    q[:, 0::2] = (packed & 0xF).astype(np.float32) - 8  # offset binary: element 2j in the low nibble
    q[:, 1::2] = (packed >> 4).astype(np.float32) - 8
    per_group = np.einsum("ngj,gj->ng", q.reshape(n, groups, -1), x.reshape(groups, -1).astype(np.float32))
    return (per_group.astype(np.float64) * scales).sum(axis=1).astype(np.float32)


def problem(exercise: str, dims: tuple, seed: int, device: str = "gpu") -> Problem:
    """Fresh inputs of one launch from `seed` ('gpu': the GPU tile; 'sim': the simulator's)."""
    target(exercise)
    rng = np.random.default_rng(seed)
    if exercise.startswith("lab11."):
        return _gemm(exercise, dims, rng, GPU_TILE if device == "gpu" else SIM_TILE)
    if exercise.startswith("lab12."):
        return _hist(dims, rng)
    return _gemv(dims, rng)


def same(got: np.ndarray, p: Problem) -> str | None:
    """None when the output is exactly the answer, else what differs (the comparison is bit for bit)."""
    got = np.asarray(got)
    if got.shape != p.expected.shape:
        return f"output of shape {got.shape}, expected {p.expected.shape}"
    bad = got != p.expected  # a NaN left in a float output (the poison) is never equal: it counts as wrong
    if bad.any():
        first = np.argwhere(bad)[0].tolist()
        return f"{int(bad.sum())} of {got.size} outputs wrong on fresh inputs (first at index {first})"
    return None


def build(description: dict, constants: dict, device: str) -> Any:
    """The kernel compiled from its description with the exercise's constants: for the GPU, or the simulator's
    kernel ('sim'; the process must have numba's CUDA simulator on)."""
    from numba import cuda

    from helpers.grading.compare import BadAnswer
    from helpers.grading.kernel_source import SentKernel, rebuild

    try:
        data = SentKernel(description).described(**constants)
        return cuda.jit(rebuild(data, "sim" if device == "sim" else "gpu"))
    except BadAnswer as err:
        raise InputError(f"the kernel cannot be built: {err}") from None


def recheck(description: dict, exercise: str, seed: int | None = None) -> str | None:
    """Run the kernel once in the simulator on fresh inputs from a secret seed: None when exact, else why not."""
    p = problem(exercise, SIM_DIMS[exercise], secret_seed() if seed is None else seed, "sim")
    try:
        kern = build(description, p.constants, "sim")
        args = [a.copy() if isinstance(a, np.ndarray) else a for a in p.args]
        kern[p.grid, p.block](*args)
    except InputError as err:
        return str(err)
    except Exception as err:  # noqa: BLE001 - a student's kernel may fail in any way; it is then not ranked
        return f"the kernel failed in the simulator ({type(err).__name__}: {str(err)[:200]})"
    return same(args[p.out], p)
