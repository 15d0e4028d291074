"""Lab 1: arithmetic intensity, a correct GPU timer, and reading the roofline.

The timer exercise runs on any machine: check() hands the student's timer a fake CUDA module
(`FakeCuda`, the torch.cuda API: Event, synchronize) and a fake kernel whose calls return at
once and whose work finishes later in real time, as on a GPU. A timer that forgets to
synchronize measures almost nothing; one without warm-up catches the slow first calls.

Serves: lab01 (its exercises: spec, visible cases, hint).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from helpers.perf import roofline
from helpers.grading.exercise import Case, Exercise, register


# --- the fake GPU -----------------------------------------------------------------------------
class FakeCuda:
    """A stand-in for `torch.cuda`: one stream whose queued work finishes later in real time.

    Events carry two stamps: the wall-clock time the GPU reaches them (for query/synchronize)
    and a GPU-busy clock that advances only by queued work, so elapsed_time() measures the
    work itself even when the host is slowed down by other load.
    """

    def __init__(self) -> None:
        self.busy_until = time.perf_counter()  # wall clock when the queued work will have finished
        self.gpu_clock = 0.0  # seconds of work queued so far
        self.log: list[str] = []

    def enqueue(self, seconds: float) -> None:
        """Queue `seconds` of work behind what is queued already; return at once (asynchronous)."""
        self.busy_until = max(self.busy_until, time.perf_counter()) + seconds
        self.gpu_clock += seconds

    def synchronize(self) -> None:
        """Block until all queued work has finished (torch.cuda.synchronize)."""
        self.log.append("synchronize")
        _sleep_until(self.busy_until)

    def Event(self, enable_timing: bool = False) -> "FakeEvent":  # noqa: N802 - torch.cuda's name
        """A timing event on this fake stream (torch.cuda.Event)."""
        return FakeEvent(self, enable_timing)


class FakeEvent:
    """torch.cuda.Event on the fake stream: record() marks the current end of the queue."""

    def __init__(self, cuda: FakeCuda, enable_timing: bool):
        self.cuda, self.enable_timing = cuda, enable_timing
        self.stamp: float | None = None
        self.gpu_stamp = 0.0

    def record(self, stream: object = None) -> None:
        """Mark the current end of the queue."""
        self.cuda.log.append("record")
        self.stamp = max(self.cuda.busy_until, time.perf_counter())
        self.gpu_stamp = self.cuda.gpu_clock

    def query(self) -> bool:
        """True once the GPU has passed this event."""
        return self.stamp is not None and time.perf_counter() >= self.stamp

    def synchronize(self) -> None:
        """Block until the GPU has passed this event."""
        if self.stamp is None:
            raise RuntimeError("synchronize() on an event that was never recorded: call record() first.")
        _sleep_until(self.stamp)

    def elapsed_time(self, end: "FakeEvent") -> float:
        """Milliseconds of GPU work between this event and `end`; both must have completed, as in CUDA."""
        if not (self.enable_timing and end.enable_timing):
            raise RuntimeError("events must be created with Event(enable_timing=True) to measure time.")
        if self.stamp is None or end.stamp is None:
            raise RuntimeError("elapsed_time() needs both events recorded (call record() on each).")
        if not (self.query() and end.query()):
            raise RuntimeError("CUDA error: device not ready. The end event has not completed yet: "
                               "call end.synchronize() (or cuda.synchronize()) before elapsed_time().")
        return (end.gpu_stamp - self.gpu_stamp) * 1e3


def _sleep_until(t: float) -> None:
    """Sleep until perf_counter() reaches t."""
    while (left := t - time.perf_counter()) > 0:
        time.sleep(left)


class FakeKernel:
    """A callable that queues `ms` of GPU work per call, the first `cold` calls 10× longer."""

    def __init__(self, cuda: FakeCuda, ms: float, cold: int):
        self.cuda, self.ms, self.cold, self.calls = cuda, ms, cold, 0

    def __call__(self) -> None:
        slow = self.calls < self.cold
        self.calls += 1
        self.cuda.log.append("call")
        self.cuda.enqueue(self.ms * (10 if slow else 1) / 1e3)


# --- specs ------------------------------------------------------------------------------------
def gemm_intensity(m: int, n: int, k: int, bytes_per_element: float) -> float:
    """FLOPs per byte of C = A @ B with each matrix moved once."""
    return roofline.intensity(*roofline.gemm_cost(m, n, k, bytes_per_element))


def predict_bound(flops: float, bytes_moved: float, peak_tflops: float, bandwidth_gbs: float) -> str:
    """'memory' or 'compute': which roof limits a kernel of this work and traffic."""
    return roofline.classify(roofline.intensity(flops, bytes_moved), peak_tflops, bandwidth_gbs)


def classify_kernels(kernels: list[dict], peak_tflops: float, bandwidth_gbs: float) -> list[tuple[str, float]]:
    """For each {'flops', 'bytes', 'seconds'}: (bound, achieved ÷ roofline-attainable)."""
    out = []
    for kern in kernels:
        ai = roofline.intensity(kern["flops"], kern["bytes"])
        achieved = kern["flops"] / kern["seconds"] / 1e12
        out.append((roofline.classify(ai, peak_tflops, bandwidth_gbs),
                    achieved / roofline.attainable_tflops(ai, peak_tflops, bandwidth_gbs)))
    return out


def reference_timer(fn: Callable[[], object], cuda: Any, warmup: int = 3, repeats: int = 10) -> list[float]:
    """Per-repeat milliseconds of fn() on the GPU: warm-up, events around each call, synchronize."""
    for _ in range(warmup):
        fn()
    cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return samples


# --- the timer exercise's runner and comparison -------------------------------------------------
def _run_timer(fn: Callable, case: Case) -> dict:
    """Give the student's timer a fresh fake GPU and kernel; return its samples and the call count."""
    cuda = FakeCuda()
    kernel = FakeKernel(cuda, case.kwargs["ms"], case.kwargs["cold"])
    got = fn(kernel, cuda, warmup=case.kwargs["cold"], repeats=case.kwargs["repeats"])
    samples = [float(x) for x in got] if isinstance(got, (list, tuple)) else got
    return {"samples": samples, "calls": kernel.calls}


