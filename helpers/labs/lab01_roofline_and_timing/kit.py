"""Lab 1's fake GPU and its timer checks: a stand-in for `torch.cuda` whose queued work finishes later
in real time, so a student's timer can be judged on any machine (synchronized? warmed up?); and the check of
the roofline exercise (bound and efficiency against the roof at each kernel's intensity).

Serves: lab01 (the timer exercise; also used by the lab's own demo cell).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable



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


# --- the timer exercise's runner and comparisons ------------------------------------------------
def run_timer(fn: Callable, ms: float, cold: int, repeats: int) -> dict:
    """Give the student's timer a fresh fake GPU and kernel; return its samples, call count and queued work."""
    cuda = FakeCuda()
    kernel = FakeKernel(cuda, ms, cold)
    got = fn(kernel, cuda, warmup=cold, repeats=repeats)
    samples = [float(x) for x in got] if isinstance(got, (list, tuple)) else got
    return {"samples": samples, "calls": kernel.calls, "work_ms": cuda.gpu_clock * 1e3}


def _queued_ms(calls: int, ms: float, cold: int) -> float:
    """The GPU work that `calls` calls of a FakeKernel(ms, cold) queue."""
    return min(calls, cold) * 10 * ms + max(calls - cold, 0) * ms


def compare_timer(got: dict, expected: dict) -> None:
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
    queued = _queued_ms(got["calls"], ms, warm)
    if abs(got.get("work_ms", 0.0) - queued) > 1e-6 * (1.0 + queued):
        raise AssertionError(f"the kernel's call counter says {got['calls']} calls, but the fake GPU received "
                             f"{got.get('work_ms', 0.0):.1f} ms of work: call fn() instead of changing its counter.")
    if got["calls"] < expected["calls"]:
        raise AssertionError(f"fn was called {got['calls']} times; a timer with warmup={warm} and "
                             f"repeats={len(want)} calls it {expected['calls']} times. Run the warm-up calls "
                             "first: the first calls are slow (lazy initialisation, cold caches).")
    if max(samples) > 0.5 * expected["cold_ms"]:
        raise AssertionError(f"a sample took {max(samples):.1f} ms while a warm call takes {ms} ms: the slow "
                             "warm-up work was still running when the clock started. Synchronize after "
                             "the warm-up calls.")


def compare_classify(got: object, expected: list[tuple[str, float]]) -> None:
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
