"""Lab 11's answer key: the cases, hidden cases, specs and hints of its four exercises (naive and tiled FP32
GEMM, dp4a written out, tiled INT8 GEMM with requantization). How a kernel is run and judged lives on the
student's side, in helpers.labs.lab11_gemm_kernels.kit.

Serves: lab11 (its answer key).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.kernels import gemm
from helpers.labs.lab11_gemm_kernels import kit


def float_cases(sizes: tuple[tuple[int, int, int], ...], seed: int, prefix: str = "") -> list[Case]:
    """Cases (a, b) of the given (M, N, K); N and K multiples of 8 keep rows sector-aligned."""
    rng = np.random.default_rng(seed)
    return [Case(f"{prefix}{m}x{k} @ {k}x{n}", (gemm.integer_floats(rng, (m, k)), gemm.integer_floats(rng, (k, n))))
            for m, n, k in sizes]


def int8_case(label: str, m: int, n: int, k: int, zero_point: int, seed: int) -> Case:
    """An INT8 problem whose requantized outputs saturate at both ends."""
    return Case(label, gemm.int8_problem(np.random.default_rng(seed), m, n, k, zero_point))


EDGE_WORDS = np.array([0, -1, 0x7F7F7F7F, -0x7F7F7F80, 0x01020304, -0x0F0F0F10, 0x7F80017F, 0x00FF00FF],
                      np.int32)  # -0x7F7F7F80 is 0x80808080: four lanes of -128


def word_case(label: str, n: int, seed: int) -> Case:
    """n random (a, b, c) word triples."""
    rng = np.random.default_rng(seed)
    a, b = (rng.integers(-2**31, 2**31, n).astype(np.int32) for _ in range(2))
    return Case(label, (a, b, rng.integers(-2**30, 2**30, n).astype(np.int32)))


def _dp4a_cases() -> list[Case]:
    """Edge words (all lanes -1, 127, -128, mixed signs) against each other, then random words."""
    a, b = np.meshgrid(EDGE_WORDS, EDGE_WORDS)
    c = np.random.default_rng(112).integers(-2**20, 2**20, a.size).astype(np.int32)
    return [Case("edge words", (a.ravel(), b.ravel(), c)), word_case("64 random words", 64, 113)]


register(
    Exercise(
        id="lab11.naive", title="naive FP32 GEMM", spec=gemm.float_gemm_reference,
        cases=lambda: float_cases(((8, 32, 16), (12, 40, 8)), 110),
        hidden=lambda: float_cases(((5, 24, 12), (9, 8, 4)), 1100, "hidden: "),
        run=kit.run_naive, compare=kit.compare_naive, perf=kit.perf_naive, plot=False,
        hint="One thread per element of c. A warp is 32 consecutive threadIdx.x: choose which index of c "
             "x walks along so that a warp's loads of b and stores of c are neighbours.",
        hints=("In row-major arrays c[i, j] and c[i, j + 1] are neighbours while c[i + 1, j] is a whole row "
               "away, and the same holds for b[k, j]. Which of i and j must change from one lane to the next? "
               "Threads of an edge block that fall outside c must not touch memory.",),
    ),
    Exercise(
        id="lab11.tiled", title="tiled FP32 GEMM in shared memory", spec=gemm.float_gemm_reference,
        cases=lambda: float_cases(((16, 16, 24),), 111),
        hidden=lambda: float_cases(((12, 8, 16),), 1101, "hidden: "),
        run=kit.run_tiled, compare=kit.compare_tiled, perf=kit.perf_tiled, plot=False,
        hint="Walk K one tile at a time: the block stages a tile of a and a tile of b in shared memory, "
             "then every thread uses them. Think about when a tile is complete and when it may be replaced.",
        hints=("Each thread stores one element of each tile (zero outside the matrices); a barrier after the "
               "stores, and another after the inner loop, before the next phase overwrites the tiles.",),
    ),
    Exercise(
        id="lab11.dp4a", title="dp4a written out", spec=gemm.dp4a_reference, cases=_dp4a_cases,
        hidden=lambda: [word_case("hidden: 100 random words", 100, 1102)],
        run=kit.run_dp4a, compare=kit.compare_dp4a, plot=False,
        hint="A word holds four int8 lanes, lane j in bits 8j..8j+7, and each lane is a signed byte.",
        hints=("Shift and mask a lane out: it reads as 0..255. A value of 128..255 there stands for that "
               "value minus 256.",),
    ),
    Exercise(
        id="lab11.int8", title="tiled INT8 GEMM with requantization", spec=gemm.int8_gemm_reference,
        cases=lambda: [int8_case("16x64 @ 64x16, zero point -3", 16, 16, 64, -3, 113)],
        hidden=lambda: [int8_case("hidden: 12x96 @ 96x8, zero point 5", 12, 8, 96, 5, 1103)],
        run=kit.run_int8, compare=kit.compare_int8, perf=kit.perf_int8, plot=False,
        hint="Your tiled kernel again, on int32 words, with dp4a in place of the multiply-add and an "
             "accumulator wide enough for K products of two int8; then requantize with integers only.",
        hints=("The epilogue is requantize_fixed of chapter 5 for one element: multiply by the column's M0, "
               "round while shifting right by 31 + shift, add the zero point, saturate to -128..127.",),
    ),
)
