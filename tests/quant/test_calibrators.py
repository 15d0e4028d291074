"""Chapter 6: calibrators written from scratch, cross-checked against pytorch-quantization 2.1.3.

Tolerances (stated, and why):
- max: exact (both take max |x|).
- histogram: the same bins; bin counts may differ by a few values that sit exactly on a bin edge
  (torch.histc computes x * bins / max, we compute x / width).
- entropy: fed pytorch-quantization's own histogram, exactly its amax; from our own histogram,
  within one bin width. On inputs with few distinct values it returns the position of a NaN
  divergence (np.argmin does that); nan_policy='pytorch_quantization' reproduces it exactly.
- mse: pytorch-quantization's _compute_amax_mse calls .cuda(), so we compare against
  helpers.plugins.pq_compat.compute_amax_mse (the same function without .cuda(), using the library's own
  fake_tensor_quant): exactly its amax from its histogram, within one bin width from ours.
- percentile: pytorch-quantization returns the lower edge of the bin where the CDF reaches p, we
  return its upper edge (so at least p % of the values are inside the range); within one bin
  width of its value plus one bin width, on data whose tail is not sparse.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.errors import InputError
from helpers.quant import calibrators as C

pq_calib = pytest.importorskip("pytorch_quantization.calib")
NUM_BINS = 512  # pytorch-quantization's entropy loop is pure Python: 2048 bins take ~15 s


def _batches(seed=0, n=3, size=20000):
    rng = np.random.default_rng(seed)
    return [np.maximum(rng.standard_t(4, size=size), 0).astype(np.float32) * (1 + 0.1 * i) for i in range(n)]


@pytest.fixture(scope="module")
def both():
    pq = pq_calib.HistogramCalibrator(8, None, False, num_bins=NUM_BINS)
    mine = C.Histogram(NUM_BINS)
    for b in _batches():
        pq.collect(torch.tensor(b))
        mine.collect(b)
    return pq, mine, float(pq.compute_amax("entropy"))  # slow (pure Python): computed once


def _pq_hist(pq):
    return C.Histogram(len(pq._calib_hist), counts=pq._calib_hist.int().numpy().astype(np.int64),
                       edges=pq._calib_bin_edges.numpy().astype(np.float64))


def test_max_equals_pq():
    m = pq_calib.MaxCalibrator(8, None, False)
    batches = _batches()
    for b in batches:
        m.collect(torch.tensor(b))
    assert C.calibrate(batches, "max") == float(m.compute_amax())


def test_per_channel_max():
    w = np.random.default_rng(0).normal(size=(4, 9)).astype(np.float32)
    assert np.array_equal(C.amax_max(w, axis=0), np.abs(w).max(axis=1))


def test_histogram_matches_pq(both):
    pq, mine, _ = both
    ph = pq._calib_hist.int().numpy()
    assert len(mine.counts) == len(ph)  # it grew the same way over the batches
    assert mine.counts.sum() == ph.sum()
    assert np.abs(mine.counts - ph).sum() <= 10
    assert mine.edges[-1] == pytest.approx(float(pq._calib_bin_edges[-1]), rel=1e-6)


def test_entropy_same_histogram_exact(both):
    pq, _, theirs = both
    assert C.amax_entropy(_pq_hist(pq)) == pytest.approx(theirs, rel=1e-6)


def test_entropy_own_histogram_within_one_bin(both):
    _, mine, theirs = both
    assert abs(C.amax_entropy(mine) - theirs) <= mine.bin_width * 1.001


def _pq_mse_on_cpu(pq):
    """pytorch-quantization's MSE amax through helpers.plugins.pq_compat (its own version calls .cuda())."""
    from helpers.plugins.pq_compat import compute_amax_mse

    return float(compute_amax_mse(pq._calib_hist.int().numpy(), pq._calib_bin_edges.numpy(), 8, False))


def test_mse_within_one_bin(both):
    pq, mine, _ = both
    want = _pq_mse_on_cpu(pq)
    assert abs(C.amax_mse(_pq_hist(pq)) - want) <= 1e-6 * want
    assert abs(C.amax_mse(mine) - want) <= mine.bin_width * 1.001


@pytest.mark.parametrize("p", [99.9, 99.99, 99.999])
def test_percentile_within_one_bin(p):
    x = np.abs(np.random.default_rng(1).normal(size=400000)).astype(np.float32)
    pq = pq_calib.HistogramCalibrator(8, None, False, num_bins=2048)
    pq.collect(torch.tensor(x))
    mine = C.Histogram(2048).collect(x)
    theirs = float(pq.compute_amax("percentile", percentile=p))
    assert abs(C.amax_percentile(mine, p) - (theirs + mine.bin_width)) <= mine.bin_width * 1.001
    assert (x <= C.amax_percentile(mine, p)).mean() >= p / 100


def test_methods_order_on_heavy_tail():
    amax = C.calibrate_all(_batches(), num_bins=NUM_BINS)
    assert amax["percentile 99.9"] <= amax["percentile 99.99"] <= amax["percentile 99.999"] <= amax["max"]
    assert amax["mse"] < amax["max"] and amax["entropy"] < amax["max"]


def test_entropy_collapse_on_few_levels_matches_pq():
    # Three levels over 512 bins: bins 1..255 are empty, so candidates 128..256 have no Q (NaN).
    x = np.random.default_rng(0).choice(np.float32([0, 0.5, 1]), 20000, p=[0.6, 0.2, 0.2])
    pq = pq_calib.HistogramCalibrator(8, None, False, num_bins=512)
    pq.collect(torch.tensor(x))
    theirs = float(pq.compute_amax("entropy"))
    hist = C.Histogram(512).collect(x)
    assert theirs == 0.5  # collapsed: clips half the range away
    assert C.amax_entropy(hist, nan_policy="pytorch_quantization") == theirs
    assert C.amax_entropy(hist) == 1.0


def test_entropy_collapse_on_digits_pixels():
    from sklearn.datasets import load_digits

    x = load_digits().data.astype(np.float32) / 16  # 17 grey levels
    hist = C.Histogram(2048).collect(x)
    assert C.amax_entropy(hist, nan_policy="pytorch_quantization") == 0.0625  # FACTS.md


def test_calibrator_bad_input():
    with pytest.raises(InputError, match="method"):
        C.calibrate(np.ones(4, np.float32), "median")
    with pytest.raises(InputError, match="empty"):
        C.amax_entropy(C.Histogram())
    with pytest.raises(InputError, match="percentile"):
        C.amax_percentile(C.Histogram().collect(np.ones(4, np.float32)), 120)
    with pytest.raises(InputError, match="NaN or Inf"):
        C.Histogram().collect(np.array([1.0, np.nan], np.float32))
    with pytest.raises(InputError, match="floating point"):
        C.calibrate(np.arange(5), "max")
    with pytest.raises(InputError, match="no batches"):
        C.calibrate([], "mse")


def test_figures_pass_the_figure_check():
    import matplotlib.pyplot as plt
    from helpers.figure_check import figure_problems

    from helpers.chapters.ch05_quantization_fundamentals import figures

    x = np.abs(np.random.default_rng(0).normal(size=5000)).astype(np.float32)
    figs = [figures.grid_figure(3), figures.grid_figure(4, symmetric=False),
            figures.histogram_with_clips(x, C.calibrate_all(x, num_bins=256), "t"),
            figures.channel_range_figure(np.linspace(0.1, 1, 8), "r"),
            figures.calibration_curves_figure(C.Histogram(256).collect(x))]
    try:
        for f in figs:
            assert figure_problems(f) == []
    finally:
        plt.close("all")
