"""Lab 5: Q is built from the histogram's first i bins, not from P (whose last bin holds the clipped tail)."""

from __future__ import annotations

import numpy as np
from tests.support.grading import answer_tests

from instructors.keys import lab05_entropy_calibration as lab05


def _q_from_p(bins, i, num_levels=128):
    """Known wrong: Q squeezes P, the tail folded into its last bin, instead of bins[:i]."""
    p, _ = lab05.spec_candidate_distributions(bins, i, num_levels)
    folded = np.concatenate([p, np.zeros(len(bins) - i)])
    return p, lab05.spec_candidate_distributions(folded, i, num_levels)[1]


def test_folding_the_tail_changes_q_on_a_visible_case():
    gaps = np.array([5, 0, 3, 0, 0, 2, 7, 1, 0, 4, 6, 2], np.float64)
    assert not np.allclose(_q_from_p(gaps, 8, 4)[1], lab05.spec_candidate_distributions(gaps, 8, 4)[1])


WRONG = {"lab05.candidate_distributions": {"Q built from P (tail folded in)": _q_from_p}}

_, test_wrong_variants_rejected = answer_tests({}, WRONG)
