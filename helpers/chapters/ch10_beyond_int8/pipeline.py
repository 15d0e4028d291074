"""CPU-GPU pipelines: pinned vs pageable copies, copies overlapping compute on CUDA streams, a
two-stage (CPU preprocessing || GPU model) video pipeline, and the lecture notes' actual claim:
run the model's first layers on the CPU to cut PCIe traffic (about 15% end to end for video).

The split test measures both halves of that claim: the bytes each frame sends over PCIe (exact,
from the tensor shapes, on any machine) and the end-to-end frame rate (a GPU is needed).

Two threads share the CPU in a pipelined run: the one preprocessing (an OpenMP team over every core)
and the one that drives the GPU. So that they do not fight over the cores, the pipelined runs give the
CPU stage one core less, and the GPU stage waits for its result with a blocking-sync CUDA event (the
thread sleeps instead of spinning on a core). Each run also times the CPU stage inside the pipeline,
so a loss can say where it comes from.

Serves: chapter 10.
"""

from __future__ import annotations

import queue
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from helpers import figure_check, findings
from helpers.bench import interleaved, round_robin, timeit
from helpers.threads import torch_threads
from helpers.chapters.ch10_beyond_int8 import PER_ROUND, ROUNDS
from helpers.chapters.ch10_beyond_int8.video_stages import pcie_bytes_per_frame, split_stages, video_stages
from helpers.device import require_gpu
from helpers.errors import InputError
from helpers.spread import INTERLEAVED, Spread, of_samples, paired_ratio
from helpers.validation import require_int_range


def _torch() -> Any:
    """torch, imported on demand."""
    import torch

    return torch


def _h2d_copy(size_mb: int, pinned: bool) -> Callable[[], Any]:
    """A host-to-device copy of `size_mb` MiB from pinned (page-locked) or pageable host memory."""
    torch = _torch()
    host = torch.empty(size_mb << 20, dtype=torch.uint8, pin_memory=pinned)
    host.fill_(1)
    dev = torch.empty(size_mb << 20, dtype=torch.uint8, device="cuda")
    return lambda: dev.copy_(host, non_blocking=pinned)


def pinned_vs_pageable(sizes_mb: Sequence[int] = (4, 64, 256), *, rounds: int = ROUNDS) -> list[dict]:
    """Rows of size, pageable GB/s, pinned GB/s and pinned/pageable for each host buffer size; the two
    copies are timed in interleaved rounds, and 'pinned/pageable spread' is the rounds' spread."""
    require_gpu("A host-to-device bandwidth measurement")
    rows = []
    for mb in sizes_mb:
        require_int_range(mb, 1, 16384, "size_mb")
        r = interleaved({"pageable": _h2d_copy(mb, False), "pinned": _h2d_copy(mb, True)}, rounds=rounds,
                        clock="torch", warmup=2, settle=1, per_round=PER_ROUND)
        ratio, spread = r.ratio("pageable", "pinned")
        rows.append({"size MB": mb, "pageable GB/s": (mb << 20) / r.median_s("pageable") / 1e9,
                     "pinned GB/s": (mb << 20) / r.median_s("pinned") / 1e9, "pinned/pageable": ratio,
                     "pinned/pageable spread": spread})
    return rows


def overlap_bound(copy_s: float, compute_s: float) -> float:
    """Best speed-up from overlapping two stages: (copy + compute) / max(copy, compute)."""
    if copy_s <= 0 or compute_s <= 0:
        raise InputError(f"stage times must be positive, got copy {copy_s} s and compute {compute_s} s.")
    return (copy_s + compute_s) / max(copy_s, compute_s)


OVERLAP_TIMELINE = "ch10.timeline.overlap"  # the serial and the overlapped pipeline, one call each, on a timeline
OVERLAP_LABELS = ("serial: copy, then compute, one stream", "overlapped: copies on one stream, compute on another")


