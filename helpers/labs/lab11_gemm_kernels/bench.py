"""Time lab 11's GEMM steps on a GPU: naive → tiled → INT8 (your kernels), beside dp4a.cu and cuBLAS.

Every kernel is first checked against an exact answer on the GPU (integer-valued float32 inputs make
FP32 sums exact; INT8 is compared bit for bit after requantization), then timed with CUDA events (the median of repeated runs, recorded with its p10..p90 spread).
Your tiled kernels are compiled once per tile size through ``helpers.kernels.pytwin``.

The roofline has one roof per math precision (``show_roofline``): the FP32 steps under the measured
cuBLAS FP32 roof, the INT8 steps under the measured ``torch._int_mm`` roof, each checked by
``helpers.figure_check.roof_problems`` before it is drawn (an INT8 point under an FP32 roof is wrong).

Serves: core — used by lab 11 (the GPU part of the lab).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers import bench, spread
from helpers.kernels import gemm, pytwin
from helpers.spread import Spread

N = 4096
TILES = (16, 32)


@dataclass(frozen=True)
class Step:
    """One timed GEMM: its record key, label, precision, operation count, bytes, median seconds and, when timed
    here, the p10..p90 spread of its seconds."""

    key: str
    label: str
    precision: str  # "fp32" or "int8"
    ops: float
    bytes: float
    seconds: float
    spread_s: Spread | None = None

    def tops_spread(self) -> Spread | None:
        """The p10..p90 spread of its TFLOP/s or TOPS (None when it was stored without one)."""
        s = self.spread_s
        return None if s is None else Spread(self.ops / s.hi / 1e12, self.ops / s.lo / 1e12, s.method)

    @property
    def tops(self) -> float:
        """TFLOP/s (FP32) or TOPS (INT8)."""
        return self.ops / self.seconds / 1e12


@contextlib.contextmanager
def _true_fp32() -> Iterator[None]:
    """torch.matmul in real FP32 (no TF32) for the duration."""
    import torch

    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def _timed(key: str, label: str, precision: str, n: int, launch: Callable[[], Any], check: Callable[[], bool],
           backend: str, repeats: int, bar: Any, out_width: int | None = None) -> Step:
    """Run once, require the exact answer, then time `launch` (out_width: bytes of an output element)."""
    launch()
    bench.synchronize(backend)
    if not check():
        raise AssertionError(f"{label} gave a wrong answer on the GPU; fix it (the simulator check passes "
                             "only the small cases) before timing it.")
    t = bench.timeit(launch, backend=backend, warmup=2, repeats=repeats)
    width = 4 if precision == "fp32" else 1
    moved = n * n * (2.0 * width + (out_width or width))  # the minimum traffic: A and B read, C written once
    bar.update(1)
    return Step(key, label, precision, float(bench.gemm_flops(n, n, n)), moved, t.median_s, spread.of_timing(t))


def _tiles(steps: list[Step], make: Callable[[int], Step], tiles: tuple[int, ...], bar: Any) -> None:
    """Append make(tile) for each tile size; a tile this GPU cannot launch (too many registers) is skipped."""
    from numba.cuda.cudadrv.driver import CudaAPIError

    for tile in tiles:
        try:
            steps.append(make(tile))
        except CudaAPIError as err:
            bar.update(1)
            print(f"TILE = {tile} skipped: the launch failed on this GPU ({err}).")


def _fp32_steps(naive: Any, tiled: Any, n: int, tiles: tuple[int, ...], repeats: int, bar: Any) -> list[Step]:
    """Your naive and tiled kernels and torch.matmul, FP32, n³."""
    import torch
    from numba import cuda

    gen = torch.Generator(device="cuda").manual_seed(0)
    ta, tb = (torch.randint(-4, 5, (n, n), device="cuda", generator=gen).float() for _ in range(2))
    da, db = cuda.as_cuda_array(ta), cuda.as_cuda_array(tb)
    out = torch.empty((n, n), device="cuda")
    dc = cuda.as_cuda_array(out)
    with _true_fp32():
        want = ta @ tb  # exact: every partial sum is an integer below 2**24
        same = lambda: bool(torch.equal(out, want))  # noqa: E731
        blocks, threads = gemm.naive_grid(n, n)
        steps = [_timed("naive", "your naive kernel", "fp32", n, lambda: naive[blocks, threads](da, db, dc),
                        same, "numba", repeats, bar)]

        def tiled_step(tile: int) -> Step:
            kern = pytwin.gpu_kernel(tiled, TILE=tile)
            grid, threads = gemm.tiled_grid(n, n, tile)
            return _timed(f"tiled{tile}", f"your tiled kernel, TILE = {tile}", "fp32", n,
                          lambda: kern[grid, threads](da, db, dc), same, "numba", repeats, bar)

        _tiles(steps, tiled_step, tiles, bar)
        steps.append(_timed("torch_fp32", "torch.matmul FP32 (cuBLAS, no TF32)", "fp32", n,
                            lambda: torch.matmul(ta, tb, out=out), same, "torch", repeats, bar))
    return steps


def _int8_steps(int8: Any, n: int, tiles: tuple[int, ...], repeats: int, bar: Any) -> list[Step]:
    """Your INT8 kernel, dp4a.cu through cupy and torch._int_mm, n³, all checked against one answer."""
    import torch
    from numba import cuda

    from helpers.quant import intgemm

    a, b, m0, shift, _ = gemm.int8_problem(np.random.default_rng(1), n, n, n, 0)
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    tb_cm = intgemm.column_major(tb)
    acc = torch._int_mm(ta, tb_cm)
    want = intgemm.requantize_fixed(acc.cpu().numpy(), m0, shift, 0, axis=1)
    a4, b4 = cuda.to_device(gemm.pack_rows(a)), cuda.to_device(gemm.pack_cols(b))
    m0d, sd, out = cuda.to_device(m0), cuda.to_device(shift), cuda.device_array((n, n), np.int8)
    same = lambda: bool(np.array_equal(out.copy_to_host(), want))  # noqa: E731
    steps: list[Step] = []

    def int8_step(tile: int) -> Step:
        kern = pytwin.gpu_kernel(int8, TILE=tile)
        grid, threads = gemm.tiled_grid(n, n, tile)
        return _timed(f"int8_t{tile}", f"your INT8 kernel, TILE = {tile}", "int8", n,
                      lambda: kern[grid, threads](a4, b4, out, m0d, sd, 0), same, "numba", repeats, bar)

    _tiles(steps, int8_step, tiles, bar)
    steps.append(_dp4a_cu(ta, tb, acc, n, repeats, bar))
    steps.append(_timed("int_mm", "torch._int_mm (Tensor Cores, int32 out)", "int8", n,
                        lambda: torch._int_mm(ta, tb_cm), lambda: True, "torch", repeats, bar, 4))
    return steps


def _dp4a_cu(ta: Any, tb: Any, acc: Any, n: int, repeats: int, bar: Any) -> Step:
    """The course's CUDA C kernel with the __dp4a instruction (int32 out), checked against torch._int_mm."""
    import cupy
    import torch

    from helpers.quant import intgemm

    a4, bt4 = intgemm.pack_for_dp4a(cupy.asarray(ta), cupy.asarray(tb))
    out = cupy.empty((n, n), dtype=cupy.int32)
    return _timed("dp4a_cu", "dp4a.cu: CUDA C with __dp4a (int32 out)", "int8", n,
                  lambda: intgemm.dp4a_gemm_packed(a4, bt4, out),
                  lambda: bool(torch.equal(torch.as_tensor(out, device="cuda"), acc)), "cupy", repeats, bar, 4)


