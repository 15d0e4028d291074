"""One way to time things and to record what was measured.

Timing: warm-up, synchronization, repeats; median and spread. GPU work is timed with
CUDA events on the stream it runs on (torch, cupy or numba), CPU work with perf_counter.
Records: every headline number a notebook measures goes through ``record()``, which
stamps it with the device, versions and date and, when ``WORKBOOK_RESULTS`` names a
file, appends it there as a JSON line (``helpers.tools.report`` collects those files).

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from helpers.errors import InputError

RESULTS_VAR = "WORKBOOK_RESULTS"
BACKENDS = ("auto", "cpu", "torch", "cupy", "numba")


@dataclass(frozen=True)
class Timing:
    """Seconds per call over repeated runs."""

    samples_s: tuple[float, ...]
    backend: str

    @property
    def median_s(self) -> float:
        """Median seconds per call."""
        return statistics.median(self.samples_s)

    @property
    def median_ms(self) -> float:
        """Median milliseconds per call."""
        return self.median_s * 1e3

    def percentile_s(self, q: float) -> float:
        """The q-th percentile (0..100) of the samples, nearest-rank."""
        s = sorted(self.samples_s)
        return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the relative spread of the samples."""
        return (self.percentile_s(90) - self.percentile_s(10)) / self.median_s

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
        raise InputError(f"timeit needs a function to call, got {type(fn).__name__}.")
    if warmup < 0 or repeats < 1 or inner < 1:
        raise InputError("timeit needs warmup >= 0, repeats >= 1 and inner >= 1.")
    backend = _resolve_backend(backend)
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


def timeit_interleaved(fns: dict[str, Callable[[], Any]], *, warmup: int = 2, repeats: int = 10) -> dict[str, Timing]:
    """CPU timings of several functions, one call of each per round, so a busy machine slows all alike."""
    if not fns or not all(callable(f) for f in fns.values()):
        raise InputError("timeit_interleaved needs a dict of name -> function to call.")
    if warmup < 0 or repeats < 1:
        raise InputError("timeit_interleaved needs warmup >= 0 and repeats >= 1.")
    for _ in range(warmup):
        for f in fns.values():
            f()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            samples[k].append(time.perf_counter() - t0)
    return {k: Timing(tuple(v), "cpu") for k, v in samples.items()}


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
        raise InputError(f"baseline {baseline!r} is not among the timings: {', '.join(timings)}.")
    base = timings[baseline].median_s
    return {k: base / t.median_s for k, t in timings.items()}


@dataclass
class Record:
    """One measured number, with where and when it was measured."""

    name: str
    value: float
    unit: str
    device: str
    date: str
    notebook: str | None = None
    ratio_of: list[str] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record as a plain dict (the reference-file format)."""
        d = asdict(self)
        return {k: v for k, v in d.items() if v not in (None, {}, [])}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Record":
        """Read a record back, keeping unknown fields in `extra`."""
        known = {f for f in cls.__dataclass_fields__}
        base = {k: v for k, v in d.items() if k in known}
        extra = {**base.pop("extra", {}), **{k: v for k, v in d.items() if k not in known}}
        base.setdefault("device", "unknown")
        base.setdefault("date", "unknown")
        return cls(**base, extra=extra)


_session: dict[str, Any] = {"notebook": None, "records": []}


def set_notebook(name: str | None) -> None:
    """Name the notebook that later records belong to."""
    _session["notebook"] = name


def session_records() -> list[Record]:
    """Every record made in this Python session, oldest first."""
    return list(_session["records"])


def record(
    name: str,
    value: float,
    unit: str,
    *,
    ratio_of: Iterable[str] | None = None,
    **extra: Any,
) -> Record:
    """Record one measurement: keep it for this session and append it to $WORKBOOK_RESULTS if set."""
    from helpers.device import device_label, versions

    if not isinstance(name, str) or not name:
        raise InputError("record() needs a non-empty measurement name such as 'copy.cupy_over_d2d'.")
    value = float(value)
    rec = Record(
        name=name, value=value, unit=unit, device=device_label(),
        date=_dt.date.today().isoformat(), notebook=_session["notebook"],
        ratio_of=list(ratio_of) if ratio_of else None, versions=versions(), extra=extra,
    )
    _session["records"].append(rec)
    path = os.environ.get(RESULTS_VAR)
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec.to_json()) + "\n")
    return rec


def record_relative(results: dict[str, float], value_prefix: str, unit: str, ratio_prefix: str,
                    baseline: str) -> dict[str, float]:
    """Record each ``<backend>_<variant>`` value and its ratio to the same backend's `baseline`; return the ratios."""
    rel = {}
    for k, v in results.items():
        record(f"{value_prefix}.{k}", v, unit)
        rel[k] = v / results[f"{k.split('_')[0]}_{baseline}"]
        record(f"{ratio_prefix}.{k}", rel[k], "ratio")
    return rel


def save_records(records: Iterable[Record], path: str | os.PathLike) -> None:
    """Write records as a JSON list (the format of reference/*/results.json)."""
    data = [r.to_json() for r in records]
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def load_records(path: str | os.PathLike) -> list[Record]:
    """Read records from a JSON list or a JSON-lines file."""
    text = Path(path).read_text(encoding="utf-8").strip()
    if not text:
        return []
    if text.startswith("["):
        return [Record.from_json(d) for d in json.loads(text)]
    return [Record.from_json(json.loads(line)) for line in text.splitlines() if line.strip()]