def overlap_copy_compute(chunks: int = 8, chunk_mb: int = 64, matmuls: int = 2, repeats: int = 10,
                         rounds: int = ROUNDS, timelines: bool = False) -> dict:
    """Stream H2D copies of `chunks` pinned FP16 chunks and a matmul on each: serial vs double-buffered.

    Serial: copy, then compute, on one stream. Overlapped: copies on one stream, compute on another,
    with events so that chunk i+1 is copied while chunk i is computed. Returns times in ms and ratios;
    serial and overlapped are timed in interleaved rounds ('speedup spread': the rounds' spread). With `timelines`,
    one call of each is then traced and stored (``OVERLAP_TIMELINE``): the copies and matmuls side by side.
    """
    require_gpu("Overlapping copies with compute on CUDA streams")
    require_int_range(chunks, 2, 256, "chunks")
    require_int_range(chunk_mb, 1, 2048, "chunk_mb")
    torch = _torch()
    cols = 4096
    rows = (chunk_mb << 20) // (2 * cols)
    host = [torch.randn(rows, cols, dtype=torch.float16).pin_memory() for _ in range(chunks)]
    w = torch.randn(cols, cols, dtype=torch.float16, device="cuda") / cols**0.5
    bufs = [torch.empty(rows, cols, dtype=torch.float16, device="cuda") for _ in range(2)]

    def compute(x: Any) -> Any:
        for _ in range(matmuls):
            x = x @ w
        return x

    def copy_only() -> None:
        for h in host:
            bufs[0].copy_(h, non_blocking=True)

    def compute_only() -> None:
        for _ in range(chunks):
            compute(bufs[0])

    def serial() -> None:
        for h in host:
            bufs[0].copy_(h, non_blocking=True)
            compute(bufs[0])

    copy_stream, comp_stream = torch.cuda.Stream(), torch.cuda.Stream()
    copied = [torch.cuda.Event() for _ in range(2)]
    freed = [torch.cuda.Event() for _ in range(2)]

    def overlapped() -> None:
        main = torch.cuda.current_stream()
        copy_stream.wait_stream(main)
        comp_stream.wait_stream(main)
        for i, h in enumerate(host):
            b = i % 2
            with torch.cuda.stream(copy_stream):
                if i >= 2:
                    copy_stream.wait_event(freed[b])
                bufs[b].copy_(h, non_blocking=True)
                copied[b].record(copy_stream)
            with torch.cuda.stream(comp_stream):
                comp_stream.wait_event(copied[b])
                compute(bufs[b])
                freed[b].record(comp_stream)
        main.wait_stream(comp_stream)

    t = {name: timeit(fn, backend="torch", warmup=2, repeats=repeats).median_s
         for name, fn in (("copy", copy_only), ("compute", compute_only))}
    r = interleaved({"serial": serial, "overlapped": overlapped}, rounds=rounds, clock="torch", warmup=2, settle=1,
                    per_round=PER_ROUND)
    speedup, spread = r.ratio("serial", "overlapped")
    if timelines:
        from helpers.perf import timeline

        timeline.record_named(dict(zip(OVERLAP_LABELS, (serial, overlapped))), OVERLAP_TIMELINE)
    return {
        "copy ms": t["copy"] * 1e3, "compute ms": t["compute"] * 1e3,
        "serial ms": r.median_s("serial") * 1e3, "overlapped ms": r.median_s("overlapped") * 1e3,
        "speedup": speedup, "bound": overlap_bound(t["copy"], t["compute"]),
        "chunk MB": chunk_mb, "chunks": chunks, "speedup spread": spread,
    }


def run_two_stage(stage_a: Callable[[Any], Any], stage_b: Callable[[Any], Any], items: Iterable[Any],
                  *, pipelined: bool, depth: int = 2) -> tuple[list[Any], float]:
    """Run stage_b(stage_a(item)) over items, in order; return (outputs, seconds).

    Sequential: one item at a time. Pipelined: a worker thread runs stage_a on the next items
    (up to `depth` ahead) while the caller's thread runs stage_b, like decode || inference in video.
    """
    require_int_range(depth, 1, 64, "depth")
    if not (callable(stage_a) and callable(stage_b)):
        raise InputError("run_two_stage needs two functions: stage_a (e.g. preprocessing) and stage_b (the model).")
    items = list(items)
    t0 = time.perf_counter()
    if not pipelined:
        outs = [stage_b(stage_a(x)) for x in items]
        return outs, time.perf_counter() - t0
    q: queue.Queue = queue.Queue(maxsize=depth)
    errors: list[BaseException] = []

    def producer() -> None:
        try:
            for x in items:
                q.put(stage_a(x))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            errors.append(exc)
        q.put(_END)

    worker = threading.Thread(target=producer, daemon=True)
    worker.start()
    outs = []
    while (y := q.get()) is not _END:
        outs.append(stage_b(y))
    worker.join()
    if errors:
        raise errors[0]
    return outs, time.perf_counter() - t0


_END = object()


def split_layers_gain(device: str, ks: Sequence[int] = (0, 1, 2), *, rounds: int = ROUNDS,
                      size: int = 224, batch: int = 8, width: int = 32) -> list[dict]:
    """Pipelined frames/s with the first k conv blocks on the CPU, per k, and the gain over k = 0.

    Each row: bytes per frame over PCIe, CPU-stage and device-stage ms per batch, pipelined fps, and
    'gain vs k=0' (the notes claim about +0.15 for k = 1 or 2). Every round runs each k once, one after
    the other, so the gain is the median of paired per-round gains and 'gain vs k=0 spread' their spread.
    """
    if not ks or 0 not in ks:
        raise InputError(f"ks must include 0 (the baseline without a split); got {list(ks)}.")
    require_int_range(rounds, 2, 100, "rounds (at least 2 give a spread)")
    stages = {k: split_stages(device, k, size=size, batch=batch, width=width) for k in ks}
    stage_s = {}
    for k, (pre, post, frames) in stages.items():
        _pipelined(pre, post, frames[:4], device)  # warm-up (the pinned buffers of a full queue too)
        xs = [pre(f) for f in frames]
        stage_s[k] = (min(_stage_time(pre, frames) for _ in range(2)), min(_stage_time(post, xs) for _ in range(2)))
    # interleaved (helpers.bench.round_robin): a slow moment of the machine slows every k of this round
    secs = round_robin({k: (lambda s=s: _pipelined(s[0], s[1], s[2], device)[0]) for k, s in stages.items()}, rounds)
    rows = []
    for k, (pre, post, frames) in stages.items():
        ratio, spread = paired_ratio(secs[0], secs[k])  # k = 0 time ÷ k time: > 1 when the split is faster
        row = {"conv blocks on the CPU": k,
               "KB per frame over PCIe": pcie_bytes_per_frame(k, size=size, width=width) / 1e3,
               "CPU stage ms/batch": stage_s[k][0] / len(frames) * 1e3,
               f"{'GPU' if device == 'cuda' else 'rest (CPU)'} stage ms/batch": stage_s[k][1] / len(frames) * 1e3,
               "pipelined fps": len(frames) * batch / statistics.median(secs[k]), "gain vs k=0": ratio - 1}
        row["gain vs k=0 spread"] = None if spread is None or k == 0 else Spread(spread.lo - 1, spread.hi - 1,
                                                                                 spread.method)
        rows.append(row)
    return rows


