"""Labs 4 and 5 checks: correct answers pass, and every known-wrong variant is rejected."""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.grading import answer_tests

from instructors.keys import lab04_per_channel_and_requant as lab04
from instructors.keys import lab05_entropy_calibration as lab05


def _others(w, axis):
    return tuple(d for d in range(w.ndim) if d != axis % w.ndim)


def _bshape(w, axis):
    shape = [1] * w.ndim
    shape[axis] = -1
    return shape


def good_scale(w, axis=0):
    amax = np.abs(w).max(axis=_others(w, axis)).astype(np.float32)
    return np.where(amax > 0, amax / np.float32(127), np.float32(1)).astype(np.float32)


def good_quantize(w, scales, axis=0):
    return np.clip(np.rint(w / scales.reshape(_bshape(w, axis))), -128, 127).astype(np.int8)


def good_multiplier(m):
    f, e = np.frexp(m)
    m0, e = int(round(float(f) * 2**31)), int(e)
    if m0 == 2**31:
        m0, e = m0 // 2, e + 1
    return m0, -e


def good_requantize(acc, m0, shift, zero_point=0):
    total = 31 + shift
    r = (acc.astype(np.int64) * m0 + (1 << (total - 1))) >> total
    return np.clip(r + zero_point, -128, 127).astype(np.int8)


WRONG_LAB04 = {
    "lab04.per_channel_scale": {
        "wrong axis (reduces along the channel axis)":
            lambda w, axis=0: (np.abs(w).max(axis=axis) / 127).astype(np.float32),
        "zero channel gives scale 0": lambda w, axis=0: (np.abs(w).max(axis=_others(w, axis)) / 127).astype(np.float32),
        "divides by 128": lambda w, axis=0: good_scale(w, axis) * np.float32(127 / 128),
    },
    "lab04.quantize_per_channel": {
        "missing clamp (int8 wraps)": lambda w, s, axis=0: np.rint(w / s.reshape(_bshape(w, axis))).astype(np.int8),
        "round half away from zero": lambda w, s, axis=0: np.clip(
            np.sign(w / s.reshape(_bshape(w, axis))) * np.floor(np.abs(w / s.reshape(_bshape(w, axis))) + 0.5),
            -128, 127).astype(np.int8),
        "wrong axis (always axis 0)": lambda w, s, axis=0: good_quantize(w, s, 0),
        "truncates instead of rounding": lambda w, s, axis=0: np.clip(
            np.trunc(w / s.reshape(_bshape(w, axis))), -128, 127).astype(np.int8),
    },
    "lab04.quantize_multiplier": {
        "no carry when M0 rounds to 2**31": lambda m: (int(round(float(np.frexp(m)[0]) * 2**31)), -int(np.frexp(m)[1])),
        "shift sign flipped": lambda m: (good_multiplier(m)[0], -good_multiplier(m)[1]),
    },
    "lab04.requantize": {
        "zero point subtracted (sign flipped)": lambda acc, m0, s, z=0: good_requantize(acc, m0, s, -z),
        "missing clamp": lambda acc, m0, s, z=0: (
            ((acc.astype(np.int64) * m0 + (1 << (30 + s))) >> (31 + s)) + z).astype(np.int8),
        "float rounding half to even": lambda acc, m0, s, z=0: np.clip(
            np.rint(acc * (m0 / 2.0 ** (31 + s))) + z, -128, 127).astype(np.int8),
        "truncating shift (no rounding term)": lambda acc, m0, s, z=0: np.clip(
            ((acc.astype(np.int64) * m0) >> (31 + s)) + z, -128, 127).astype(np.int8),
    },
}
GOOD_LAB04 = {"lab04.per_channel_scale": good_scale, "lab04.quantize_per_channel": good_quantize,
        "lab04.quantize_multiplier": good_multiplier, "lab04.requantize": good_requantize}



# ---------- lab 5 ----------

