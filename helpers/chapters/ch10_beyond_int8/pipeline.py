"""CPU-GPU pipelines: pinned vs pageable copies, copies overlapping compute on CUDA streams,
and a two-stage (CPU preprocessing -> model) video pipeline measured against the seed's ~15% claim.

Serves: chapter 10.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from helpers.bench import timeit
from helpers.device import require_gpu
from helpers.errors import InputError
from helpers.validation import require_int_range

SEED_CLAIM_GAIN = 0.15  # the seed: "splitting the model between CPU and GPU gives ~15% end to end for video"


def _torch() -> Any:
    """torch, imported on demand."""
    import torch

    return torch


def host_to_device_gbs(size_mb: int = 256, *, pinned: bool, repeats: int = 20) -> float:
    """Host-to-device copy bandwidth in GB/s from pinned (page-locked) or pageable host memory."""
    require_gpu("A host-to-device bandwidth measurement")
    require_int_range(size_mb, 1, 16384, "size_mb")
    torch = _torch()
    n = size_mb << 20
    host = torch.empty(n, dtype=torch.uint8, pin_memory=pinned)
    host.fill_(1)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    t = timeit(lambda: dev.copy_(host, non_blocking=pinned), backend="torch", warmup=2, repeats=repeats)
    return n / t.median_s / 1e9


def pinned_vs_pageable(sizes_mb: Sequence[int] = (4, 64, 256)) -> list[dict]:
    """Rows of size, pageable GB/s, pinned GB/s and pinned/pageable for each host buffer size."""
    rows = []
    for mb in sizes_mb:
        page = host_to_device_gbs(mb, pinned=False)
        pin = host_to_device_gbs(mb, pinned=True)
        rows.append({"size MB": mb, "pageable GB/s": page, "pinned GB/s": pin, "pinned/pageable": pin / page})
    return rows


def overlap_bound(copy_s: float, compute_s: float) -> float:
    """Best speed-up from overlapping two stages: (copy + compute) / max(copy, compute)."""
    if copy_s <= 0 or compute_s <= 0:
        raise InputError(f"stage times must be positive, got copy {copy_s} s and compute {compute_s} s.")
    return (copy_s + compute_s) / max(copy_s, compute_s)


def overlap_copy_compute(chunks: int = 8, chunk_mb: int = 64, matmuls: int = 2, repeats: int = 10) -> dict:
    """Stream H2D copies of `chunks` pinned FP16 chunks and a matmul on each: serial vs double-buffered.

    Serial: copy, then compute, on one stream. Overlapped: copies on one stream, compute on another,
    with events so that chunk i+1 is copied while chunk i is computed. Returns times in ms and ratios.
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
         for name, fn in (("copy", copy_only), ("compute", compute_only), ("serial", serial),
                          ("overlapped", overlapped))}
    return {
        "copy ms": t["copy"] * 1e3, "compute ms": t["compute"] * 1e3,
        "serial ms": t["serial"] * 1e3, "overlapped ms": t["overlapped"] * 1e3,
        "speedup": t["serial"] / t["overlapped"], "bound": overlap_bound(t["copy"], t["compute"]),
        "chunk MB": chunk_mb, "chunks": chunks,
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


def video_stages(device: str, size: int = 224, batch: int = 8, width: int = 32) -> tuple[Callable, Callable, list]:
    """(preprocess, infer, frames) of a toy video pipeline: uint8 HWC frames -> resize/normalise on the CPU -> CNN.

    preprocess runs on the CPU (as decoding and resizing usually do) and hands over pinned tensors;
    infer copies to `device`, runs a small conv net and returns the class ids on the host.
    """
    from helpers.validation import require_choice

    require_choice(device, ("cpu", "cuda"), "device")
    if device == "cuda":
        require_gpu("The GPU half of the video pipeline")
    torch = _torch()
    from torch import nn

    gen = torch.Generator().manual_seed(0)
    frames = [torch.randint(0, 256, (batch, size * 2, size * 2, 3), dtype=torch.uint8, generator=gen)
              for _ in range(12)]
    model = nn.Sequential(
        nn.Conv2d(3, width, 3, 2, 1), nn.ReLU(), nn.Conv2d(width, 2 * width, 3, 2, 1), nn.ReLU(),
        nn.Conv2d(2 * width, 4 * width, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(4 * width, 10),
    ).eval().to(device)
    half = device == "cuda"
    if half:
        model = model.half()

    def preprocess(frame: Any) -> Any:
        x = frame.permute(0, 3, 1, 2).float().div_(255.0)
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
        x = (x - 0.45) / 0.225
        return x.pin_memory() if half else x

    @torch.inference_mode()
    def infer(x: Any) -> Any:
        x = x.to(device, non_blocking=True)
        return model(x.half() if half else x).argmax(1).cpu()

    return preprocess, infer, frames


def split_pipeline_gain(device: str, *, repeats: int = 3, **kwargs: Any) -> dict:
    """Frames/s of the video pipeline run sequentially and pipelined, and the gain vs the seed's 15%.

    On the CPU each stage gets one thread (torch.set_num_threads(1)), so that the pipelined run puts
    one stage on each of two cores instead of two thread pools fighting over them.
    """
    torch = _torch()
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        return _split_pipeline_gain(device, repeats, **kwargs)
    finally:
        torch.set_num_threads(threads)


def _split_pipeline_gain(device: str, repeats: int, **kwargs: Any) -> dict:
    """split_pipeline_gain without the thread setting."""
    pre, infer, frames = video_stages(device, **kwargs)
    run_two_stage(pre, infer, frames[:2], pipelined=False)  # warm-up
    t_pre = min(_stage_time(pre, frames) for _ in range(repeats))
    xs = [pre(f) for f in frames]
    t_inf = min(_stage_time(infer, xs) for _ in range(repeats))
    seq, pip = float("inf"), float("inf")
    for _ in range(repeats):  # interleaved, best of `repeats` each
        seq = min(seq, run_two_stage(pre, infer, frames, pipelined=False)[1])
        pip = min(pip, run_two_stage(pre, infer, frames, pipelined=True)[1])
    n = len(frames) * frames[0].shape[0]
    gain = seq / pip - 1
    return {
        "device": device, "frames": n, "preprocess ms/batch": t_pre / len(frames) * 1e3,
        "infer ms/batch": t_inf / len(frames) * 1e3, "sequential fps": n / seq, "pipelined fps": n / pip,
        "gain": gain, "bound gain": overlap_bound(t_pre, t_inf) - 1, "seed claim": SEED_CLAIM_GAIN,
        "claim holds": gain >= SEED_CLAIM_GAIN,
    }


def _stage_time(fn: Callable[[Any], Any], xs: Sequence[Any]) -> float:
    """Seconds to run fn over xs once, one after the other."""
    t0 = time.perf_counter()
    for x in xs:
        fn(x)
    return time.perf_counter() - t0
