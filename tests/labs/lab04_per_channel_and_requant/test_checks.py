"""Lab 4: known-wrong answers not covered by tests/labs/test_lab04_lab05_checks.py are rejected too."""

from __future__ import annotations

import numpy as np
from tests.support.grading import answer_tests


def _away_from_zero(acc, m0, shift, zero_point=0):
    """gemmlowp's rounding shift: ties away from zero (the lab asks for ties up)."""
    total = 31 + shift
    prod = acc.astype(np.int64) * m0
    mag = (np.abs(prod) + (1 << (total - 1))) >> total
    return np.clip(np.sign(prod) * mag + zero_point, -128, 127).astype(np.int8)


def _per_tensor(w, axis=0):
    """One scale for the whole tensor, repeated for every channel."""
    n = w.shape[axis]
    amax = float(np.abs(w).max())
    return np.full(n, amax / 127 if amax > 0 else 1.0, np.float32)


WRONG = {
    "lab04.requantize": {"ties away from zero (gemmlowp's rule, not the lab's)": _away_from_zero},
    "lab04.per_channel_scale": {"per-tensor scale repeated per channel": _per_tensor},
}

_, test_wrong_variants_rejected = answer_tests({}, WRONG)