def good_kl(p, q):
    p = np.asarray(p, float) / np.sum(p)
    q = np.asarray(q, float) / np.sum(q)
    m = p > 0
    return np.inf if np.any(q[m] == 0) else float(np.sum(p[m] * np.log(p[m] / q[m])))


def _q(b, i, levels, nonempty_only=True):
    level = np.digitize(np.arange(i), np.linspace(0, i, levels + 1)) - 1
    q = np.zeros(i)
    for g in range(levels):
        sel = (level == g) & ((b[:i] != 0) if nonempty_only else True)
        members = np.nonzero(sel)[0]
        if members.size:
            q[members] = b[:i][members].sum() / members.size
    return q


def good_candidates(bins, i, num_levels=128):
    b = np.asarray(bins, float)
    p = b[:i].copy()
    p[-1] += b[i:].sum()
    return p, _q(b, i, num_levels)


def _entropy(counts, edges, start_bin=128, replace0=True, cand=good_candidates):
    b = np.asarray(counts, float).copy()
    if replace0:
        b[0] = b[1]
    kls = [good_kl(*cand(b, i, 128)) for i in range(start_bin, len(b) + 1)]
    k = len(kls) - 1 - int(np.argmin(kls[::-1]))
    return float(edges[start_bin + k])


WRONG_LAB05 = {
    "lab05.abs_histogram": {
        "forgets the absolute value": lambda x, n: np.histogram(x, bins=n),
        "range from min|x| instead of 0": lambda x, n: np.histogram(np.abs(x), bins=n),
    },
    "lab05.kl_divergence": {
        "reversed arguments": lambda p, q: good_kl(q, p),
        "no normalisation": lambda p, q: float(np.sum(np.where(np.asarray(p) > 0, p * np.log(
            np.maximum(np.asarray(p, float), 1e-300) / np.maximum(np.asarray(q, float), 1e-300)), 0))),
    },
    "lab05.candidate_distributions": {
        "tail not folded into the last bin": lambda b, i, n=128: (np.asarray(b, float)[:i].copy(),
                                                                 good_candidates(b, i, n)[1]),
        "Q spread over empty bins too": lambda b, i, n=128: (good_candidates(b, i, n)[0],
                                                            _q(np.asarray(b, float), i, n, nonempty_only=False)),
    },
    "lab05.entropy_amax": {
        "bin 0 not replaced": lambda c, e, s=128: _entropy(c, e, s, replace0=False),
        "Q spread over empty bins": lambda c, e, s=128: _entropy(
            c, e, s, cand=lambda b, i, n: (good_candidates(b, i, n)[0], _q(b, i, n, False))),
    },
}
GOOD_LAB05 = {
    "lab05.abs_histogram": lambda x, n: np.histogram(np.abs(x), bins=n, range=(0, float(np.abs(x).max()))),
    "lab05.kl_divergence": good_kl,
    "lab05.candidate_distributions": good_candidates,
    "lab05.entropy_amax": _entropy,
}


GOOD = {**GOOD_LAB04, **GOOD_LAB05}
WRONG = {**WRONG_LAB04, **WRONG_LAB05}


test_correct_answers_pass, test_wrong_variants_rejected = answer_tests(GOOD, WRONG)


def test_specs_exact_on_fixed_tensors():
    w = np.array([[0.5, -1.0, 0.25], [2.0, 0.0, -0.5]], np.float32)
    s = lab04.spec_per_channel_scale(w, 0)
    assert s.dtype == np.float32 and np.allclose(s, [1 / 127, 2 / 127])
    assert lab04.spec_quantize_per_channel(w, s, 0).tolist() == [[64, -127, 32], [127, 0, -32]]
    assert lab04.spec_quantize_multiplier(0.5) == (2**30, 0)
    m0, sh = lab04.spec_quantize_multiplier(0.5)
    assert lab04.spec_requantize(np.array([-3, 3, 300], np.int32), m0, sh, -5).tolist() == [-6, -3, 127]
