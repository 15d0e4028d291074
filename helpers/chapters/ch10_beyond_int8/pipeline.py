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
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from helpers.bench import timeit
from helpers.device import require_gpu
from helpers.errors import InputError
from helpers.validation import require_int_range

SPLIT_BLOCKS = 3  # conv + ReLU blocks of the video net that the CPU side may take


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


def _video_net(width: int) -> Any:
    """The toy video model: three stride-2 conv + ReLU blocks, global pooling, a 10-class head (seeded)."""
    torch = _torch()
    from torch import nn

    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, width, 3, 2, 1), nn.ReLU(), nn.Conv2d(width, 2 * width, 3, 2, 1), nn.ReLU(),
        nn.Conv2d(2 * width, 4 * width, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(4 * width, 10),
    ).eval()


def _frames(size: int, batch: int, count: int = 12) -> list:
    """`count` batches of random uint8 HWC frames at twice the model's input size (decoded video)."""
    torch = _torch()
    gen = torch.Generator().manual_seed(0)
    return [torch.randint(0, 256, (batch, size * 2, size * 2, 3), dtype=torch.uint8, generator=gen)
            for _ in range(count)]


def _preprocess(frame: Any, size: int) -> Any:
    """uint8 NHWC frames -> resized, normalised float NCHW (what a decoder's CPU side does)."""
    torch = _torch()
    x = frame.permute(0, 3, 1, 2).float().div_(255.0)
    x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    return (x - 0.45) / 0.225


def video_stages(device: str, size: int = 224, batch: int = 8, width: int = 32) -> tuple[Callable, Callable, list]:
    """(preprocess, infer, frames) of a toy video pipeline: uint8 HWC frames -> resize/normalise on the CPU -> CNN.

    preprocess runs on the CPU (as decoding and resizing usually do) and hands over pinned tensors;
    infer copies to `device`, runs a small conv net and returns the class ids on the host.
    """
    return split_stages(device, 0, size=size, batch=batch, width=width)


def split_stages(device: str, k: int, *, size: int = 224, batch: int = 8,
                 width: int = 32) -> tuple[Callable, Callable, list]:
    """(cpu_stage, device_stage, frames) with the video net's first `k` conv blocks moved to the CPU stage.

    The CPU stage preprocesses, runs blocks 1..k in FP32 and hands over FP16 (pinned for a GPU);
    the device stage copies that to `device` and runs the rest. k = 0 is the usual split.
    """
    from helpers.validation import require_choice

    require_choice(device, ("cpu", "cuda"), "device")
    require_int_range(k, 0, SPLIT_BLOCKS, "k (conv blocks on the CPU)")
    if device == "cuda":
        require_gpu("The GPU half of the video pipeline")
    torch = _torch()
    net = _video_net(width)
    head, tail = net[: 2 * k], net[2 * k:].to(device)
    half = device == "cuda"
    if half:
        tail = tail.half()

    @torch.inference_mode()
    def cpu_stage(frame: Any) -> Any:
        x = head(_preprocess(frame, size))
        return x.half().pin_memory() if half else x

    @torch.inference_mode()
    def device_stage(x: Any) -> Any:
        y = tail(x.to(device, non_blocking=True)).argmax(1)
        if not half:
            return y
        out = torch.empty(y.shape, dtype=y.dtype, pin_memory=True)
        out.copy_(y, non_blocking=True)
        done = torch.cuda.Event(blocking=True)  # the waiting thread sleeps: it leaves its core to the CPU stage
        done.record()
        done.synchronize()
        return out

    return cpu_stage, device_stage, _frames(size, batch)


def pcie_bytes_per_frame(k: int, *, size: int = 224, width: int = 32, bytes_per_value: int = 2) -> int:
    """Bytes one frame sends to the GPU when the first `k` conv blocks run on the CPU (FP16 by default).

    Exact and device-free: a stride-2 conv quarters the pixels but multiplies the channels.
    """
    require_int_range(k, 0, SPLIT_BLOCKS, "k (conv blocks on the CPU)")
    channels, side = 3, size
    for i in range(k):
        channels, side = width * 2**i, (side + 1) // 2
    return channels * side * side * bytes_per_value


def split_bytes_rows(ks: Sequence[int] = (0, 1, 2, 3), *, size: int = 224, width: int = 32) -> list[dict]:
    """Per k: the tensor that crosses PCIe per frame and its size relative to k = 0 (no GPU needed)."""
    base = pcie_bytes_per_frame(0, size=size, width=width)
    rows = []
    for k in ks:
        b = pcie_bytes_per_frame(k, size=size, width=width)
        rows.append({"conv blocks on the CPU": k, "KB per frame over PCIe (FP16)": b / 1e3,
                     "vs no split": b / base})
    return rows


