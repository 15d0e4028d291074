"""Lab 10: the checks accept correct answers and reject every known-wrong variant."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.grading import answer_tests



def good_quantize(w, g):
    n, k = w.shape
    amax = np.abs(w.reshape(n, k // g, g)).max(axis=2).astype(np.float32)
    s = np.where(amax > 0, amax / np.float32(7), np.float32(1)).astype(np.float32)
    return np.clip(np.rint(w.reshape(n, k // g, g) / s[:, :, None]), -8, 7).astype(np.int8).reshape(n, k), s


def good_pack(q):
    u = (q.astype(np.int16) & 0xF).astype(np.uint8)
    return (u[..., 0::2] | (u[..., 1::2] << 4)).astype(np.uint8)


def good_scale(a, w, alpha):
    a, w = np.maximum(a, np.float32(1e-5)), np.maximum(w, np.float32(1e-5))
    return np.maximum(a ** np.float32(alpha) / w ** np.float32(1 - alpha), np.float32(1e-5)).astype(np.float32)


def good_apply(x, w, s):
    return (x / s).astype(np.float32), (w * s).astype(np.float32)


def _quantize_axis0(w, g):  # groups of g consecutive *rows* (outputs): the wrong group axis
    q, s = good_quantize(np.ascontiguousarray(w.T), g)
    return q.T.copy(), s.T.copy()


def _round_away(w, g):
    n, k = w.shape
    _, s = good_quantize(w, g)
    v = w.reshape(n, k // g, g) / s[:, :, None]
    return np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -8, 7).astype(np.int8).reshape(n, k), s


def _div8(w, g):
    n, k = w.shape
    s = np.abs(w.reshape(n, k // g, g)).max(axis=2).astype(np.float32) / np.float32(8)
    s = np.where(s > 0, s, np.float32(1)).astype(np.float32)
    return np.clip(np.rint(w.reshape(n, k // g, g) / s[:, :, None]), -8, 7).astype(np.int8).reshape(n, k), s


def _per_row(w, g):
    n, k = w.shape
    q, s = good_quantize(w, k)
    return q, np.repeat(s, k // g, axis=1)


WRONG = {
    "lab10.int4_group_quantize": {
        "groups along the output axis": _quantize_axis0,
        "ties rounded away from zero": _round_away,
        "scale max/8 (uses the -8 code)": _div8,
        "one scale per row, not per group": _per_row,
        "zero group gets scale 0": lambda w, g: (good_quantize(w, g)[0],
                                                 (np.abs(w.reshape(w.shape[0], -1, g)).max(axis=2) / 7).astype(np.float32)),
    },
    "lab10.pack_int4": {
        "nibble order swapped (even element high)": lambda q: ((q[..., 0::2].astype(np.int16) & 0xF) << 4
                                                               | (q[..., 1::2].astype(np.int16) & 0xF)).astype(np.uint8),
        "offset binary (q + 8) instead of two's complement": lambda q: ((q[..., 0::2] + 8) | ((q[..., 1::2] + 8) << 4)
                                                                        ).astype(np.uint8),
        "pairs along the first axis": lambda q: good_pack(np.moveaxis(q, 0, -1)) if q.shape[0] % 2 == 0 else q,
        "no mask (sign bits spill into the high nibble)": lambda q: (q[..., 0::2].astype(np.int16)
                                                                     | (q[..., 1::2].astype(np.int16) << 4)
                                                                     ).astype(np.uint8),
    },
    "lab10.smoothquant_scale": {
        "alpha applied the wrong way round": lambda a, w, al: good_scale(a, w, 1 - al),
        "inverted (weights over activations)": lambda a, w, al: (1 / good_scale(a, w, al)).astype(np.float32),
        "no floor for a dead channel": lambda a, w, al: (a ** np.float32(al) / w ** np.float32(1 - al)).astype(np.float32),
    },
    "lab10.apply_smoothing": {
        "moved the wrong way (x * s, w / s)": lambda x, w, s: ((x * s).astype(np.float32), (w / s).astype(np.float32)),
        "weights scaled per row": lambda x, w, s: ((x / s).astype(np.float32), (w * s[:, None]).astype(np.float32)),
        "only the activations divided": lambda x, w, s: ((x / s).astype(np.float32), w),
    },
}
GOOD = {"lab10.int4_group_quantize": good_quantize, "lab10.pack_int4": good_pack,
        "lab10.smoothquant_scale": good_scale, "lab10.apply_smoothing": good_apply}


test_correct_answers_pass, test_wrong_variants_rejected = answer_tests(GOOD, WRONG)


def test_pack_matches_the_course_packing():
    from helpers.quant import fp8
    from instructors.keys import lab10_llm_quantization as lab10

    q = np.random.default_rng(0).integers(-8, 8, (5, 12)).astype(np.int8)
    assert np.array_equal(lab10.spec_pack_int4(q), fp8.pack_int4(q))
