"""Lab 12 checks: the reference histogram kernels pass; a histogram without atomics (a race the one-thread-
at-a-time simulator cannot show in the values), uncleared or unsynchronised shared bins, unclamped bins and
unprivatised updates are rejected; kernel counts reproduce the calibrators' amax exactly."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, int32

from helpers.grading.check import CheckFailed, check, verify
from helpers.kernels import histogram
from helpers.quant.calibrators import calibrate_all

MAX_BINS = histogram.MAX_BINS


@cuda.jit
def hist_no_atomic(x, counts, width):
    """Known wrong: counts[b] += 1 in global memory; right in the simulator, loses counts on a GPU."""
    last = counts.shape[0] - 1
    i = cuda.grid(1)
    while i < x.shape[0]:
        b = min(int(abs(x[i]) / width), last)
        counts[b] += 1
        i += cuda.gridsize(1)


@cuda.jit
def hist_unclamped(x, counts, width):
    """Known wrong: the largest |x| falls one past the last bin."""
    i = cuda.grid(1)
    while i < x.shape[0]:
        cuda.atomic.add(counts, int(abs(x[i]) / width), 1)
        i += cuda.gridsize(1)


def _shared(clear: bool = True, sync_before_merge: bool = True, shared_atomic: bool = True):
    """The privatised histogram with one mistake switched on."""

    @cuda.jit
    def kernel(x, counts, width):
        bins = cuda.shared.array(MAX_BINS, int32)
        nbins = counts.shape[0]
        tid = cuda.threadIdx.x
        if clear:
            for j in range(tid, nbins, cuda.blockDim.x):
                bins[j] = 0
        cuda.syncthreads()
        i = cuda.grid(1)
        while i < x.shape[0]:
            b = min(int(abs(x[i]) / width), nbins - 1)
            if shared_atomic:
                cuda.atomic.add(bins, b, 1)
            else:
                bins[b] += 1
            i += cuda.gridsize(1)
        if sync_before_merge:
            cuda.syncthreads()
        for j in range(tid, nbins, cuda.blockDim.x):
            if bins[j] > 0:
                cuda.atomic.add(counts, j, bins[j])

    return kernel


@pytest.mark.parametrize("exercise, kernel", [("lab12.global_atomics", histogram.hist_global),
                                              ("lab12.shared_bins", histogram.hist_shared)])
def test_reference_kernels_pass_visible_and_hidden_cases(exercise, kernel):
    verify(exercise, kernel)


@pytest.mark.parametrize("exercise, kernel, why", [
    ("lab12.global_atomics", hist_no_atomic, "data race: counts\\[0\\]"),
    ("lab12.global_atomics", hist_unclamped, "IndexError"),
    ("lab12.shared_bins", _shared(shared_atomic=False), "data race: element 0 of shared array"),
    ("lab12.shared_bins", _shared(clear=False), "elements differ"),
    ("lab12.shared_bins", _shared(sync_before_merge=False), "elements differ(.|\n)*data race"),
    ("lab12.shared_bins", histogram.hist_global, "updates to global bins"),
])
def test_known_wrong_kernels_are_rejected(exercise, kernel, why):
    with pytest.raises(CheckFailed, match=why):
        check(exercise, kernel, plot=False, perf=False)


def test_kernel_counts_reproduce_the_calibrators_amax_exactly():
    x = histogram.activations(np.random.default_rng(5), 3000)
    counts = histogram.numba_histogram(x, np.zeros(MAX_BINS, np.int32), histogram.reference(x).bin_width,
                                       "global")
    ours = histogram.amaxes(histogram.from_counts(counts, float(np.abs(x).max())), percentile=99.9)
    course = calibrate_all(x, percentiles=(99.9,))
    assert ours == {"percentile 99.9": course["percentile 99.9"], "entropy": course["entropy"]}


def test_from_counts_lays_bins_out_as_histogram_collect():
    x = histogram.activations(np.random.default_rng(6), 500)
    ref = histogram.reference(x, 64)
    rebuilt = histogram.from_counts(ref.counts, ref.max_seen)
    assert np.array_equal(rebuilt.edges, ref.edges) and rebuilt.bin_width == ref.bin_width


@pytest.mark.parametrize("bad", [0, MAX_BINS + 1, 2.5])
def test_reference_rejects_bin_counts_that_do_not_fit(bad):
    from helpers.errors import InputError

    with pytest.raises(InputError, match="num_bins"):
        histogram.reference(np.ones(4, np.float32), bad)


@pytest.mark.gpu
def test_gpu_histograms_match_the_course_histogram():
    timed = histogram.measure({"global": histogram.hist_global, "shared": histogram.hist_shared}, n=1 << 20,
                              repeats=5)
    assert set(timed.seconds) == {"global", "shared", "torch_histc"}
    assert all(len(v) == histogram.ROUNDS and min(v) > 0 for v in timed.seconds.values())