def split_layers_gain(device: str, ks: Sequence[int] = (0, 1, 2), *, repeats: int = 3, size: int = 224,
                      batch: int = 8, width: int = 32) -> list[dict]:
    """Pipelined frames/s with the first k conv blocks on the CPU, per k, and the gain over k = 0.

    Each row: bytes per frame over PCIe, CPU-stage and device-stage ms per batch, pipelined fps,
    and 'gain vs k=0' (the notes claim about +0.15 for k = 1 or 2).
    """
    if not ks or 0 not in ks:
        raise InputError(f"ks must include 0 (the baseline without a split); got {list(ks)}.")
    rows = []
    for k in ks:
        pre, post, frames = split_stages(device, k, size=size, batch=batch, width=width)
        _pipelined(pre, post, frames[:4], device)  # warm-up (the pinned buffers of a full queue too)
        t_cpu = min(_stage_time(pre, frames) for _ in range(repeats))
        xs = [pre(f) for f in frames]
        t_dev = min(_stage_time(post, xs) for _ in range(repeats))
        t_pip = min(_pipelined(pre, post, frames, device)[0] for _ in range(repeats))
        n = len(frames) * batch
        rows.append({"conv blocks on the CPU": k, "KB per frame over PCIe": pcie_bytes_per_frame(k, size=size, width=width) / 1e3,
                     "CPU stage ms/batch": t_cpu / len(frames) * 1e3,
                     f"{'GPU' if device == 'cuda' else 'rest (CPU)'} stage ms/batch": t_dev / len(frames) * 1e3,
                     "pipelined fps": n / t_pip})
    base = next(r["pipelined fps"] for r in rows if r["conv blocks on the CPU"] == 0)
    for r in rows:
        r["gain vs k=0"] = r["pipelined fps"] / base - 1
    return rows


def split_pipeline_gain(device: str, *, repeats: int = 5, **kwargs: Any) -> dict:
    """Frames/s of the video pipeline (CPU preprocessing || model) run sequentially and pipelined.

    This is overlap, not the notes' split claim (split_layers_gain tests that); 'bound gain' is the
    best overlap can give, (a + b) / max(a, b) - 1. 'gain' is the median over `repeats` interleaved
    rounds, 'gain lo'/'gain hi' their spread (p10..p90, min..max under 5 rounds; None for one round),
    and 'CPU stage slowdown' the CPU stage's time per batch inside the pipeline over its time alone.

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

    if device == "cuda" and threads > 1:
        torch.set_num_threads(threads - 1)  # one core stays with the thread that drives the GPU
    try:
        secs = run_two_stage(timed, post, frames, pipelined=True)[1]
    finally:
        torch.set_num_threads(threads)
    return secs, busy[0]


def _split_pipeline_gain(device: str, repeats: int, **kwargs: Any) -> dict:
    """split_pipeline_gain without the thread setting."""
    import statistics

    from helpers.spread import of_samples

    require_int_range(repeats, 1, 100, "repeats")
    pre, infer, frames = video_stages(device, **kwargs)
    run_two_stage(pre, infer, frames[:2], pipelined=False)  # warm-up
    if device == "cuda":
        _pipelined(pre, infer, frames[:4], device)  # the pinned buffers of a full queue
    t_pre = min(_stage_time(pre, frames) for _ in range(repeats))
    xs = [pre(f) for f in frames]
    t_inf = min(_stage_time(infer, xs) for _ in range(repeats))
    gains, seqs, pips, inside = [], [], [], []
    for _ in range(repeats):  # interleaved rounds
        seq = run_two_stage(pre, infer, frames, pipelined=False)[1]
        pip, busy = _pipelined(pre, infer, frames, device)
        seqs.append(seq)
        pips.append(pip)
        inside.append(busy)
        gains.append(seq / pip - 1)
    n = len(frames) * frames[0].shape[0]
    spread = of_samples(gains, "rounds") if len(gains) > 1 else None
    return {
        "device": device, "frames": n, "preprocess ms/batch": t_pre / len(frames) * 1e3,
        "infer ms/batch": t_inf / len(frames) * 1e3,
        "sequential fps": n / statistics.median(seqs), "pipelined fps": n / statistics.median(pips),
        "gain": statistics.median(gains), "gain lo": spread.lo if spread else None,
        "gain hi": spread.hi if spread else None, "bound gain": overlap_bound(t_pre, t_inf) - 1,
        "CPU stage slowdown": statistics.median(inside) / t_pre,
    }


def gain_spread(row: dict) -> dict:
    """The extras that store a split_pipeline_gain row's spread with its record (empty for one round)."""
    from helpers.spread import Spread

    if row.get("gain lo") is None:
        return {}
    return Spread(row["gain lo"], row["gain hi"], "p10..p90 (min..max under 5) of interleaved rounds").extra()


def _stage_time(fn: Callable[[Any], Any], xs: Sequence[Any]) -> float:
    """Seconds to run fn over xs once, one after the other."""
    t0 = time.perf_counter()
    for x in xs:
        fn(x)
    return time.perf_counter() - t0
