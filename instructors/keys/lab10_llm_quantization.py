"""Lab 10: per-group INT4 weights packed two a byte, and SmoothQuant's scale.

Specs are `helpers.quant.weight_only` and `helpers.quant.smoothing` themselves. The visible cases are
chosen so that each classic mistake changes the answer: groups along the wrong axis (a weight whose
two axes both divide by the group size), the high nibble first, offset-binary nibbles, rounding ties
away from zero (exact ties), an all-zero group, and α applied the wrong way round (α ≠ 0.5).

Serves: lab10 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import numpy as np
import torch

from helpers.grading.exercise import Case, Exercise, register
from helpers.quant import smoothing, weight_only


def spec_int4_group_quantize(w: np.ndarray, group_size: int) -> tuple[np.ndarray, np.ndarray]:
    """(codes int8 (N, K) in -8..7, scales float32 (N, K / group_size)): symmetric, groups along K."""
    q = weight_only.quantize_w4(torch.from_numpy(np.ascontiguousarray(w)), group_size)
    return weight_only.unpack_int4(q.packed).numpy(), q.scale.numpy().astype(np.float32)


def spec_pack_int4(q: np.ndarray) -> np.ndarray:
    """Pairs of signed INT4 codes along the last axis in one uint8: element 2i low nibble, 2i+1 high."""
    return weight_only.pack_int4(torch.from_numpy(np.ascontiguousarray(q))).numpy()


def spec_smoothquant_scale(act_amax: np.ndarray, w_amax: np.ndarray, alpha: float) -> np.ndarray:
    """s = act_amax**alpha / w_amax**(1 - alpha) per input channel (maxima below 1e-5 count as 1e-5), float32."""
    return smoothing.smoothquant_scales(torch.from_numpy(act_amax), torch.from_numpy(w_amax), alpha).numpy()


def spec_apply_smoothing(x: np.ndarray, w: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x / s, w * s): input channel j of the activations divided by s[j], weight column j multiplied."""
    return (x / s[None, :]).astype(np.float32), (w * s[None, :]).astype(np.float32)


def _w(seed: int, shape: tuple[int, int], group: int) -> np.ndarray:
    """Weights whose groups along K have ranges spread over 50x (so one scale per row would be wrong)."""
    rng = np.random.default_rng(seed)
    spread = np.geomspace(0.02, 1.0, shape[1] // group).repeat(group)[rng.permutation(shape[1]) % shape[1]]
    return (rng.normal(size=shape) * spread[None, :]).astype(np.float32)


def quantize_cases() -> list[Case]:
    """Visible: a wide weight, a square-ish one (both axes divide by g), exact ties, an all-zero group."""
    ties = np.array([[7.0, 3.5, 0.5, -2.5, 1.5, -0.5, 6.5, 2.5]], np.float32)  # scale 1: every x/s a tie
    zero = _w(3, (2, 32), 16)
    zero[1, 16:] = 0
    return [
        Case("8x64 weight, groups of 16", (_w(1, (8, 64), 16), 16)),
        Case("32x64 weight, groups of 16 (both axes divide by 16)", (_w(2, (32, 64), 16), 16)),
        Case("exact ties x / scale = k + 0.5, one group of 8", (ties, 8)),
        Case("a group of zeros gets scale 1.0", (zero, 16)),
    ]


def pack_cases() -> list[Case]:
    """Visible: every code -8..7 in both nibbles, a random 4x6 matrix, a 3-D array."""
    every = np.array([[c for c in range(-8, 8)] + [c for c in range(7, -9, -1)]], np.int8)
    rng = np.random.default_rng(7)
    return [
        Case("every code in both positions", (every,)),
        Case("random 4x6 codes", (rng.integers(-8, 8, (4, 6)).astype(np.int8),)),
        Case("3-D codes 2x3x4", (rng.integers(-8, 8, (2, 3, 4)).astype(np.int8),)),
    ]


def scale_cases() -> list[Case]:
    """Visible: α of 0.75 and 0.25 (not 0.5, where the two orders agree), and a dead channel."""
    rng = np.random.default_rng(11)
    act = np.array([0.5, 40.0, 2.0, 1.0, 3.0, 0.8], np.float32)
    wmax = rng.uniform(0.05, 0.5, 6).astype(np.float32)
    dead = act.copy()
    dead[2] = 0.0
    return [Case("alpha 0.75", (act, wmax, 0.75)), Case("alpha 0.25", (act, wmax, 0.25)),
            Case("alpha 0.5 with a dead channel", (dead, wmax, 0.5))]


def apply_cases() -> list[Case]:
    """Visible: x (tokens 5, channels 4) with weights (outputs 3, channels 4), and a wider layer."""
    rng = np.random.default_rng(12)
    return [Case("x 5x4, w 3x4", (rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=(3, 4)).astype(np.float32),
                                  np.array([4.0, 0.5, 2.0, 1.0], np.float32))),
            Case("x 2x6, w 8x6", (rng.normal(size=(2, 6)).astype(np.float32), rng.normal(size=(8, 6)).astype(np.float32),
                                  rng.uniform(0.2, 5, 6).astype(np.float32)))]