def measure(naive: Any, tiled: Any, int8: Any, n: int = N, tiles: tuple[int, ...] = TILES,
            repeats: int = 10) -> list[Step]:
    """Every step at n³ on this GPU, each checked exact before it is timed (a progress bar counts them)."""
    from tqdm.auto import tqdm

    from helpers.device import require_gpu

    require_gpu("Timing the lab 11 kernels")
    with tqdm(total=2 * len(tiles) + 4, desc=f"checking and timing {n}³ GEMMs", unit="kernel") as bar:
        return _fp32_steps(naive, tiled, n, tiles, repeats, bar) + _int8_steps(int8, n, tiles, repeats, bar)


def best(steps: list[Step], prefix: str) -> Step:
    """The fastest step whose key starts with `prefix`."""
    return max((s for s in steps if s.key.startswith(prefix)), key=lambda s: s.tops)


SPEEDUPS = {  # record name: (faster step prefix, slower step prefix)
    "lab11.tiled_over_naive": ("tiled", "naive"),
    "lab11.int8_over_tiled": ("int8_t", "tiled"),
    "lab11.dp4a_cu_over_int8": ("dp4a_cu", "int8_t"),
    "lab11.torch_fp32_over_tiled": ("torch_fp32", "tiled"),
    "lab11.int_mm_over_dp4a_cu": ("int_mm", "dp4a_cu"),
}


