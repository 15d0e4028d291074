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
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from helpers.errors import InputError, NoGPUError, require_package
from helpers.validation import require_choice, require_int_range, require_real

RESULTS_VAR = "WORKBOOK_RESULTS"
BACKENDS = ("auto", "cpu", "torch", "cupy", "numba")


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
        return statistics.median(self.samples_s)

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


def timeit_interleaved(fns: dict[str, Callable[[], Any]], *, warmup: int = 2, repeats: int = 10) -> dict[str, Timing]:
    """CPU timings of several functions, one call of each per round, so a busy machine slows all alike."""
    if not isinstance(fns, dict) or not fns or not all(callable(f) for f in fns.values()):
        raise InputError("timeit_interleaved needs a dict of name -> function to call, e.g. {'a': lambda: f(x)}.")
    _check_counts(warmup=warmup, repeats=repeats)
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


def timed_rounds(timers: Mapping[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Call every timer (each returns seconds per call of what it times) once per round, in turn, so that a slow
    moment of the machine (clock, temperature, a neighbour) slows them all alike; one value per round for each."""
    from helpers.validation import require_int_range

    require_int_range(rounds, 2, 1000, "rounds (at least 2 give a spread)")
    out: dict[str, list[float]] = {k: [] for k in timers}
    for _ in range(rounds):
        for k, timer in timers.items():
            out[k].append(float(timer()))
    return out


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


def _json_safe(value: Any) -> Any:
    """`value` with every NaN or inf float (inside dicts and lists too) replaced by None, which JSON can store."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


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
        """The record as a plain dict (the reference-file format); a NaN/inf among the extras becomes null."""
        d = asdict(self)
        d["extra"] = _json_safe(d["extra"])
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
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise InputError(f"record({name!r}, ...) needs a number, got {type(value).__name__} {value!r}. "
                         "Pass the measured value, e.g. float(t.median_s).") from None
    if not math.isfinite(value):
        raise InputError(f"record({name!r}, {value}) is not a finite number, and JSON cannot store it; nothing "
                         "was recorded. Find where the NaN/inf comes from (a zero time? an empty timing?).")
    if not isinstance(unit, str):
        raise InputError(f"record({name!r}, ...) needs the unit as text, e.g. 'ratio', 'ms' or 'GB/s'.")
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
            f.write(json.dumps(rec.to_json(), allow_nan=False) + "\n")
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
    try:
        text = json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n"
    except ValueError:
        bad = [d["name"] for d in data if not math.isfinite(d.get("value", 0.0))]
        raise InputError(f"records {bad[:3]} hold NaN or inf, which JSON cannot store; nothing was written to "
                         f"{path}. Drop or re-measure them.") from None
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text, encoding="utf-8")


def _parse(text: str, where: str) -> Any:
    """json.loads, or an InputError naming the file and line."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InputError(f"{where} is not valid JSON ({exc.msg}); the file is cut off or was edited. Write it "
                         "again (re-run what records it), or delete the broken line.") from None


def _record(d: Any, where: str) -> Record:
    """A Record from a parsed JSON object, or an InputError naming where it came from."""
    if not isinstance(d, dict) or not {"name", "value", "unit"} <= d.keys():
        raise InputError(f"{where} is not a record (it needs name, value and unit). Write it with "
                         "helpers.bench.record or save_records.")
    return Record.from_json(d)


def load_records(path: str | os.PathLike) -> list[Record]:
    """Read records from a JSON list or a JSON-lines file (InputError naming the line that is broken)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p} {'is a folder' if p.is_dir() else 'does not exist'}: pass a records file "
                         "(results.json or a .jsonl written by helpers.bench.record).")
    try:
        text = p.read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise InputError(f"{p} is not a text file of records. Pass results.json or a .jsonl of records.") from None
    if not text:
        return []
    if text.startswith("["):
        data = _parse(text, str(p))
        return [_record(d, f"{p}, item {i + 1}") for i, d in enumerate(data)]
    return [_record(_parse(line, f"{p}, line {i + 1}"), f"{p}, line {i + 1}")
            for i, line in enumerate(text.splitlines()) if line.strip()]
