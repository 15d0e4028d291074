"""The roofline: attainable throughput = min(peak, intensity × bandwidth), with measured points.

Arithmetic intensity is FLOPs per byte of DRAM traffic (the minimum traffic: each input read
once, each output written once). Left of the ridge point a kernel is memory-bound, right of it
compute-bound. The roof here uses the device's *measured* bandwidth and GEMM peak.

Serves: core — used by chapters 1, 2, 9, 11, 12 and labs 01, 09, 11.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from helpers import bench
from helpers.errors import InputError
from helpers.validation import require_choice

if TYPE_CHECKING:
    from helpers.perf import gemm


def _positive(**values: float) -> None:
    """Raise InputError unless every value is a positive finite number."""
    for name, v in values.items():
        if not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v) or v <= 0:
            raise InputError(f"{name} must be a positive number, got {v!r}.")


@dataclass(frozen=True)
class RoofPoint:
    """One measured kernel: its work, its minimum DRAM traffic and its time."""

    name: str
    kind: str  # "elementwise", "gemm", "conv", ...
    flops: float
    bytes: float
    seconds: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte."""
        return self.flops / self.bytes

    @property
    def tflops(self) -> float:
        """Achieved TFLOP/s."""
        return self.flops / self.seconds / 1e12


def intensity(flops: float, bytes_moved: float) -> float:
    """Arithmetic intensity: FLOPs per byte moved."""
    _positive(flops=flops, bytes_moved=bytes_moved)
    return flops / bytes_moved


def ridge_point(peak_tflops: float, bandwidth_gbs: float) -> float:
    """The intensity (FLOP/byte) where the memory roof meets the compute roof."""
    _positive(peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs)
    return peak_tflops * 1e3 / bandwidth_gbs


def attainable_tflops(ai: float, peak_tflops: float, bandwidth_gbs: float) -> float:
    """Roofline bound at intensity `ai`: min(peak, ai × bandwidth), in TFLOP/s."""
    _positive(ai=ai, peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs)
    return min(peak_tflops, ai * bandwidth_gbs / 1e3)


def classify(ai: float, peak_tflops: float, bandwidth_gbs: float) -> str:
    """'memory' when `ai` lies left of the ridge point, else 'compute'."""
    return "memory" if ai < ridge_point(peak_tflops, bandwidth_gbs) else "compute"


def gemm_cost(m: int, n: int, k: int, bytes_per_element: float) -> tuple[float, float]:
    """(FLOPs, minimum bytes) of C[m,n] = A[m,k] @ B[k,n]: 2mnk and (mk + kn + mn) elements."""
    _positive(m=m, n=n, k=k, bytes_per_element=bytes_per_element)
    return 2.0 * m * n * k, float(bytes_per_element) * (m * k + k * n + m * n)