def record(steps: list[Step], n: int = N) -> dict[str, float]:
    """Record each step's throughput and the speed-up of every step (same run); return the speed-ups."""
    for s in steps:
        noise = s.tops_spread()
        bench.record(f"lab11.{s.key}_tops", s.tops, "TFLOP/s" if s.precision == "fp32" else "TOPS",
                     label=s.label, ops=s.ops, bytes=s.bytes, n=n, **(noise.extra() if noise else {}))
    out = {}
    for name, (fast, slow) in SPEEDUPS.items():
        f, s = best(steps, fast), best(steps, slow)
        out[name] = f.tops / s.tops
        fs, ss = f.tops_spread(), s.tops_spread()
        noise = spread.ratio(fs, ss) if fs and ss else None
        bench.record(name, out[name], "ratio", ratio_of=[f.label, s.label], **(noise.extra() if noise else {}))
    return out


ROOF_STEPS = {"fp32": "torch_fp32", "int8": "int_mm"}  # the library GEMM that sets each precision's roof


def steps_from_records(records: Iterable[Any]) -> list[Step]:
    """Steps rebuilt from stored ``lab11.<key>_tops`` records (their extras hold ops and bytes)."""
    out = []
    for r in records:
        if r.name.endswith("_tops") and r.extra.get("ops") and r.extra.get("bytes"):
            key = r.name[len("lab11."):-len("_tops")]
            ops, tops = float(r.extra["ops"]), spread.of_extra(r.extra)
            secs = None if tops is None else Spread(ops / tops.hi / 1e12, ops / tops.lo / 1e12, tops.method)
            out.append(Step(key, r.extra.get("label", key), "int8" if r.unit == "TOPS" else "fp32",
                            ops, float(r.extra["bytes"]), ops / (r.value * 1e12), secs))
    return out


def show_roofline(steps: list[Step], bandwidth_gbs: float, device: str | None, note: str,
                  kind: Callable[[str], str]) -> list[Any]:
    """One roofline per precision, each under its own measured roof; a point above its roof is printed as a
    problem (and fails the figure check of ``make notebooks``)."""
    from helpers import figure_check
    from helpers.perf import gemm as perf_gemm
    from helpers.perf import roofline

    figs = []
    for prec, roof_key in ROOF_STEPS.items():
        sel = [s for s in steps if s.precision == prec]
        roof = next((s for s in sel if s.key == roof_key), None)
        if not sel or roof is None:
            continue
        problems = figure_check.roof_problems([(s.label, prec, s.ops / s.bytes, s.tops) for s in sel],
                                              {prec: (roof.tops, bandwidth_gbs)})
        for problem in problems:
            print(f"Roofline check: {problem}: its operation count or its bytes are miscounted.")
        unit = "TOPS" if prec == "int8" else "TFLOP/s"
        figs.append(roofline.plot(
            [roofline.RoofPoint(s.label, kind(s.key), s.ops, s.bytes, s.seconds) for s in sel], roof.tops,
            bandwidth_gbs, title=f"Lab 11: {prec.upper()} GEMMs under the {prec.upper()} roof ({unit})",
            device=device, note=note, spec_tflops=perf_gemm.spec_peak(prec, device)))
    return figs