def hidden_quantize_cases() -> list[Case]:
    """Hidden: groups of 32 on a 16x128 weight, groups of 2."""
    return [Case("hidden: 16x128, g32", (_w(21, (16, 128), 32), 32)), Case("hidden: 4x8, g2", (_w(22, (4, 8), 2), 2))]


def hidden_pack_cases() -> list[Case]:
    """Hidden: a long row, a column of pairs."""
    rng = np.random.default_rng(23)
    return [Case("hidden: 1x64", (rng.integers(-8, 8, (1, 64)).astype(np.int8),)),
            Case("hidden: 9x2", (rng.integers(-8, 8, (9, 2)).astype(np.int8),))]


def hidden_scale_cases() -> list[Case]:
    """Hidden: α 0 and 1 (all difficulty kept, all moved), α 0.9."""
    rng = np.random.default_rng(24)
    act, wmax = rng.uniform(0.1, 30, 8).astype(np.float32), rng.uniform(0.01, 1, 8).astype(np.float32)
    return [Case(f"hidden: alpha {a}", (act, wmax, a)) for a in (0.0, 1.0, 0.9)]


register(
    Exercise(
        id="lab10.int4_group_quantize", title="per-group symmetric INT4", spec=spec_int4_group_quantize,
        cases=quantize_cases, hidden=hidden_quantize_cases,
        hint="Each run of group_size consecutive inputs of a row (along K, the axis a GEMV sums over) gets "
             "its own symmetric scale, mapped to the largest positive INT4 code.",
        hints=("Reshape to (N, K / g, g) to reduce each group; the scale is per (row, group), a group of zeros "
               "gets 1.0; round ties to even and saturate to the INT4 range before the int8 cast.",),
    ),
    Exercise(
        id="lab10.pack_int4", title="two INT4 codes a byte", spec=spec_pack_int4, cases=pack_cases,
        hidden=hidden_pack_cases,
        hint="Keep the low four bits of each code (two's complement) and put the even element in the low "
             "half of its byte.",
        hints=("An int8 code of -1 has all eight bits set: what happens to its neighbour's nibble if those bits "
               "are not cut to four first? Do the bit work in a type wide enough for the shift; return uint8.",),
    ),
    Exercise(
        id="lab10.smoothquant_scale", title="SmoothQuant's per-channel scale", spec=spec_smoothquant_scale,
        cases=scale_cases, hidden=hidden_scale_cases, compare="close", rtol=1e-5, atol=0.0,
        hint="α is the share of each channel's range that moves from the activations into the weights.",
        hints=("The activation maximum gets the exponent α and the weight maximum 1 - α; α = 1 makes every "
               "smoothed activation channel's maximum 1. Treat maxima below 1e-5 as 1e-5.",),
    ),
    Exercise(
        id="lab10.apply_smoothing", title="move the scale between x and w", spec=spec_apply_smoothing,
        cases=apply_cases, compare="close", rtol=1e-6, atol=1e-7,
        hint="The product x @ w.T must not change, while the activations' outlier channels shrink.",
        hints=("Write one entry of x @ w.T as a sum over k and ask which entries of w meet x[:, k]: whatever "
               "divides x[:, k] must multiply exactly those.",),
    ),
)
