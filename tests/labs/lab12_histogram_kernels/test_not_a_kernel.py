"""Lab 12 judges kernels as kernels: a histogram written with np.bincount is rejected (even with a dummy
shared-memory write), the course's reference kernels bound to the answer names are refused in the students'
and graded copies, and a correct kernel in another style still passes."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, int32

from helpers.grading import kernel_source
from helpers.grading.check import CheckFailed, check
from helpers.kernels import histogram

MAX_BINS = histogram.MAX_BINS
NOT_A_KERNEL = "does not compile for a GPU|at once, not one element"


@cuda.jit
def hist_bincount(x, counts, width):
    """Known wrong: the whole histogram in numpy, no per-element work."""
    counts[:] = np.bincount(np.minimum((np.abs(x[:]) / width).astype(np.int64), counts.shape[0] - 1),
                            minlength=counts.shape[0])


@cuda.jit
def hist_bincount_shared(x, counts, width):
    """Known wrong: np.bincount plus one dummy shared-memory write for the privatisation check."""
    bins = cuda.shared.array(MAX_BINS, int32)
    bins[0] = 0
    counts[:] = np.bincount(np.minimum((np.abs(x[:]) / width).astype(np.int64), counts.shape[0] - 1),
                            minlength=counts.shape[0])


@cuda.jit
def hist_range_stride(x, counts, width):
    """Another style: a for loop over range(start, n, stride), the bin clamped with an if."""
    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    for i in range(start, x.size, cuda.gridDim.x * cuda.blockDim.x):
        b = int(abs(x[i]) / width)
        if b >= counts.size:
            b = counts.size - 1
        cuda.atomic.add(counts, b, 1)


@pytest.mark.parametrize("exercise, kernel", [("lab12.global_atomics", hist_bincount),
                                              ("lab12.shared_bins", hist_bincount),
                                              ("lab12.shared_bins", hist_bincount_shared)])
def test_bincount_is_not_a_kernel(exercise, kernel):
    with pytest.raises(CheckFailed, match=NOT_A_KERNEL):
        check(exercise, kernel, plot=False, perf=False)


@pytest.mark.parametrize("exercise, bound", [("lab12.global_atomics", histogram.hist_global),
                                             ("lab12.shared_bins", histogram.hist_shared)])
def test_a_bound_reference_kernel_is_refused_in_the_students_copy(monkeypatch, exercise, bound):
    monkeypatch.setattr(kernel_source, "course_kernels_allowed", lambda: False)
    with pytest.raises(CheckFailed, match="one of the course's own kernels"):
        check(exercise, bound, plot=False, perf=False)


def test_a_correct_kernel_in_another_style_passes():
    assert check("lab12.global_atomics", hist_range_stride, plot=False, perf=False).passed