def _timer_spec(ms: float, cold: int, repeats: int) -> dict:
    """What a correct timer does: cold + repeats calls, `repeats` samples of about `ms` milliseconds."""
    return {"samples": [ms] * repeats, "calls": cold + repeats, "cold_ms": cold * 10 * ms}


def _compare_timer(got: dict, expected: dict) -> None:
    """Explain what a wrong timer got wrong: count, synchronization, warm-up.

    Judged by medians and call counts, so that a correct host-clock timer passes on a busy machine.
    """
    samples, want = got["samples"], expected["samples"]
    if not isinstance(samples, list):
        raise AssertionError(f"return a list of per-repeat milliseconds, got {type(samples).__name__}.")
    if len(samples) != len(want):
        raise AssertionError(f"you returned {len(samples)} samples; expected one per repeat ({len(want)}).")
    ms = want[0]
    if statistics.median(samples) < 0.5 * ms:
        raise AssertionError(f"your median is {statistics.median(samples):.3f} ms but each call does {ms} ms "
                             "of GPU work. The call returns before the GPU finishes: synchronize before "
                             "reading the clock (or use events and end.synchronize()).")
    warm = expected["calls"] - len(want)
    if got["calls"] < expected["calls"]:
        raise AssertionError(f"fn was called {got['calls']} times; a timer with warmup={warm} and "
                             f"repeats={len(want)} calls it {expected['calls']} times. Run the warm-up calls "
                             "first: the first calls are slow (lazy initialisation, cold caches).")
    if max(samples) > 0.5 * expected["cold_ms"]:
        raise AssertionError(f"a sample took {max(samples):.1f} ms while a warm call takes {ms} ms: the slow "
                             "warm-up work was still running when the clock started. Synchronize after "
                             "the warm-up calls.")


