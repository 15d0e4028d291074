"""The measurements of chapter 3 (memory hierarchy): copy vs torch D2D, stride, misalignment,
transpose as a fraction of copy, and the read-only path, each one's GB/s with its p10..p90 over the timed
samples. ``experiments`` turns them into table rows and records; this module only measures.

Serves: chapter 3 (also chapter 4).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from helpers import bench
from helpers.kernels.cuda_source import bound_launch, cupy_module
from helpers.device import require_gpu

COPY_N = 1 << 27  # 512 MiB of float32 per buffer: ten times the H200's 50 MB L2
STRIDE_N = 1 << 25  # elements moved per strided copy (128 MiB at stride 1)
STRIDES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
OFFSETS = (0, 1, 2, 4, 8, 16, 32)
TRANSPOSE_N = 8192  # 256 MiB float32 matrix
STENCIL_RADIUS = 4
TIMING = {"warmup": 3, "repeats": 20, "inner": 5}


def _gbs(fn: Callable[[], Any], moved: float, backend: str, spreads: dict | None, key: Hashable) -> float:
    """Median GB/s of fn; its p10..p90 over the timed samples goes into spreads[key] when given."""
    from helpers.spread import of_timing

    t = bench.timeit(fn, backend=backend, **TIMING)
    if spreads is not None:
        spreads[key] = of_timing(t, lambda s: bench.bandwidth_gbs(moved, s))
    return bench.bandwidth_gbs(moved, t.median_s)


def copy_bandwidth(n: int = COPY_N, spreads: dict | None = None) -> dict[str, float]:
    """GB/s of torch's D2D copy and of every cupy and numba copy kernel, measured in one run
    (with `spreads`, a dict, each one's p10..p90 is put there too, by the same key)."""
    require_gpu("the copy benchmark")
    import torch

    from helpers.kernels import copy

    cp = cupy_module()
    moved = 2 * 4 * n
    a, b = torch.ones(n, device="cuda"), torch.empty(n, device="cuda")
    out = {"torch_d2d": _gbs(lambda: b.copy_(a), moved, "torch", spreads, "torch_d2d")}
    del a, b
    src, dst = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
    for v in copy.CUPY_VARIANTS:
        out[f"cupy_{v}"] = _gbs(copy.cupy_copy_fn(src, dst, v), moved, "cupy", spreads, f"cupy_{v}")
    for v in copy.NUMBA_VARIANTS:
        out[f"numba_{v}"] = _gbs(copy.numba_copy_fn(src, dst, v), moved, "numba", spreads, f"numba_{v}")
    assert bool((dst == 1).all()), "a copy kernel wrote wrong values"
    return out


STRIDE_TIMELINE = "ch03.timeline.stride"  # one launch of the coalesced and of the stride-32 copy, on a timeline
STRIDE_LABELS = {1: "coalesced copy (stride 1)", 32: "strided copy (stride 32)"}


def stride_bandwidth(strides: Sequence[int] = STRIDES, n: int = STRIDE_N,
                     spreads: dict | None = None, timelines: bool = False) -> dict[str, dict[int, float]]:
    """Useful GB/s (2 x 4 bytes per element moved) of the strided copy, cupy and numba, per stride (with
    `spreads`, a dict, each point's p10..p90 goes there under (backend, stride)). With `timelines`, one launch of
    the cupy copy at each stride of STRIDE_LABELS is then traced and stored (``STRIDE_TIMELINE``)."""
    require_gpu("the stride sweep")
    from helpers.kernels import copy

    cp = cupy_module()
    size = (n - 1) * max(strides) + 1
    src, dst = cp.ones(size, dtype=cp.float32), cp.zeros(size, dtype=cp.float32)
    ns, nd = copy.launch.as_numba(src), copy.launch.as_numba(dst)
    blocks = copy.launch.blocks_for(n, 256)
    out: dict[str, dict[int, float]] = {"cupy": {}, "numba": {}}
    traced = {}
    for s in strides:
        copy.cupy_strided(src, dst, n, s)  # validates the arguments once
        fn = bound_launch("copy", "copy_strided", (blocks,), (256,),
                          (src, dst, np.int64(n), np.int32(s)))
        out["cupy"][s] = _gbs(fn, 8 * n, "cupy", spreads, ("cupy", s))
        if s in STRIDE_LABELS:
            traced[STRIDE_LABELS[s]] = fn
        out["numba"][s] = _gbs(lambda s=s: copy.copy_strided[blocks, 256](ns, nd, n, s), 8 * n, "numba", spreads,
                               ("numba", s))
    if timelines:
        from helpers.perf import timeline

        timeline.record_named(traced, STRIDE_TIMELINE)
    return out


def offset_bandwidth(offsets: Sequence[int] = OFFSETS, n: int = COPY_N // 2,
                     spreads: dict | None = None) -> dict[str, dict[int, float]]:
    """GB/s of the offset (misaligned) copy, cupy and numba, per offset in elements (spreads as for strides)."""
    require_gpu("the misalignment sweep")
    from helpers.kernels import copy

    cp = cupy_module()
    src, dst = cp.ones(n + max(offsets), dtype=cp.float32), cp.zeros(n + max(offsets), dtype=cp.float32)
    ns, nd = copy.launch.as_numba(src), copy.launch.as_numba(dst)
    blocks = copy.launch.blocks_for(n, 256)
    out: dict[str, dict[int, float]] = {"cupy": {}, "numba": {}}
    for o in offsets:
        copy.cupy_offset(src, dst, n, o)  # validates the arguments once
        fn = bound_launch("copy", "copy_offset", (blocks,), (256,), (src, dst, np.int64(n), np.int32(o)))
        out["cupy"][o] = _gbs(fn, 8 * n, "cupy", spreads, ("cupy", o))
        out["numba"][o] = _gbs(lambda o=o: copy.copy_offset[blocks, 256](ns, nd, n, o), 8 * n, "numba", spreads,
                               ("numba", o))
    return out


def transpose_bandwidth(n: int = TRANSPOSE_N, spreads: dict | None = None) -> dict[str, float]:
    """GB/s of the tiled copy and the three transposes, cupy and numba, on an n x n float32 matrix (with
    `spreads`, each one's p10..p90 by the same key)."""
    require_gpu("the transpose benchmark")
    from helpers.kernels import transpose

    cp = cupy_module()
    src = cp.random.random((n, n), dtype=cp.float32)
    dst = cp.empty((n, n), dtype=cp.float32)
    ns, nd = transpose.launch.as_numba(src), transpose.launch.as_numba(dst)
    blocks, threads = transpose.grid(n, n)
    out = {}
    for v in transpose.VARIANTS:
        transpose.cupy_transpose(src, dst, v)  # validates the arguments once
        name = "copy_tiled" if v == "copy" else f"transpose_{v}"
        fn = bound_launch("transpose", name, blocks, threads, (src, dst, np.int32(n), np.int32(n)))
        out[f"cupy_{v}"] = _gbs(fn, 8 * n * n, "cupy", spreads, f"cupy_{v}")
        k = transpose.NUMBA_KERNELS[v][blocks, threads]
        out[f"numba_{v}"] = _gbs(lambda k=k: k(ns, nd), 8 * n * n, "numba", spreads, f"numba_{v}")
    assert bool((dst == src.T).all()), "the last transpose wrote wrong values"
    return out


def readonly_bandwidth(n: int = COPY_N // 2, radius: int = STENCIL_RADIUS,
                       spreads: dict | None = None) -> dict[str, float]:
    """Useful GB/s (one read + one write per element) of the stencil with plain, restrict and ldg loads, timed in
    interleaved rounds: their differences are a few per cent, less than one timing drifts from the next (with
    `spreads`, each one's p10..p90 over the rounds by the same key)."""
    require_gpu("the read-only path benchmark")
    from helpers.kernels import copy

    cp = cupy_module()
    src, dst = cp.ones(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)
    fns = {v: (lambda v=v: copy.cupy_stencil(src, dst, radius, v)) for v in ("plain", "restrict", "ldg")}
    r = bench.interleaved(fns, rounds=TIMING["repeats"], clock="cupy", warmup=TIMING["warmup"], inner=TIMING["inner"])
    out = {v: bench.bandwidth_gbs(8 * n, r.median_s(v)) for v in fns}
    if spreads is not None:
        spreads.update({v: r.spread(v, lambda s: bench.bandwidth_gbs(8 * n, s)) for v in fns})
    assert float(dst[n // 2]) == 2 * radius + 1, "the stencil wrote wrong values"
    return out


def kernel_checks(x: np.ndarray, a: np.ndarray) -> list[str]:
    """One line per copy and transpose kernel of the chapter: does it give the exact answer on `x` (copies) and `a`
    (transposes)? The numba kernels run in the CUDA simulator without a GPU, so a progress bar names each."""
    from tqdm.auto import tqdm

    from helpers.kernels import copy, transpose

    jobs = [(f"numba copy {v:<12}", lambda v=v: np.array_equal(copy.numba_copy(x, np.zeros_like(x), v), x))
            for v in copy.NUMBA_VARIANTS]
    jobs += [(f"numba transpose {v:<7}", lambda v=v: np.array_equal(
        transpose.numba_transpose(a, np.zeros(a.shape[::-1], a.dtype), v), a.T)) for v in ("naive", "padded")]
    lines = [f"{name} correct: {check()}" for name, check in tqdm(jobs, desc="checking the copy and transpose kernels",
                                                                   unit="kernel")]
    return lines + cupy_copy_checks(x)


def cupy_copy_checks(x: np.ndarray) -> list[str]:
    """One line per CUDA C (cupy) copy variant: does it copy `x` exactly? Without a GPU, one line saying so."""
    from helpers.device import has_gpu
    from helpers.kernels import copy

    if not has_gpu():
        return ["cupy copies (CUDA C): checked on a GPU only, and there is none here."]
    cp = cupy_module()
    xs = cp.asarray(x)
    return [f"cupy copy {v:<12} correct: {bool((copy.cupy_copy(xs, cp.zeros_like(xs), v) == xs).all())}"
            for v in copy.CUPY_VARIANTS]


def plot_stride_model(measured: dict[str, dict[int, float]], note: str = "", device: str | None = None) -> Any:
    """Measured bandwidth ÷ stride-1 bandwidth per stride, beside the 32-byte-sector model."""
    from helpers.perf import access_patterns
    from helpers import plots

    xs = sorted(set().union(*(c.keys() for c in measured.values())))
    ys = {label: [c[x] / c[1] if x in c and 1 in c else float("nan") for x in xs]
          for label, c in measured.items()}
    ys["sector model (useful ÷ moved bytes)"] = [r["useful"] for r in access_patterns.stride_rows(xs)]
    return plots.sweep(xs, ys, title="Strided copy: bandwidth relative to stride 1", xlabel="stride (floats)",
                       ylabel="fraction of stride-1 bandwidth (log scale)", logx=True, logy=True, device=device,
                       note=note)
