"""The engine's attention: PyTorch's fused SDPA on q, k, v read in place from the packed QKV GEMM output, through the
backend that measured fastest on those very views (dispatch by measurement, as the GEMM tuner does).

On Hopper, PyTorch offers cuDNN's fused attention, FlashAttention-2 and the memory-efficient kernel; which is fastest
depends on the shape and on the strides of the packed views, so the first call at a new shape (outside CUDA-graph
capture) times each backend that accepts the views, in CUDA graphs and interleaved rounds, and keeps the fastest for
that shape. The CPU runs the float32 reference.

Serves: core — used by chapter 9.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")  # the fused ones, in PyTorch's own order
_PICKED: dict[tuple, str] = {}


def picked() -> dict[str, str]:
    """{'(batch, heads, seq, head_dim)': backend} of every shape picked in this process."""
    return {str(k[0]): v for k, v in _PICKED.items()}


def _backend(name: str) -> Any:
    from torch.nn.attention import SDPBackend

    return getattr(SDPBackend, name, None)


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, names: tuple[str, ...]) -> torch.Tensor:
    """(batch, seq, heads · head_dim) contiguous: a backend that writes another layout pays its copy here."""
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel([b for b in map(_backend, names) if b is not None]):
        ctx = F.scaled_dot_product_attention(q, k, v)
    return ctx.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


def pick(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rounds: int = 5) -> str:
    """The fastest fused backend on these views, its output's layout copy included: each that runs them is timed in a
    CUDA graph (its launch would outlast its kernel), in interleaved rounds; the median per call decides."""
    from helpers import bench

    fns = {}
    for name in BACKENDS:
        if _backend(name) is None:
            continue
        try:
            _sdpa(q, k, v, (name,))
            torch.cuda.synchronize()
        except RuntimeError:  # this backend does not take these views, dtypes or this GPU
            continue
        fns[name] = lambda n=name: _sdpa(q, k, v, (n,))
    if len(fns) == 1:
        return next(iter(fns))
    with torch.inference_mode():
        t = bench.interleaved(fns, rounds=rounds, clock="torch", warmup=2, inner=10, graph=True)
    return min(fns, key=t.median_s)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Softmax attention of (batch, heads, seq, head_dim) views → (batch, seq, heads · head_dim), FP16: on a GPU through
    the backend picked for this shape and these strides (during a CUDA-graph capture of a shape never picked,
    PyTorch's own order), on a CPU in float32."""
    if not q.is_cuda:
        ctx = F.scaled_dot_product_attention(q.float(), k.float(), v.float()).half()
        return ctx.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)
    key = (tuple(q.shape), tuple(q.stride()), q.dtype, q.device.index)
    name = _PICKED.get(key)
    if name is None and not torch.cuda.is_current_stream_capturing():
        name = _PICKED[key] = pick(q, k, v)
    return _sdpa(q, k, v, (name,) if name else BACKENDS)