def _compare_classify(got: object, expected: list[tuple[str, float]]) -> None:
    """Compare (bound, efficiency) pairs: bounds exactly, efficiencies to 1e-6 relative."""
    if not isinstance(got, (list, tuple)) or len(got) != len(expected):
        raise AssertionError(f"return one (bound, efficiency) pair per kernel: {len(expected)} pairs.")
    for i, (g, (bound, eff)) in enumerate(zip(got, expected)):
        if not isinstance(g, (list, tuple)) or len(g) != 2:
            raise AssertionError(f"kernel #{i}: return a pair (bound, efficiency), got {g!r}.")
        if g[0] != bound:
            raise AssertionError(f"kernel #{i}: yours {g[0]!r} vs expected {bound!r}.")
        if not abs(float(g[1]) - eff) <= 1e-6 * abs(eff) + 1e-12:
            raise AssertionError(f"kernel #{i}: efficiency yours {float(g[1]):.4g} vs expected {eff:.4g}. "
                                 "Divide by the roof at this kernel's intensity, not by the peak.")


register(
    Exercise(
        id="lab01.intensity", title="arithmetic intensity of a GEMM",
        spec=gemm_intensity,
        cases=lambda: [Case("square fp32", (1024, 1024, 1024, 4)), Case("GEMV-like bf16", (1, 4096, 4096, 2)),
                       Case("BERT FFN int8", (4096, 3072, 768, 1)), Case("tall fp16", (65536, 64, 64, 2))],
        hint="FLOPs = 2·m·n·k (a multiply and an add). Bytes = bytes_per_element × (m·k + k·n + m·n): "
             "read A and B, write C.",
        compare="close", rtol=1e-9, atol=0.0, plot=False,
    ),
    Exercise(
        id="lab01.predict", title="memory- or compute-bound?",
        spec=predict_bound,
        cases=lambda: [Case("vector add on H200", (2.68e8, 3.2e9, 989.0, 4800.0)),
                       Case("GEMM 8192³ bf16 on H200", (1.1e12, 4.0e8, 989.0, 4800.0)),
                       Case("GEMM 512³ fp32 on a CPU", (2.7e8, 3.1e6, 1.0, 50.0)),
                       Case("batch-1 linear layer on an A100", (4.7e6, 4.7e6, 312.0, 2039.0))],
        hint="Intensity = flops / bytes. The ridge point is peak / bandwidth in FLOP per byte: convert "
             "TFLOP/s to FLOP/s (×1e12) and GB/s to B/s (×1e9). Left of the ridge is 'memory'.",
        compare="exact", plot=False,
    ),
    Exercise(
        id="lab01.timer", title="a correct GPU timer",
        spec=_timer_spec,
        cases=lambda: [Case("2 ms kernel, 3 cold calls", kwargs={"ms": 2.0, "cold": 3, "repeats": 8}),
                       Case("4 ms kernel, 5 cold calls", kwargs={"ms": 4.0, "cold": 5, "repeats": 5})],
        hint="Call fn() `warmup` times and synchronize; then per repeat: start = cuda.Event(enable_timing=True), "
             "start.record(), fn(), end.record(), end.synchronize(), start.elapsed_time(end).",
        compare=_compare_timer, run=_run_timer, plot=False,
    ),
    Exercise(
        id="lab01.classify", title="classify measured kernels on the roofline",
        spec=classify_kernels,
        cases=lambda: [Case("H200 kernels", (
            [{"flops": 2.68e8, "bytes": 3.2e9, "seconds": 7.6e-4},
             {"flops": 1.1e12, "bytes": 4.0e8, "seconds": 1.4e-3},
             {"flops": 3.4e10, "bytes": 2.0e7, "seconds": 9.0e-5},
             {"flops": 4.2e9, "bytes": 3.5e7, "seconds": 2.0e-5}], 989.0, 4800.0)),
            Case("CPU kernels", ([{"flops": 2.1e9, "bytes": 1.2e7, "seconds": 0.04},
                                   {"flops": 1.0e7, "bytes": 1.2e8, "seconds": 0.015}], 0.1, 10.0))],
        hint="For each kernel: intensity = flops/bytes; bound from the ridge point; attainable = "
             "min(peak, intensity × bandwidth) in TFLOP/s; efficiency = achieved TFLOP/s ÷ attainable.",
        compare=_compare_classify, plot=False,
    ),
)
