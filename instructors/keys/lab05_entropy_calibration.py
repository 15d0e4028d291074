"""Lab 5: entropy (KL divergence) calibration, TensorRT's method, built step by step.

Specs are helpers.quant.calibrators' own functions (tested against pytorch-quantization 2.1.3).
Known-wrong variants (tests/labs/test_lab04_lab05_checks.py, tests/labs/lab05_entropy_calibration/): the
tail not folded into the last bin, Q built from P (the tail folded in), Q spread over empty bins too, bin 0
not replaced, KL arguments reversed or not normalised.

Serves: lab05 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.quant import calibrators as C


def spec_abs_histogram(x: np.ndarray, num_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """np.histogram of |x| over [0, max|x|] with num_bins bins: (counts, edges)."""
    a = np.abs(x.astype(np.float64)).ravel()
    return np.histogram(a, bins=num_bins, range=(0.0, float(a.max())))


def spec_kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) of unnormalised histograms (normalise both; sum over p > 0; inf if q = 0 there)."""
    return C.kl_divergence(np.asarray(p, np.float64), np.asarray(q, np.float64))


def spec_candidate_distributions(bins: np.ndarray, i: int, num_levels: int = 128) -> tuple[np.ndarray, np.ndarray]:
    """(P, Q) for clipping at bin i: P folds bins[i:] into P[i-1]; Q merges bins[:i] into num_levels
    groups (np.digitize(np.arange(i), np.linspace(0, i, num_levels + 1)) - 1) and spreads each
    group's count evenly over its non-empty bins."""
    return C.candidate_distributions(bins, i, num_levels)


def spec_entropy_amax(counts: np.ndarray, edges: np.ndarray, start_bin: int = 128) -> float:
    """The edge edges[i] (i >= start_bin) of smallest KL(P || Q), the last one on ties; bin 0 := bin 1."""
    hist = C.Histogram(len(counts), counts=np.asarray(counts, np.int64), edges=np.asarray(edges, np.float64),
                       max_seen=float(edges[-1]))
    return C.amax_entropy(hist, start_bin=start_bin)


def _relu_acts(seed: int, n: int = 20000) -> np.ndarray:
    """ReLU outputs with a heavy tail, like a hidden layer's activations."""
    rng = np.random.default_rng(seed)
    return np.maximum(rng.standard_t(3, size=n), 0).astype(np.float32)


def histogram_cases() -> list[Case]:
    """Visible cases: signed data (take |x|), ReLU outputs, few bins."""
    return [
        Case("signed values, 16 bins", (np.random.default_rng(0).normal(size=500).astype(np.float32), 16)),
        Case("ReLU activations, 512 bins", (_relu_acts(1, 4000), 512)),
        Case("3 values, 8 bins", (np.array([0.0, -1.0, 0.5], np.float32), 8)),
    ]


def kl_cases() -> list[Case]:
    """Visible cases: identical, scaled (normalisation), different, zero q where p > 0."""
    p = np.array([4.0, 3.0, 2.0, 1.0])
    return [
        Case("identical", (p, p.copy())),
        Case("q = 10 p (normalise first)", (p, 10 * p)),
        Case("different", (p, np.array([1.0, 2.0, 3.0, 4.0]))),
        Case("p = 0 where q > 0 counts nothing", (np.array([0.0, 1.0, 1.0]), np.array([1.0, 1.0, 1.0]))),
        Case("q = 0 where p > 0 is infinite", (p, np.array([1.0, 1.0, 0.0, 1.0]))),
    ]


def candidate_cases() -> list[Case]:
    """Visible cases: tail folding, empty bins inside a group, a tiny grid."""
    counts, _ = spec_abs_histogram(_relu_acts(2), 512)
    gaps = np.array([5, 0, 3, 0, 0, 2, 7, 1, 0, 4, 6, 2], np.float64)
    return [
        Case("12 bins, clip at 8, 4 levels", (gaps, 8, 4)),
        Case("12 bins, clip at 12, 3 levels", (gaps, 12, 3)),
        Case("ReLU histogram, clip at 300, 128 levels", (counts, 300, 128)),
    ]


def entropy_cases() -> list[Case]:
    """Visible cases: ReLU and Gaussian activations over 512 bins."""
    out = []
    relu_gauss = np.maximum(np.random.default_rng(5).normal(size=20000), 0).astype(np.float32)
    for label, x in (("ReLU activations", _relu_acts(3)), ("ReLU of a Gaussian (half zeros)", relu_gauss),
                     ("|Gaussian|", np.random.default_rng(4).normal(size=20000).astype(np.float32))):
        counts, edges = spec_abs_histogram(x, 512)
        out.append(Case(f"{label}, 512 bins", (counts, edges, 128)))
    return out


def hidden_entropy_cases() -> list[Case]:
    """Hidden: a Laplace distribution over 400 bins."""
    counts, edges = spec_abs_histogram(np.random.default_rng(504).laplace(size=30000).astype(np.float32), 400)
    return [Case("hidden: Laplace, 400 bins", (counts, edges, 128))]


def hidden_candidate_cases() -> list[Case]:
    """Hidden: sparse bins, and a clip at the very end."""
    b = np.random.default_rng(503).integers(0, 5, 300).astype(float)
    return [Case("hidden: sparse bins, 128 levels", (b, 257, 128)), Case("hidden: i = len(bins)", (b, 300, 16))]


register(
    Exercise(
        id="lab05.abs_histogram", title="histogram of |x|", spec=spec_abs_histogram, cases=histogram_cases,
        hidden=lambda: [Case("hidden: 2-D input", (np.random.default_rng(501).laplace(size=(30, 40))
                                                    .astype(np.float32), 64))],
        compare="close", rtol=1e-6, atol=0.0,
        hint="Histogram the magnitudes, with equal bins that start at 0 and end at the largest magnitude.",
        hints=("np.histogram takes bins= and range=(low, high); flatten |x| first. It returns (counts, edges).",),
    ),
    Exercise(
        id="lab05.kl_divergence", title="KL divergence", spec=spec_kl_divergence, cases=kl_cases,
        hidden=lambda: [Case("hidden: long vectors", (np.arange(1, 50, dtype=float), np.arange(50, 1, -1, dtype=float)))],
        compare="close", rtol=1e-9, atol=1e-12,
        hint="Turn both histograms into probabilities first; then only bins where p is positive contribute.",
        hints=("Sum p·log(p/q) over the bins with p > 0. If q is 0 in such a bin the divergence is infinite "
               "(np.inf).",),
    ),
    Exercise(
        id="lab05.candidate_distributions", title="P and Q for one clipping point",
        spec=spec_candidate_distributions, cases=candidate_cases, hidden=hidden_candidate_cases,
        compare="close", rtol=1e-9, atol=1e-12,
        hint="P is the histogram clipped at bin i (what lies beyond lands in its last bin); Q is the histogram's "
             "own first i bins, before that fold, squeezed into num_levels groups and spread back.",
        hints=("Group the first i bins with np.digitize over np.linspace(0, i, num_levels + 1). Each group's "
               "total is shared equally by its non-empty bins only; empty bins stay 0.",),
    ),
    Exercise(
        id="lab05.entropy_amax", title="entropy calibration", spec=spec_entropy_amax, cases=entropy_cases,
        hidden=hidden_entropy_cases, compare="close", rtol=1e-9, atol=0.0,
        hint="Try every clipping bin from start_bin to the end, and keep the one whose P and Q differ least.",
        hints=("Replace bins[0] by bins[1] first (on a copy). Use 128 levels. On equal divergences keep the "
               "later bin; return the edge at that bin.",),
    ),
)
