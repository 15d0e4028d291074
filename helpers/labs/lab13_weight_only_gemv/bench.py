"""Time lab 13's W4A16 GEMV on a GPU beside FP16 cuBLAS and the course's CUDA C kernels (chapter 12's naive
step and its fast kernel, ``helpers.kernels.wo_gemv``), at LLaMA-7B shapes, batch 1, groups of 128.

Your kernel is first checked exact on the GPU: integer activations and power-of-two scales make every sum exact
in float32, whatever the order of the additions. Each timed call reads its own copy of the weight (the copies
together are several times the L2 cache, as in a decoding step). A round times every kernel once, in a rotated
order: a sleep kernel is queued first, so that the launches queue up behind it and the CUDA events measure the
GPU's time for the back-to-back calls, not Python's launch gaps (a round whose launches did not all queue in
time is repeated). Medians over the rounds, their p10..p90 spread stored with each record. The shapes, the
course kernel's launch and the rule for the weight copies are chapter 12's (``gemv_bench``, ``timing``); the
timing is not: chapter 12 replays each kernel's calls as one CUDA graph, while here the calls are launched one
by one (your numba kernel runs on one fixed stream, outside any graph), so the gap between two launches counts in
each call and a few-microsecond kernel's time is not comparable one to one with chapter 12's table.

The instructors time the solution's kernel with ``python -m instructors.lab13_bench --out DIR``.

Serves: lab 13 (its GPU timing).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from helpers import bench, spread
from helpers.labs.lab13_weight_only_gemv.kit import KERNELS

SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008))  # (N out, K in): LLaMA-7B's projections
GROUP = 128
ROUNDS = 7
MAX_SLEEP_CYCLES = 2 * 10**9  # about a second of the sleep kernel
RATIOS = {  # record name: (faster kernel, slower kernel); value = slower's time / faster's time
    "lab13.yours_over_fp16": ("yours", "fp16"), "lab13.course_over_fp16": ("course", "fp16"),
    "lab13.yours_over_course_naive": ("yours", "course_naive"), "lab13.course_over_yours": ("course", "yours")}


@dataclass
class Result:
    """Seconds per call of every (kernel, shape) in every round, and the bytes each call reads for its weight."""

    shapes: tuple[tuple[int, int], ...]
    seconds: dict[tuple[str, tuple[int, int]], list[float]] = field(default_factory=dict)
    nbytes: dict[tuple[str, tuple[int, int]], int] = field(default_factory=dict)

    def median(self, kernel: str, shape: tuple[int, int]) -> float:
        """Median seconds per call."""
        return statistics.median(self.seconds[(kernel, shape)])


def _problem(n: int, k: int, seed: int) -> tuple[Any, Any, Any]:
    """(two's-complement W4Weight, FP16 x, exact float32 y) of power-of-two scales and integer activations."""
    import torch

    from helpers.quant import weight_only as wo

    gen = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randint(-8, 8, (n, k), device="cuda", generator=gen, dtype=torch.int8)
    scales = torch.exp2(torch.randint(-8, -3, (n, k // GROUP), device="cuda", generator=gen).float())
    x = torch.randint(-4, 5, (k,), device="cuda", generator=gen).half()
    w4 = wo.W4Weight(wo.pack_int4(q), scales, GROUP)
    y = ((q.double() * scales.double().repeat_interleave(GROUP, dim=1)) @ x.double()).float()
    return w4, x, y


def _calls(kernel: str, gemv: Any, w4: Any, x: Any, y: Any, stream: Any) -> tuple[int, list[Callable[[], Any]]]:
    """(weight bytes per call, one call per weight copy) of one kernel, checked first against the exact y."""
    import torch
    from numba import cuda

    from helpers.kernels import wo_gemv

    if kernel == "fp16":
        w = w4.dequantize().half()  # exact: small codes times powers of two
        ws = [w] + [w.clone() for _ in range(bench.l2_copies(w.numel() * 2) - 1)]
        x2 = x[None, :]
        return w.numel() * 2, [functools.partial(torch.nn.functional.linear, x2, d) for d in ws]
    if kernel in ("course", "course_naive"):
        layout, cfg = wo_gemv.step_config("naive") if kernel == "course_naive" else ("magic", None)
        pw = wo_gemv.prepare(w4, layout)
        cfg = cfg or wo_gemv.default_config(pw)
        out = torch.empty(pw.n, dtype=torch.float16, device="cuda")
        got = wo_gemv.gemv(x, pw, config=cfg, out=out).float()
        if not torch.allclose(got, y, rtol=1e-2, atol=1e-2 * float(y.abs().max())):
            raise AssertionError(f"{KERNELS[kernel]} gave a wrong answer on the GPU; the course's kernel is broken.")
        ws = [pw] + [pw.clone() for _ in range(bench.l2_copies(pw.nbytes) - 1)]
        return pw.nbytes, [functools.partial(wo_gemv.gemv, x, c, config=cfg, out=out) for c in ws]
    from helpers.labs.lab13_weight_only_gemv.kit import offset_binary

    packed, scales = offset_binary(w4.packed), w4.scale.float().contiguous()
    xf, yours = x.float(), torch.zeros(w4.packed.shape[0], dtype=torch.float32, device="cuda")
    nb = packed.numel() + scales.numel() * 4
    copies = [(packed, scales)] + [(packed.clone(), scales.clone()) for _ in range(bench.l2_copies(nb) - 1)]
    args = [tuple(cuda.as_cuda_array(t) for t in (p, s, xf, yours)) for p, s in copies]
    rows = packed.shape[0]
    gemv[rows, 32, stream](*args[0])
    torch.cuda.synchronize()
    if not torch.equal(yours, y):
        bad = int((yours != y).sum())
        raise AssertionError(f"your kernel gave {bad} wrong outputs of {rows} on the GPU (the exact answer is "
                             "known); fix it before timing it (the simulator checks only small cases).")
    launch = gemv[rows, 32, stream]
    return nb, [functools.partial(launch, *a) for a in args]


def _round(calls: dict[str, list[Callable[[], Any]]], order: list[str], cycles: int) -> dict[str, float] | None:
    """Seconds per call of each kernel, queued behind a sleep; None when some launches did not queue in time."""
    import torch

    timed = {}
    for name in order:
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(cycles)
        start.record()
        for c in calls[name]:
            c()
        stop.record()
        queued_in_time = not start.query()  # the GPU was still asleep when the last call was queued
        timed[name] = (start, stop, queued_in_time)
    torch.cuda.synchronize()
    if not all(ok for _, _, ok in timed.values()):
        return None
    return {name: s.elapsed_time(e) / 1e3 / len(calls[name]) for name, (s, e, _) in timed.items()}


def _time_shape(calls: dict[str, list[Callable[[], Any]]], rounds: int) -> dict[str, list[float]]:
    """`rounds` valid interleaved rounds (rotated order); the sleep grows until the launches queue in time."""
    import torch

    queueing = []
    for fns in calls.values():  # warm-up, and how long queueing each kernel's calls takes
        t0 = time.perf_counter()
        for c in fns:
            c()
        queueing.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
    cycles = int(max(2e6, 4 * max(queueing) * 2e9))  # about 4x the longest queueing time at ~2 GHz
    names = list(calls)
    out: dict[str, list[float]] = {name: [] for name in calls}
    tries = 0
    while len(out[names[0]]) < rounds:
        tries += 1
        if tries > 4 * rounds:
            raise RuntimeError("the launches never queued up behind the sleep kernel; the GPU is too busy to time.")
        shift = len(out[names[0]]) % len(names)
        got = _round(calls, names[shift:] + names[:shift], cycles)
        if got is None:
            cycles = min(2 * cycles, MAX_SLEEP_CYCLES)
            continue
        for name, s in got.items():
            out[name].append(s)
    return out


def measure(gemv: Any, shapes: tuple[tuple[int, int], ...] = SHAPES, rounds: int = ROUNDS) -> Result:
    """Every kernel at every shape: exact check of yours first, then `rounds` interleaved rounds."""
    import torch
    from numba import cuda
    from tqdm.auto import tqdm

    from helpers.device import require_gpu

    require_gpu("Timing the lab 13 GEMV")
    result = Result(tuple(shapes))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        stream = cuda.external_stream(side.cuda_stream)
        for n, k in tqdm(shapes, desc="checking and timing GEMVs", unit="shape"):
            w4, x, y = _problem(n, k, n + k)
            calls = {}
            for name in KERNELS:
                result.nbytes[(name, (n, k))], calls[name] = _calls(name, gemv, w4, x, y, stream)
            for name, secs in _time_shape(calls, rounds).items():
                result.seconds[(name, (n, k))] = secs
            del calls
            torch.cuda.empty_cache()
    return result


def ratio(result: Result, fast: str, slow: str) -> tuple[float, list[float]]:
    """Geometric mean over shapes of slow's time / fast's time (medians), and the same per round."""
    med = spread.geomean([result.median(slow, s) / result.median(fast, s) for s in result.shapes])
    rounds = min(len(v) for v in result.seconds.values())
    per_round = [spread.geomean([result.seconds[(slow, s)][r] / result.seconds[(fast, s)][r] for s in result.shapes])
                 for r in range(rounds)]
    return med, per_round


def record(result: Result) -> dict[str, float]:
    """Record each (kernel, shape) time (µs, weight GB/s, spread) and the speed-ups; return the speed-ups."""
    for (name, (n, k)), secs in result.seconds.items():
        med = statistics.median(secs)
        s = spread.of_samples([v * 1e6 for v in secs], "rounds")
        bench.record(f"lab13.gemv_us.{name}.{n}x{k}", med * 1e6, "µs", label=KERNELS[name], n=n, k=k, group=GROUP,
                     weight_bytes=result.nbytes[(name, (n, k))], weight_gbs=result.nbytes[(name, (n, k))] / med / 1e9,
                     **s.extra())
    out = {}
    for name, (fast, slow) in RATIOS.items():
        out[name], per_round = ratio(result, fast, slow)
        bench.record(name, out[name], "ratio", ratio_of=[KERNELS[fast], KERNELS[slow]],
                     shapes=[f"{n}x{k}" for n, k in result.shapes], **spread.of_samples(per_round, "rounds").extra())
    return out


def _relative_spread(secs: list[float]) -> float:
    """(p10..p90 width) / median of one kernel's rounds, as bench.Timing measures it."""
    return bench.Timing(tuple(secs), "torch").spread


def rows(result: Result) -> list[dict]:
    """One table row per (shape, kernel): median µs, spread, weight GB/s, speed over FP16 cuBLAS."""
    out = []
    for n, k in result.shapes:
        fp16 = result.median("fp16", (n, k))
        for name, label in KERNELS.items():
            secs = result.seconds[(name, (n, k))]
            med = statistics.median(secs)
            out.append({"N×K": f"{n}×{k}", "kernel": label, "µs": f"{med * 1e6:.1f}",
                        "spread": f"{_relative_spread(secs):.0%}",
                        "weight GB/s": f"{result.nbytes[(name, (n, k))] / med / 1e9:.0f}",
                        "× FP16": f"{fp16 / med:.2f}"})
    return out


def measure_and_show(gemv: Any) -> dict[str, float]:
    """GPU: check your kernel exact, time it beside FP16 cuBLAS and the course's kernels, record lab13.*, show them."""
    from helpers import tables

    result = measure(gemv)
    ratios = record(result)
    tables.show(rows(result), caption="Batch-1 W4A16 GEMV, measured now: medians of interleaved rounds (your "
                                      "kernel's outputs checked exact first)")
    speed_of_light_notes(result)
    return ratios


def speed_of_light_notes(result: Result) -> list[str]:
    """Print and return your kernel's fraction of this card's speed-of-light limit at each ranked shape (each
    sentence, then its 中文 twin)."""
    from helpers.grading import speed_of_light

    ranked = {s.label for s in speed_of_light.target("lab13.gemv").shapes}
    said = [speed_of_light.note("lab13.gemv", f"{n}×{k}", result.median("yours", (n, k)), zh=zh)
            for n, k in result.shapes if f"{n}×{k}" in ranked for zh in (False, True)]
    for line in said:
        print(line)
    return said
