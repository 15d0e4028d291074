"""One way to time things: warm-up, synchronization, repeats; median and spread; interleaved rounds.

GPU work is timed with CUDA events on the stream it runs on (torch, cupy or numba), CPU work with
perf_counter. ``timeit`` times one function; ``interleaved`` is THE harness that compares several: round
after round it times each function in turn (so a slow moment of the machine slows them all alike) and
returns a ``Rounds``: per-name samples, medians with their spread, and paired ratios (``helpers.spread``).
Its ``graph=True`` mode replays each function as one CUDA graph (the GEMV tables: no launch gaps counted);
``Rounds.harness`` names the mode, so a record can say which harness timed it.

    r = bench.interleaved({"fp16": lambda: a @ b, "int8": lambda: int8_mm(a8, b8)}, rounds=7, clock="torch")
    r.median_s("int8"), r.spread("int8"), r.ratio("fp16", "int8")   # (fp16 time ÷ int8 time, its spread)

Records (the format, session and store I/O) live in ``helpers.records``; the names below are kept here too.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helpers.errors import InputError, NoGPUError, require_package
from helpers.records import (  # noqa: F401 - re-exported: the record format moved to helpers.records
    RESULTS_VAR,
    Record,
    _session,
    latest_by_name,
    load_records,
    record,
    record_relative,
    save_records,
    session_records,
    set_notebook,
)
from helpers.validation import require_choice, require_int_range, require_real

if TYPE_CHECKING:
    from helpers.spread import Spread

BACKENDS = ("auto", "cpu", "torch", "cupy", "numba")


def median(xs: Sequence[float]) -> float:
    """The median, with the middle pair averaged as lo + (hi - lo) / 2: never overflows to inf for finite samples
    (statistics.median's (lo + hi) / 2 does near the largest float)."""
    v = sorted(xs)
    if not v:
        raise statistics.StatisticsError("no median for empty data")
    lo, hi = v[(len(v) - 1) // 2], v[len(v) // 2]
    return lo + (hi - lo) / 2


@dataclass(frozen=True)
class Timing:
    """Seconds per call over repeated runs."""

    samples_s: tuple[float, ...]
    backend: str

    def __post_init__(self) -> None:
        """At least one sample, each a finite number of seconds >= 0 (a list is kept as a tuple); a known backend."""
        if not isinstance(self.samples_s, (tuple, list)) or not self.samples_s:
            raise InputError(f"samples_s must be a non-empty tuple of seconds, got {self.samples_s!r}; "
                             "time something with bench.timeit(fn).")
        object.__setattr__(self, "samples_s", tuple(require_real(s, "every sample", 0.0) for s in self.samples_s))
        require_choice(self.backend, BACKENDS[1:], "backend")

    @property
    def median_s(self) -> float:
        """Median seconds per call."""
        return median(self.samples_s)

    @property
    def median_ms(self) -> float:
        """Median milliseconds per call."""
        return self.median_s * 1e3

    def percentile_s(self, q: float) -> float:
        """The q-th percentile (0..100) of the samples, nearest-rank."""
        q = require_real(q, "q (a percentile)", 0.0, 100.0)
        s = sorted(self.samples_s)
        return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the relative spread of the samples (inf if the median is 0 and they differ)."""
        width = self.percentile_s(90) - self.percentile_s(10)
        return width / self.median_s if self.median_s else (0.0 if width == 0 else math.inf)

    def __str__(self) -> str:
        return f"{self.median_ms:.3f} ms (median of {len(self.samples_s)}, spread {self.spread:.0%})"


def _resolve_backend(backend: str) -> str:
    """Pick 'torch' when auto and torch has a GPU, else 'cpu'."""
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}; got {backend!r}.")
    if backend != "auto":
        return backend
    from helpers.device import torch_device

    return "torch" if torch_device() == "cuda" else "cpu"


def require_backend(backend: str) -> None:
    """Raise MissingPackageError or NoGPUError when a GPU timing backend cannot run here."""
    from helpers.device import GPU_EXTRAS, has_gpu, simulator_enabled

    what = f"timing with backend={backend!r}"
    if backend == "torch":
        torch = require_package("torch", "pip install torch", "the 'torch' timing backend")
        if not torch.cuda.is_available():
            raise NoGPUError(f"{what} (CUDA events)")
    elif backend == "cupy":
        require_package("cupy", GPU_EXTRAS, "the 'cupy' timing backend")
        if not has_gpu():
            raise NoGPUError(what)
    elif backend == "numba" and not simulator_enabled() and not has_gpu():
        raise NoGPUError(what)


def _event_pair(backend: str) -> tuple[Any, Any, Callable[[Any, Any], float]]:
    """Start/stop CUDA events and a function giving elapsed seconds, for one GPU backend."""
    if backend == "torch":
        import torch

        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        return a, b, lambda s, e: (e.synchronize(), s.elapsed_time(e) / 1e3)[1]
    if backend == "cupy":
        import cupy

        a, b = cupy.cuda.Event(), cupy.cuda.Event()
        return a, b, lambda s, e: (e.synchronize(), cupy.cuda.get_elapsed_time(s, e) / 1e3)[1]
    from numba import cuda

    a, b = cuda.event(), cuda.event()
    return a, b, lambda s, e: (e.synchronize(), cuda.event_elapsed_time(s, e) / 1e3)[1]


def synchronize(backend: str) -> None:
    """Wait until the GPU has finished all work queued by `backend`."""
    if backend == "torch":
        import torch

        torch.cuda.synchronize()
    elif backend == "cupy":
        import cupy

        cupy.cuda.Device().synchronize()
    elif backend == "numba":
        from numba import cuda

        cuda.synchronize()


def _check_counts(**counts: Any) -> None:
    """warmup >= 0, repeats >= 1, inner >= 1, each a whole number."""
    for name, value in counts.items():
        require_int_range(value, 0 if name == "warmup" else 1, 10**9, name)


def timeit(
    fn: Callable[[], Any],
    *,
    backend: str = "auto",
    warmup: int = 3,
    repeats: int = 20,
    inner: int = 1,
) -> Timing:
    """Time `fn()` after `warmup` calls: `repeats` samples of `inner` calls each, per-call seconds.

    GPU backends use CUDA events and synchronize, so that queued kernels are counted.
    The numba backend under the CUDA simulator falls back to the CPU clock.
    """
    if not callable(fn):
        raise InputError(f"timeit needs a function to call, got {type(fn).__name__}. Pass e.g. lambda: f(x).")
    _check_counts(warmup=warmup, repeats=repeats, inner=inner)
    backend = _resolve_backend(backend)
    require_backend(backend)
    from helpers.device import simulator_enabled

    gpu = backend in ("torch", "cupy") or (backend == "numba" and not simulator_enabled())
    for _ in range(warmup):
        fn()
    if gpu:
        synchronize(backend)
    samples = []
    for _ in range(repeats):
        if gpu:
            start, stop, elapsed = _event_pair(backend)
            start.record()
            for _ in range(inner):
                fn()
            stop.record()
            samples.append(elapsed(start, stop) / inner)
        else:
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples.append((time.perf_counter() - t0) / inner)
    return Timing(tuple(samples), backend if gpu else "cpu")


GRAPH_HARNESS = "interleaved rounds, CUDA-graph replay"
EVENTS_HARNESS = "interleaved rounds, CUDA events around queued launches"
CPU_HARNESS = "interleaved rounds, CPU clock"


@dataclass(frozen=True)
class Rounds:
    """Seconds per call of each named function, one sample per interleaved round (the i-th samples share a round)."""

    seconds: Mapping[str, tuple[float, ...]]
    clocks: Mapping[str, str]        # the Timing backend of each name: 'cpu', 'torch', 'cupy' or 'numba'
    graph: bool = False

    def _samples(self, name: str) -> tuple[float, ...]:
        if name not in self.seconds:
            raise InputError(f"no timing named {name!r}; the rounds timed {', '.join(self.seconds)}.")
        return self.seconds[name]

    @property
    def harness(self) -> str:
        """How the samples were taken: CUDA-graph replay, CUDA events around queued launches, or the CPU clock."""
        if self.graph:
            return GRAPH_HARNESS
        return CPU_HARNESS if set(self.clocks.values()) == {"cpu"} else EVENTS_HARNESS

    def timing(self, name: str) -> Timing:
        """The samples of one function as a ``Timing``."""
        return Timing(self._samples(name), self.clocks[name])

    def median_s(self, name: str) -> float:
        """Median seconds per call of one function over the rounds."""
        return median(self._samples(name))

    def spread(self, name: str, per_call: Callable[[float], float] | None = None) -> "Spread":
        """p10..p90 of one function's rounds (min..max under 5), in seconds or mapped by per_call(seconds)."""
        from helpers.spread import INTERLEAVED, of_samples

        return of_samples([per_call(x) if per_call else x for x in self._samples(name)], INTERLEAVED)

    def ratio(self, base: str, other: str) -> tuple[float, "Spread | None"]:
        """base ÷ other time (> 1: `other` is faster): the median of the rounds' ratios and their spread."""
        from helpers.spread import paired_ratio

        return paired_ratio(self._samples(base), self._samples(other))


L2_BYTES = 50 * 2**20  # the H100/H200 L2 cache


def l2_copies(nbytes: int, target: int = 6 * L2_BYTES, most: int = 96) -> int:
    """How many copies of a weight of `nbytes` make one timed pass read `target` bytes, several times the L2 cache, so
    that no call finds its weight cached (2..`most`)."""
    return max(2, min(most, math.ceil(target / max(nbytes, 1))))


def graph_replay(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture `fn` (fixed inputs, no host sync) in a CUDA graph after warming it on a side stream; its replay."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.inference_mode():
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.inference_mode():
        fn()
    return g.replay


def _sampler(fn: Callable[[], Any], clock: str, per_round: int, inner: int) -> Callable[[], float]:
    """One round's sample of `fn`: the median of `per_round` clock readings, each over `inner` calls (per call)."""
    gpu = clock != "cpu"

    def one() -> float:
        if gpu:
            start, stop, elapsed = _event_pair(clock)
            start.record()
            for _ in range(inner):
                fn()
            stop.record()
            return elapsed(start, stop) / inner
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - t0) / inner

    return lambda: statistics.median(one() for _ in range(per_round))


def round_robin(samplers: Mapping[str, Callable[[], float]], rounds: int, *, settle: Mapping[str, Callable[[], Any]]
                | None = None, rotate: bool = False) -> dict[str, list[float]]:
    """Call every sampler (each returns one value, e.g. seconds per call) once per round, in turn, so that a slow
    moment of the machine (clock, temperature, a neighbour) touches them all alike; one value per round for each.
    `settle` calls run just before their sampler in every round; `rotate` starts each round one name later."""
    require_int_range(rounds, 2, 1000, "rounds (at least 2 give a spread)")
    names = list(samplers)
    out: dict[str, list[float]] = {k: [] for k in names}
    for i in range(rounds):
        shift = i % len(names) if rotate and names else 0
        for k in names[shift:] + names[:shift]:
            if settle and k in settle:
                settle[k]()
            out[k].append(float(samplers[k]()))
    return out


def interleaved(fns: Mapping[str, Callable[[], Any]], *, rounds: int = 7, clock: str | Mapping[str, str] = "auto",
                warmup: int = 1, settle: int = 0, per_round: int = 1, inner: int = 1, graph: bool = False,
                rotate: bool = False) -> Rounds:
    """THE interleaved-rounds harness: time every function in `fns` once per round, in turn, over `rounds` rounds.

    clock: the Timing backend ('cpu', 'torch', 'cupy', 'numba', 'auto'), or one per name. warmup: calls of each
    before round 1; settle: untimed calls of each just before its sample in every round. A round's sample is the
    median of `per_round` readings, each of `inner` back-to-back calls (per call). graph: capture each function
    once in a CUDA graph and time its replays (torch events); rotate: start each round one name later.
    """
    if not isinstance(fns, Mapping) or not fns or not all(callable(f) for f in fns.values()):
        raise InputError("interleaved needs a dict of name -> function to call, e.g. {'a': lambda: f(x)}.")
    _check_counts(warmup=warmup, per_round=per_round, inner=inner)
    require_int_range(settle, 0, 10**9, "settle")
    require_int_range(rounds, 2, 1000, "rounds (at least 2 give a spread)")
    clocks = {k: _resolve_backend(clock if isinstance(clock, str) else clock.get(k, "auto")) for k in fns}
    from helpers.device import simulator_enabled

    for k, c in clocks.items():
        if graph and c != "torch":
            raise InputError(f"graph=True replays CUDA graphs with torch; {k!r} has clock {c!r}. Pass clock='torch'.")
        require_backend(c)
        if c == "numba" and simulator_enabled():
            clocks[k] = "cpu"  # the CUDA simulator runs on the CPU: time it with the CPU clock
    calls = {k: graph_replay(f) if graph else f for k, f in fns.items()}
    for k, f in calls.items():
        for _ in range(warmup):
            f()
    for c in set(clocks.values()):
        synchronize(c)
    samplers = {k: _sampler(f, clocks[k], per_round, inner) for k, f in calls.items()}
    settles = {k: (lambda f=f: [f() for _ in range(settle)]) for k, f in calls.items()} if settle else None
    got = round_robin(samplers, rounds, settle=settles, rotate=rotate)
    return Rounds({k: tuple(v) for k, v in got.items()}, clocks, graph)


def timeit_interleaved(fns: dict[str, Callable[[], Any]], *, warmup: int = 2, repeats: int = 10) -> dict[str, Timing]:
    """CPU timings of several functions, one call of each per round (``interleaved`` with the CPU clock)."""
    if not isinstance(fns, dict) or not fns or not all(callable(f) for f in fns.values()):
        raise InputError("timeit_interleaved needs a dict of name -> function to call, e.g. {'a': lambda: f(x)}.")
    _check_counts(warmup=warmup, repeats=repeats)
    if repeats == 1:  # a single round has no spread; interleaved() asks for two
        return {k: timeit(f, backend="cpu", warmup=warmup, repeats=1) for k, f in fns.items()}
    r = interleaved(fns, rounds=repeats, clock="cpu", warmup=warmup)
    return {k: r.timing(k) for k in fns}


def timed_rounds(timers: Mapping[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Call every timer (each returns seconds per call of what it times) once per round, in turn (``round_robin``)."""
    return round_robin(timers, rounds)


def bandwidth_gbs(bytes_moved: float, seconds: float) -> float:
    """Effective bandwidth in GB/s (1e9 bytes) for bytes read plus written."""
    return bytes_moved / seconds / 1e9


def gbs(fn: Callable[[], Any], bytes_moved: float, backend: str, **timing: int) -> float:
    """GB/s of `bytes_moved` (read + written) per call of `fn`: the median of ``timeit(fn, **timing)``."""
    return bandwidth_gbs(bytes_moved, timeit(fn, backend=backend, **timing).median_s)


def tflops(flops: float, seconds: float) -> float:
    """Throughput in TFLOP/s (or TOPS for integer work)."""
    return flops / seconds / 1e12


def gemm_flops(m: int, n: int, k: int) -> int:
    """Floating-point operations of an (m x k) @ (k x n) product: 2mnk."""
    return 2 * m * n * k


def ratios(timings: dict[str, Timing], baseline: str) -> dict[str, float]:
    """Speed of each timing relative to `baseline` (>1 means faster), all from the same run."""
    if baseline not in timings:
        raise InputError(f"baseline {baseline!r} is not among the timings ({', '.join(timings) or 'none'}). "
                         "Pass one of their names as baseline.")
    base = timings[baseline].median_s
    return {k: base / t.median_s for k, t in timings.items()}
