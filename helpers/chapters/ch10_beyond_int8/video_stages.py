"""The toy video pipeline's parts: a small CNN, decoded frames, their CPU preprocessing, and the split
of the CNN's first k conv blocks to the CPU with the bytes each frame then sends over PCIe.

pipeline.py times these stages (sequential, overlapped, split); this module only builds them, so the
bytes per frame are exact on any machine and the GPU half is the one place a GPU is needed.

Serves: chapter 10.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from helpers.device import require_gpu
from helpers.validation import require_int_range

SPLIT_BLOCKS = 3  # conv + ReLU blocks of the video net that the CPU side may take


def _torch() -> Any:
    """torch, imported on demand."""
    import torch

    return torch


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