def conv_cost(batch: int, cin: int, cout: int, h: int, w: int, kernel: int, stride: int = 1,
              bytes_per_element: float = 4) -> tuple[float, float]:
    """(FLOPs, minimum bytes) of a 'same'-padded 2-D convolution."""
    _positive(batch=batch, cin=cin, cout=cout, h=h, w=w, kernel=kernel, stride=stride)
    ho, wo = -(-h // stride), -(-w // stride)
    flops = 2.0 * batch * cout * ho * wo * cin * kernel * kernel
    elems = batch * cin * h * w + cout * cin * kernel * kernel + batch * cout * ho * wo
    return flops, float(bytes_per_element) * elems


# name: (FLOPs per element, arrays read + written)
ELEMENTWISE = {"add (a+b)": (1, 3), "axpy (a*x+y)": (2, 3), "relu": (1, 2)}


def elementwise_cost(op: str, n: int, bytes_per_element: float = 4) -> tuple[float, float]:
    """(FLOPs, bytes) of one of the ELEMENTWISE ops on n elements."""
    require_choice(op, tuple(ELEMENTWISE), "op")
    f, arrays = ELEMENTWISE[op]
    return float(f * n), float(arrays * n * bytes_per_element)


def cpu_cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _cpu_copy(dst: np.ndarray, src: np.ndarray, pool: ThreadPoolExecutor | None, parts: int) -> None:
    """Copy src into dst, split into `parts` chunks copied in parallel (numpy releases the GIL)."""
    if pool is None:
        np.copyto(dst, src)
        return
    bounds = np.linspace(0, src.size, parts + 1).astype(int)
    list(pool.map(lambda i: np.copyto(dst[bounds[i]:bounds[i + 1]], src[bounds[i]:bounds[i + 1]]), range(parts)))


def measure_bandwidth_gbs(device: str = "cpu", nbytes: int = 1 << 28, repeats: int = 10,
                          threads: int | None = None) -> float:
    """Copy bandwidth (bytes read + written per second, GB/s) of `device` ('cpu' numpy, 'cuda' torch).

    On the CPU the copy is split over `threads` threads (default: every core this process may use):
    one core cannot keep a server's memory channels busy, so a one-thread copy measures the core,
    not the memory.
    """
    require_choice(device, ("cpu", "cuda"), "device")
    if device == "cpu":
        n = cpu_cores() if threads is None else threads
        if n < 1:
            raise InputError(f"threads must be at least 1, got {threads}.")
        src = np.ones(nbytes // 4, dtype=np.float32)
        dst = np.empty_like(src)
        with ThreadPoolExecutor(n) if n > 1 else contextlib.nullcontext() as pool:
            t = bench.timeit(lambda: _cpu_copy(dst, src, pool, n), backend="cpu", warmup=2, repeats=repeats)
    else:
        import torch

        gsrc = torch.ones(nbytes // 4, device="cuda")
        gdst = torch.empty_like(gsrc)
        t = bench.timeit(lambda: gdst.copy_(gsrc), backend="torch", warmup=3, repeats=repeats)
    return bench.bandwidth_gbs(2 * nbytes, t.median_s)


def _cpu_amax(src: np.ndarray, pool: ThreadPoolExecutor | None, parts: int) -> float:
    """The largest element of src, split into `parts` chunks reduced in parallel (numpy's reductions release the
    GIL; a max streams at twice the rate of numpy's pairwise sum, which is bound by its additions on one core)."""
    if pool is None:
        return float(np.max(src))
    bounds = np.linspace(0, src.size, parts + 1).astype(int)
    return float(max(pool.map(lambda i: np.max(src[bounds[i]:bounds[i + 1]]), range(parts))))


def measure_read_gbs(device: str = "cpu", nbytes: int = 1 << 28, repeats: int = 10,
                     threads: int | None = None) -> dict[str, float]:
    """Read-only stream bandwidth (bytes read per second, GB/s) of `device`: {kernel: GB/s} of reductions that read
    `nbytes` and write one number ('amax', and on a GPU also 'sum'). The fastest of them is the memory roof's
    independent measure: no roofline point is one of these kernels. The CPU splits its amax over `threads` threads
    (default: every core this process may use)."""
    require_choice(device, ("cpu", "cuda"), "device")
    out = {}
    if device == "cpu":
        n = cpu_cores() if threads is None else threads
        if n < 1:
            raise InputError(f"threads must be at least 1, got {threads}.")
        src = np.ones(nbytes // 4, dtype=np.float32)
        with ThreadPoolExecutor(n) if n > 1 else contextlib.nullcontext() as pool:
            t = bench.timeit(lambda: _cpu_amax(src, pool, n), backend="cpu", warmup=2, repeats=repeats)
        out["amax"] = bench.bandwidth_gbs(nbytes, t.median_s)
        return out
    import torch

    x = torch.ones(nbytes // 4, device="cuda")
    for name, fn in {"sum": lambda: torch.sum(x), "amax": lambda: torch.amax(x)}.items():
        t = bench.timeit(fn, backend="torch", warmup=3, repeats=repeats)
        out[name] = bench.bandwidth_gbs(nbytes, t.median_s)
    return out


def _cpu_points(repeats: int) -> list[RoofPoint]:
    """Elementwise ops (numpy), GEMMs of growing size (torch, FP32) and a convolution (torch) on the CPU."""
    import torch

    from helpers.perf import gemm

    pts = []
    n = 1 << 25  # 128 MB arrays: far beyond any CPU cache
    a, b, out = (np.ones(n, np.float32) for _ in range(3))
    ops = {"add (a+b)": lambda: np.add(a, b, out=out),
           "axpy (a*x+y)": lambda: np.add(np.multiply(a, np.float32(2), out=out), b, out=out),
           "relu": lambda: np.maximum(a, 0, out=out)}
    for op, fn in ops.items():
        t = bench.timeit(fn, backend="cpu", warmup=1, repeats=repeats)
        pts.append(RoofPoint(op, "elementwise", *elementwise_cost(op, n), t.median_s))
    for size in (32, 128, 512, 1024):  # torch's FP32 GEMM: the kernel chapter 2 times for the CPU's compute roof
        fn = gemm.gemm_fn("fp32", size, size, size, "cpu")
        t = bench.timeit(fn, backend="cpu", warmup=1, repeats=repeats)
        pts.append(RoofPoint(f"GEMM {size}³", "gemm", *gemm_cost(size, size, size, 4), t.median_s))
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False).eval()
    img = torch.randn(4, 64, 56, 56)
    with torch.inference_mode():
        t = bench.timeit(lambda: conv(img), backend="cpu", warmup=1, repeats=max(3, repeats // 2))
    pts.append(RoofPoint("conv 3×3 64→64 56²", "conv", *conv_cost(4, 64, 64, 56, 56, 3), t.median_s))
    return pts


def _gpu_points(repeats: int) -> list[RoofPoint]:
    """Elementwise ops (FP32, 1 GiB arrays), BF16 GEMMs of growing size and a BF16 convolution."""
    import torch

    pts = []
    n = 1 << 28
    a, b, out = (torch.ones(n, device="cuda") for _ in range(3))
    ops = {"add (a+b)": lambda: torch.add(a, b, out=out),
           "axpy (a*x+y)": lambda: torch.add(b, a, alpha=2.0, out=out),
           "relu": lambda: torch.clamp(a, min=0, out=out)}
    for op, fn in ops.items():
        t = bench.timeit(fn, backend="torch", repeats=repeats)
        pts.append(RoofPoint(op, "elementwise", *elementwise_cost(op, n), t.median_s))
    del a, b, out
    for size in (256, 512, 1024, 2048, 4096, 8192):
        x = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        y = torch.randn(size, size, device="cuda", dtype=torch.bfloat16)
        t = bench.timeit(lambda: x @ y, backend="torch", repeats=repeats)
        pts.append(RoofPoint(f"GEMM {size}³ bf16", "gemm", *gemm_cost(size, size, size, 2), t.median_s))
    conv = torch.nn.Conv2d(256, 256, 3, padding=1, bias=False).to("cuda", torch.bfloat16)
    conv = conv.to(memory_format=torch.channels_last).eval()  # type: ignore[call-overload]
    img = torch.randn(64, 256, 56, 56, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    with torch.inference_mode():
        t = bench.timeit(lambda: conv(img), backend="torch", repeats=repeats)
    pts.append(RoofPoint("conv 3×3 256→256 56² b64 bf16", "conv", *conv_cost(64, 256, 256, 56, 56, 3, 1, 2),
                         t.median_s))
    return pts


def measure_points(device: str = "cpu", repeats: int = 10) -> list[RoofPoint]:
    """Measured roofline points on `device` ('cpu' or 'cuda')."""
    require_choice(device, ("cpu", "cuda"), "device")
    if device == "cuda":
        from helpers.device import require_gpu

        require_gpu("The GPU roofline")
        return _gpu_points(repeats)
    return _cpu_points(repeats)


def points_from_records(records: list[bench.Record]) -> list[RoofPoint]:
    """Rebuild points (1-second, unit-FLOP scale) from records named '<prefix>.<kind>.<index>' with their intensity
    (chapter 2's roofline table)."""
    out = []
    for r in records:
        ai = r.extra.get("intensity")
        if ai:
            out.append(RoofPoint(r.extra.get("label", r.name), r.name.split(".")[-2], r.value * 1e12,
                                 r.value * 1e12 / ai, 1.0))
    return out


def plot(points: list[RoofPoint], peak_tflops: float, bandwidth_gbs: float, *, title: str,
         device: str | None = None, note: str = "", spec_tflops: float | None = None):
    """Log-log roofline with the measured roof and the measured points, coloured by kind."""
    from helpers import plots

    _positive(peak_tflops=peak_tflops, bandwidth_gbs=bandwidth_gbs)
    w, h = plots.plt.rcParams["figure.figsize"]
    fig, ax = plots.plt.subplots(figsize=(w * 1.4, h))  # room for the legend beside the axes
    ais = [p.intensity for p in points] or [1.0]
    ridge = ridge_point(peak_tflops, bandwidth_gbs)
    xs = np.logspace(np.log10(min(min(ais), ridge) / 4), np.log10(max(max(ais), ridge) * 4), 200)
    ax.plot(xs, [attainable_tflops(x, peak_tflops, bandwidth_gbs) for x in xs], color="0.2", lw=2,
            label=f"roof: {bandwidth_gbs:,.0f} GB/s, {peak_tflops:.3g} TFLOP/s (measured)")
    if spec_tflops:
        ax.axhline(spec_tflops, ls=":", color="0.4", lw=1, label=f"dense spec {spec_tflops:g}")
    ax.axvline(ridge, ls="--", color="0.6", lw=1)
    kinds = sorted({p.kind for p in points})
    for i, kind in enumerate(kinds):
        sel = [p for p in points if p.kind == kind]
        ax.scatter([p.intensity for p in sel], [p.tflops for p in sel], color=plots.PALETTE[i + 1],
                   marker=plots.MARKERS[i], label=kind, zorder=3)
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)",
           ylabel="throughput (TFLOP/s)", title=title)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: points fill every corner
    plots.label_device(ax, device, note)
    fig.tight_layout()
    plots.save_figure(fig, title)
    return fig


POINTS_PRECISION = {"cuda": "bf16", "cpu": "fp32"}  # the precision of the GEMM points measure_points draws


@dataclass(frozen=True)
class Roof:
    """A roof measured apart from the points drawn under it: a compute ceiling (TFLOP/s) and a memory ceiling (GB/s),
    each with what it was measured by. Taken from the points themselves, "no point above its roof" could not fail."""

    peak_tflops: float
    bandwidth_gbs: float
    peak_from: str
    bandwidth_from: str

    def __post_init__(self) -> None:
        _positive(peak_tflops=self.peak_tflops, bandwidth_gbs=self.bandwidth_gbs)

    def above(self, points: Sequence[RoofPoint]) -> list[tuple[RoofPoint, float]]:
        """(point, how far above its roof: 0.02 = 2 %) of every point that lies above this roof."""
        out = []
        for p in points:
            over = p.tflops / attainable_tflops(p.intensity, self.peak_tflops, self.bandwidth_gbs) - 1
            if over > 0:
                out.append((p, over))
        return out


def memory_roof(copy_gbs: float, reads: dict[str, float] | None = None) -> tuple[float, str]:
    """(GB/s, what set it): the fastest stream measured apart from the points, the read-only reductions'
    (``measure_read_gbs``) or the copy's (``measure_bandwidth_gbs``), whichever streamed faster."""
    if not isinstance(copy_gbs, (int, float)) or not math.isfinite(copy_gbs) or copy_gbs <= 0:
        raise InputError(f"copy_gbs must be a positive number of GB/s, got {copy_gbs!r}.")
    name, best = max((reads or {}).items(), key=lambda kv: kv[1], default=("", 0.0))
    if best > copy_gbs:
        return float(best), f"the fastest read-only stream, {name}"
    return float(copy_gbs), "the copy"


PEAK_SIZES = {"cuda": (4096, 8192), "cpu": (512, 1024)}  # the largest square GEMMs chapter 2 times per device


def fastest_gemm(device: str = "cpu", repeats: int = 5) -> "gemm.GemmResult":
    """The compute ceiling's measurement, apart from ``measure_points``: the fastest of the largest square GEMMs in the
    points' precision (BF16 on a GPU, FP32 through torch on a CPU)."""
    from helpers.perf import gemm

    require_choice(device, ("cpu", "cuda"), "device")
    return max(gemm.sweep((POINTS_PRECISION[device],), PEAK_SIZES[device], device=device, repeats=repeats),
               key=lambda r: r.tflops)


def measure_roof(device: str = "cpu", repeats: int = 5) -> Roof:
    """This machine's roof, measured apart from ``measure_points``: the compute ceiling from ``fastest_gemm``, the
    memory ceiling from ``memory_roof`` of a large copy and the read-only reductions."""
    best = fastest_gemm(device, repeats)
    nbytes = 1 << 30 if device == "cuda" else 1 << 26
    bw, bw_from = memory_roof(measure_bandwidth_gbs(device, nbytes=nbytes, repeats=repeats),
                              measure_read_gbs(device, nbytes=nbytes, repeats=repeats))
    return Roof(best.tflops, bw, f"a {best.m}³ {best.precision.upper()} GEMM timed apart", bw_from)
