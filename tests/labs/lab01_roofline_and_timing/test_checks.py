"""Lab 1: the reference solutions pass check(), and known-wrong answers are rejected."""

from __future__ import annotations

import statistics
import time

import pytest

from helpers.grading import CheckFailed, check
from instructors.keys import lab01_roofline_and_timing as L


def test_reference_solutions_pass():
    check("lab01.intensity", L.gemm_intensity)
    check("lab01.predict", L.predict_bound)
    check("lab01.timer", L.reference_timer)
    check("lab01.classify", L.classify_kernels)


def _reject(exercise: str, fn, match: str | None = None) -> None:
    with pytest.raises(CheckFailed, match=match):
        check(exercise, fn, plot=False)


# --- intensity: wrong answers ---
def test_intensity_rejects_missing_factor_two():
    _reject("lab01.intensity", lambda m, n, k, b: m * n * k / (b * (m * k + k * n + m * n)))


def test_intensity_rejects_forgotten_output_write():
    _reject("lab01.intensity", lambda m, n, k, b: 2 * m * n * k / (b * (m * k + k * n)))


def test_intensity_rejects_ignoring_bytes_per_element():
    _reject("lab01.intensity", lambda m, n, k, b: 2 * m * n * k / (4 * (m * k + k * n + m * n)))


# --- predict: wrong answers ---
def test_predict_rejects_unit_mixup():
    # ridge computed from TFLOP/s and GB/s without converting units: 1000x too small
    _reject("lab01.predict", lambda f, b, p, bw: "memory" if f / b < p / bw else "compute")


def test_predict_rejects_inverted_rule():
    _reject("lab01.predict", lambda f, b, p, bw: "compute" if f / b < p * 1e3 / bw else "memory")


def test_predict_rejects_always_compute():
    _reject("lab01.predict", lambda f, b, p, bw: "compute")


# --- timer: wrong answers ---
def no_sync_timer(fn, cuda, warmup=3, repeats=10):
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def host_timer(fn, cuda, warmup=3, repeats=10, sync_after_warmup=True):
    """Correct without events: warm up, then perf_counter around fn() + synchronize."""
    for _ in range(warmup):
        fn()
    if sync_after_warmup:
        cuda.synchronize()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        cuda.synchronize()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def no_warmup_timer(fn, cuda, warmup=3, repeats=10):
    return host_timer(fn, cuda, 0, repeats)


def events_without_sync(fn, cuda, warmup=3, repeats=10):
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    pairs = [(cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    return [start.elapsed_time(end) for start, end in pairs]  # read before the GPU got there


def one_sample_timer(fn, cuda, warmup=3, repeats=10):
    samples = L.reference_timer(fn, cuda, warmup, repeats)
    return [statistics.median(samples)]


def test_timer_rejects_missing_synchronize():
    _reject("lab01.timer", no_sync_timer, "synchronize")


def test_timer_rejects_missing_warmup():
    _reject("lab01.timer", no_warmup_timer, "warm")


def test_timer_rejects_events_read_before_completion():
    _reject("lab01.timer", events_without_sync, "device not ready")


def test_timer_rejects_wrong_sample_count():
    _reject("lab01.timer", one_sample_timer, "samples")


def test_host_timer_with_sync_and_warmup_passes():
    check("lab01.timer", host_timer)


def test_fake_event_requires_timing_flag():
    cuda = L.FakeCuda()
    a, b = cuda.Event(), cuda.Event()
    a.record()
    b.record()
    b.synchronize()
    with pytest.raises(RuntimeError, match="enable_timing"):
        a.elapsed_time(b)


# --- classify: wrong answers ---
def efficiency_against_peak(kernels, peak, bw):
    got = L.classify_kernels(kernels, peak, bw)
    return [(bound, k["flops"] / k["seconds"] / 1e12 / peak) for (bound, _), k in zip(got, kernels)]


def bounds_swapped(kernels, peak, bw):
    flip = {"memory": "compute", "compute": "memory"}
    return [(flip[b], e) for b, e in L.classify_kernels(kernels, peak, bw)]


def test_classify_rejects_efficiency_against_peak():
    _reject("lab01.classify", efficiency_against_peak, "roof")


def test_classify_rejects_swapped_bounds():
    _reject("lab01.classify", bounds_swapped)


def test_timer_rejects_warmup_without_synchronize():
    def no_sync_after_warmup(fn, cuda, warmup=3, repeats=10):
        return host_timer(fn, cuda, warmup, repeats, sync_after_warmup=False)

    _reject("lab01.timer", no_sync_after_warmup, "Synchronize after")


def test_timer_rejects_ignoring_the_warmup_argument():
    _reject("lab01.timer", lambda fn, cuda, warmup=3, repeats=10: L.reference_timer(fn, cuda, 1, repeats),
            "called")
