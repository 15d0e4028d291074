"""Memory layout for convolutions: NCHW vs NHWC (channels_last), in float and INT8 paths.

Tensor Cores and INT8 conv kernels (cuDNN, TensorRT, fbgemm/oneDNN on CPU) want channels innermost
(NHWC). Give them NCHW and a transpose ("reformat") runs before and after, or a slower kernel is used.

Serves: chapter 10.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

from helpers.bench import interleaved
from helpers.chapters.ch10_beyond_int8 import ROUNDS
from helpers.errors import InputError
from helpers.validation import require_choice, require_int_range


def _torch() -> Any:
    """torch, imported on demand."""
    import torch

    return torch


def _times(fns: dict, backend: str, repeats: int) -> dict[str, Any]:
    """'NCHW ms', 'NHWC ms' and the 'NHWC speed-up' (NCHW ÷ NHWC time, the median of interleaved rounds) with
    its spread as 'NHWC speed-up spread': one call of each per round on the CPU, CUDA events on the GPU
    (``helpers.bench.interleaved``)."""
    torch = _torch()
    with torch.inference_mode():
        if backend == "cpu":
            r = interleaved(fns, rounds=repeats, clock="cpu", warmup=2)
        else:
            r = interleaved(fns, rounds=ROUNDS, clock=backend, warmup=2, settle=1, per_round=max(1, repeats // ROUNDS))
    ratio, spread = r.ratio("NCHW", "NHWC")
    return {"NCHW ms": r.median_s("NCHW") * 1e3, "NHWC ms": r.median_s("NHWC") * 1e3, "NHWC speed-up": ratio,
            "NHWC speed-up spread": spread}


def _check_shape(batch: int, channels: int, size: int) -> None:
    """Validate a conv problem size."""
    require_int_range(batch, 1, 4096, "batch")
    require_int_range(channels, 1, 8192, "channels")
    require_int_range(size, 1, 4096, "size")


def conv_layout_times(device: str = "cpu", dtype: str = "float32", *, batch: int = 8, channels: int = 64,
                      size: int = 28, kernel: int = 3, repeats: int = 20) -> dict:
    """Median ms of one float Conv2d with NCHW and with channels_last input and weights, and the ratio with its
    spread over interleaved rounds."""
    require_choice(device, ("cpu", "cuda"), "device")
    require_choice(dtype, ("float32", "float16", "bfloat16"), "dtype")
    _check_shape(batch, channels, size)
    torch = _torch()
    if device == "cuda":
        from helpers.device import require_gpu

        require_gpu("A GPU convolution layout comparison")
    elif dtype != "float32":
        raise InputError(f"dtype={dtype!r} convolutions are slow emulations on the CPU; use 'float32' there.")
    dt = getattr(torch, dtype)
    conv = torch.nn.Conv2d(channels, channels, kernel, padding=kernel // 2, bias=False).to(device, dt).eval()
    x = torch.randn(batch, channels, size, size, device=device, dtype=dt)
    backend = "torch" if device == "cuda" else "cpu"
    fns = {}
    for name, fmt in (("NCHW", torch.contiguous_format), ("NHWC", torch.channels_last)):
        c = copy.deepcopy(conv).to(memory_format=fmt)
        fns[name] = lambda c=c, xi=x.contiguous(memory_format=fmt): c(xi)
    return {"device": device, "dtype": dtype, **_times(fns, backend, repeats)}


def quantized_conv_layout_times(*, batch: int = 8, channels: int = 64, size: int = 28, repeats: int = 20) -> dict:
    """CPU INT8 conv (torch.ao, fbgemm/x86) fed NCHW vs NHWC quantized input; it computes in NHWC either way."""
    _check_shape(batch, channels, size)
    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao.quantization deprecation notices
        import torch.ao.nn.quantized as nnq

        conv = nnq.Conv2d(channels, channels, 3, padding=1)
        x = torch.randn(batch, channels, size, size)
        qx = torch.quantize_per_tensor(x, 0.05, 128, torch.quint8)
    inputs = {"NCHW": qx, "NHWC": qx.contiguous(memory_format=torch.channels_last)}
    times = _times({k: (lambda q=q: conv(q)) for k, q in inputs.items()}, "cpu", repeats)
    out_nhwc = {k: bool(conv(q).is_contiguous(memory_format=torch.channels_last)) for k, q in inputs.items()}
    return {"device": "cpu", "dtype": "int8 (torch.ao)", **times, "output is NHWC for NCHW input": out_nhwc["NCHW"]}


def int8_pointwise_conv(x_q: Any, w_q: Any, layout: str) -> Any:
    """A 1x1 INT8 conv as one int8 GEMM (torch._int_mm): x_q (N,C,H,W) int8, w_q (K,C) int8 -> int32 (N,K,H,W).

    layout='NHWC' expects x_q already channels_last, so (N*H*W, C) is a free view; 'NCHW' must
    transpose x_q into that shape first and transpose the result back: the "reformat layers".
    """
    require_choice(layout, ("NCHW", "NHWC"), "layout")
    torch = _torch()
    if x_q.dtype != torch.int8 or w_q.dtype != torch.int8:
        raise InputError(f"int8_pointwise_conv needs int8 tensors, got {x_q.dtype} and {w_q.dtype}.")
    if x_q.ndim != 4 or w_q.ndim != 2 or x_q.shape[1] != w_q.shape[1]:
        raise InputError(f"shapes must be x (N,C,H,W) and w (K,C) with the same C; got "
                         f"{tuple(x_q.shape)} and {tuple(w_q.shape)}.")
    n, c, h, w = x_q.shape
    if n * h * w <= 16 or c % 8 or w_q.shape[0] % 8:
        raise InputError("torch._int_mm needs N*H*W > 16 and C, K multiples of 8; "
                         f"got N*H*W={n * h * w}, C={c}, K={w_q.shape[0]}.")
    if layout == "NHWC":
        if not x_q.is_contiguous(memory_format=torch.channels_last):
            raise InputError("layout='NHWC' needs x_q.contiguous(memory_format=torch.channels_last).")
        a = x_q.permute(0, 2, 3, 1).reshape(n * h * w, c)  # a view: no data moves
        y = torch._int_mm(a, w_q.t())
        return y.view(n, h, w, -1).permute(0, 3, 1, 2)  # logical NCHW, memory NHWC
    a = x_q.permute(0, 2, 3, 1).contiguous().view(n * h * w, c)  # transpose kernel
    y = torch._int_mm(a, w_q.t())
    return y.view(n, h, w, -1).permute(0, 3, 1, 2).contiguous()  # and back


def int8_pointwise_layout_times(device: str = "cuda", *, batch: int = 32, channels: int = 256, size: int = 56,
                                repeats: int = 20) -> dict:
    """Median ms of the 1x1 INT8 conv with NHWC input (pure GEMM) vs NCHW input (transpose + GEMM + transpose)."""
    require_choice(device, ("cpu", "cuda"), "device")
    _check_shape(batch, channels, size)
    torch = _torch()
    if device == "cuda":
        from helpers.device import require_gpu

        require_gpu("The GPU INT8 layout comparison")
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (batch, channels, size, size), dtype=torch.int8, generator=g).to(device)
    w = torch.randint(-128, 128, (channels, channels), dtype=torch.int8, generator=g).to(device)
    x_nhwc = x.contiguous(memory_format=torch.channels_last)
    backend = "torch" if device == "cuda" else "cpu"
    t = _times({"NCHW": lambda: int8_pointwise_conv(x, w, "NCHW"),
                "NHWC": lambda: int8_pointwise_conv(x_nhwc, w, "NHWC")}, backend, repeats)
    gemm_bytes = x.numel() + w.numel() + 4 * batch * channels * size * size
    return {"device": device, "dtype": "int8 (_int_mm)", **t, "GEMM MB": gemm_bytes / 1e6}
