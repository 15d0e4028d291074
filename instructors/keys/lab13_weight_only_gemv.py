"""Lab 13's answer key: the cases, hidden cases, specs and hints of its three exercises (unpack two INT4 codes
from a byte, a warp's sum, the W4A16 dequantizing GEMV), and the solution kernels that the tests accept and
the GPU timing runs from the command line (``python -m instructors.lab13_bench``). How a kernel is run and judged
lives on the student's side, in helpers.labs.lab13_weight_only_gemv.kit.

Serves: lab 13 (its answer key).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, int32

from helpers.grading.exercise import Case, Exercise, register
from helpers.labs.lab13_weight_only_gemv import kit

LANES_KEPT = 16  # a reduction that starts one step late adds up only this many lanes


# ---------- the solution kernels ----------

@cuda.jit(device=True)
def unpack_int4(b):  # noqa: ANN001, ANN201 - a numba device function
    """The two signed codes (low nibble first) of one offset-binary byte."""
    v = int32(b)
    return (v & 0xF) - 8, (v >> 4) - 8


@cuda.jit(device=True)
def warp_sum(v):  # noqa: ANN001, ANN201
    """The sum of v over the 32 lanes of the warp (one warp a block): a tree in shared memory."""
    partial = cuda.shared.array(32, float32)
    lane = cuda.threadIdx.x
    partial[lane] = v
    cuda.syncthreads()
    step = 16
    while step > 0:
        if lane < step:
            partial[lane] += partial[lane + step]
        cuda.syncthreads()
        step //= 2
    return partial[0]


@cuda.jit
def gemv_w4(packed, scales, x, y):  # noqa: ANN001, ANN201
    """y = dequant(W) x: one warp per row, lanes on neighbouring bytes, a warp sum at the end."""
    row = cuda.blockIdx.x
    lane = cuda.threadIdx.x
    nbytes = packed.shape[1]
    group = 2 * nbytes // scales.shape[1]
    acc = float32(0)
    for j in range(lane, nbytes, 32):
        lo, hi = unpack_int4(packed[row, j])
        k = 2 * j
        acc += scales[row, k // group] * (float32(lo) * x[k] + float32(hi) * x[k + 1])
    total = warp_sum(acc)
    if lane == 0:
        y[row] = total


# ---------- specs ----------

def spec_unpack(data: np.ndarray) -> np.ndarray:
    """(low, high) signed codes of each byte, as int64 (n, 2), by the course's unpack_int4."""
    return kit.codes(np.asarray(data, np.uint8)[:, None])


def spec_warp_sum(x: np.ndarray) -> np.ndarray:
    """Each row's sum (exact: small integers), float32."""
    return np.asarray(x, np.float64).sum(axis=1).astype(np.float32)


def _gemv(q: np.ndarray, s: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(q * s) @ x in float64 (exact here), as float32."""
    return ((q * s) @ np.asarray(x, np.float64)).astype(np.float32)


def spec_gemv(packed: np.ndarray, scales: np.ndarray, x: np.ndarray) -> dict:
    """y, and the outputs of four known mistakes (named, so that the check can say which one a kernel made)."""
    q = kit.codes(packed)
    n, k = q.shape
    group = k // scales.shape[1]
    s = np.repeat(scales.astype(np.float64), group, axis=1)
    byte = np.arange(k) // 2
    return {"y": _gemv(q, s, x), "mistakes": {
        "reads element 2j from the high nibble and element 2j + 1 from the low one":
            _gemv(q.reshape(n, k // 2, 2)[..., ::-1].reshape(n, k), s, x),
        "leaves the codes at 0..15, without taking off the offset of 8": _gemv(q + 8, s, x),
        "takes each scale's group from the byte index instead of the element index":
            _gemv(q, scales.astype(np.float64)[:, byte // group], x),
        f"adds up the partial sums of only {LANES_KEPT} of the 32 lanes":
            _gemv(q * (byte % kit.WARP < LANES_KEPT), s, x)}}


# ---------- cases ----------

def gemv_case(label: str, n: int, k: int, group: int, seed: int) -> Case:
    """A GEMV case of n rows, k inputs, groups of `group`."""
    return Case(label, kit.problem(np.random.default_rng(seed), n, k, group))


def _sum_cases() -> list[Case]:
    """Each lane's own number (the total tells which lanes arrived), then three warps of small integers."""
    rng = np.random.default_rng(132)
    return [Case("each lane holds its lane number", (np.arange(32, dtype=np.float32)[None, :],)),
            Case("3 warps of small integers", (rng.integers(-50, 51, (3, 32)).astype(np.float32),))]


def _hidden_sums() -> list[Case]:
    """A single non-zero lane per warp, at the far end and in the middle."""
    x = np.zeros((2, 32), np.float32)
    x[0, 31], x[1, 17] = 5, -3
    return [Case("hidden: one non-zero lane per warp", (x,))]


register(
    Exercise(
        id="lab13.unpack", title="two INT4 codes from a byte", spec=spec_unpack,
        cases=lambda: [Case("all 256 bytes", (np.arange(256, dtype=np.uint8),))],
        hidden=lambda: [Case("hidden: 64 random bytes",
                             (np.random.default_rng(1300).integers(0, 256, 64).astype(np.uint8),))],
        run=kit.run_unpack, compare=kit.compare_unpack, plot=False,
        hint="A byte holds two codes, one in its low four bits and one in its high four, and each is stored "
             "shifted up so that it is never negative.",
        hints=("Mask out the low nibble, shift the high one down, then undo the shift the storage added. A "
               "byte read from a uint8 array wraps around at 256: widen it before any subtraction.",),
    ),
    Exercise(
        id="lab13.warp_sum", title="a warp's sum", spec=spec_warp_sum, cases=_sum_cases, hidden=_hidden_sums,
        run=kit.run_warp_sum, compare=kit.compare_warp_sum, plot=False,
        hint="Let the lanes meet in shared memory, one slot each, and halve the number of lanes that still "
             "hold a partial sum at each step until one holds all.",
        hints=("Count which lanes' values reach lane 0 after your steps: all 32 must, so the first step pairs "
               "lanes half a warp apart. No lane may read a slot in the same step in which another lane writes "
               "it, and every step, the first included, ends at a barrier.",),
    ),
    Exercise(
        id="lab13.gemv", title="W4A16 dequantizing GEMV", spec=spec_gemv,
        cases=lambda: [gemv_case("4 rows, K = 128, groups of 32", 4, 128, 32, 133),
                       gemv_case("3 rows, K = 96, groups of 16 (48 bytes a row)", 3, 96, 16, 134)],
        hidden=lambda: [gemv_case("hidden: 2 rows, K = 256, groups of 128", 2, 256, 128, 1301),
                        gemv_case("hidden: 3 rows, K = 80, groups of 8", 3, 80, 8, 1302)],
        run=kit.run_gemv, compare=kit.compare_gemv, plot=False,
        hint="One warp per row: its 32 lanes split the row's bytes, each byte gives two codes, each code is "
             "multiplied by its own group's scale and its own input, and at the end the warp adds up its lanes.",
        hints=("Byte j holds elements 2j and 2j + 1; the group size is K divided by the number of scales in a "
               "row. Let neighbouring lanes read neighbouring bytes, walk the row a warp's width at a time, "
               "and write y once, from one lane.",),
    ),
)