def split_pipeline_gain(device: str, *, repeats: int = 5, **kwargs: Any) -> dict:
    """Frames/s of the video pipeline (CPU preprocessing || model) run sequentially and pipelined.

    This is overlap, not the notes' split claim (split_layers_gain tests that); 'bound gain' is the
    best overlap can give, (a + b) / max(a, b) - 1. 'gain' is the median over `repeats` interleaved
    rounds, 'gain spread' their spread (p10..p90, min..max under 5 rounds; none for one round),
    and 'CPU stage slowdown' the CPU stage's time per batch inside the pipeline over its time alone.

    On the CPU each stage gets one thread (helpers.threads.torch_threads(1)), so that the pipelined run puts
    one stage on each of two cores instead of two thread pools fighting over them.
    """
    with torch_threads(1 if device == "cpu" else None):
        return _split_pipeline_gain(device, repeats, **kwargs)


def _pipelined(pre: Callable, post: Callable, frames: Sequence[Any], device: str) -> tuple[float, float]:
    """(seconds, CPU-stage seconds) of one pipelined run; on a GPU the CPU stage gets one core less."""
    torch = _torch()
    threads = torch.get_num_threads()
    busy = [0.0]

    def timed(x: Any) -> Any:
        t0 = time.perf_counter()
        y = pre(x)
        busy[0] += time.perf_counter() - t0
        return y

    # on a GPU one core stays with the thread that drives it
    with torch_threads(threads - 1 if device == "cuda" and threads > 1 else None):
        secs = run_two_stage(timed, post, frames, pipelined=True)[1]
    return secs, busy[0]


def _split_pipeline_gain(device: str, repeats: int, **kwargs: Any) -> dict:
    """split_pipeline_gain without the thread setting."""
    require_int_range(repeats, 1, 100, "repeats")
    pre, infer, frames = video_stages(device, **kwargs)
    run_two_stage(pre, infer, frames[:2], pipelined=False)  # warm-up
    if device == "cuda":
        _pipelined(pre, infer, frames[:4], device)  # the pinned buffers of a full queue
    t_pre = min(_stage_time(pre, frames) for _ in range(repeats))
    xs = [pre(f) for f in frames]
    t_inf = min(_stage_time(infer, xs) for _ in range(repeats))
    seqs, pips, inside = [], [], []

    def one_round(_: float = 0.0) -> float:
        seq = run_two_stage(pre, infer, frames, pipelined=False)[1]
        pip, busy = _pipelined(pre, infer, frames, device)
        seqs.append(seq)
        pips.append(pip)
        inside.append(busy)
        return seq / pip - 1

    gains = [one_round() for _ in range(repeats)]  # interleaved rounds
    bound_gain = overlap_bound(t_pre, t_inf) - 1
    # a round beyond what overlap can give is a disturbed measurement: measured again, as chapter 1's sweeps
    check = figure_check.recheck(range(len(gains)), gains, one_round,
                                 flag=lambda _, v: findings.above_bound(v, bound_gain))
    gains = list(check.per_item)
    n = len(frames) * frames[0].shape[0]
    spread = of_samples(gains, INTERLEAVED) if len(gains) > 1 else None
    row = {
        "device": device, "frames": n, "preprocess ms/batch": t_pre / len(frames) * 1e3,
        "infer ms/batch": t_inf / len(frames) * 1e3,
        "sequential fps": n / statistics.median(seqs), "pipelined fps": n / statistics.median(pips),
        "gain": statistics.median(gains), "bound gain": bound_gain,
        "CPU stage slowdown": statistics.median(inside) / t_pre,
        "rounds beyond the bound": len(check.persistent),  # still beyond it after measuring again: disturbed
        "gain spread": spread,
    }
    return row


def _stage_time(fn: Callable[[Any], Any], xs: Sequence[Any]) -> float:
    """Seconds to run fn over xs once, one after the other."""
    t0 = time.perf_counter()
    for x in xs:
        fn(x)
    return time.perf_counter() - t0
