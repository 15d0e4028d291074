"""Decode attention in CUDA C (``decode_attention.cu``, compiled with cupy): one new token per sequence attends over
its KV cache, the cache split into chunks so that every SM has work (flash-decoding), the new key and value written
into the cache by the same kernel.

    out = attend(qkv, cache, heads=32)     # qkv (3d,) or (B, 3d) FP16; cache (2, H, T, 128) or (2, B, H, T, 128)

`attend` writes the token's key and value at the cache's last position T - 1 and returns (d,) or (B, d) FP16, what
``reference`` computes with PyTorch's scaled_dot_product_attention. `plan(...)` says how many chunks a launch uses;
``np_split_attention`` is the kernel's algorithm in numpy (chunks, their maxima and sums, the merge), which the CPU
tests hold against the plain softmax. Launches go to torch's current stream (CUDA-graph capturable) and use a scratch
buffer and counters per (device, shape) that the kernel leaves ready for the next launch, so two streams must not
run the same shape at once.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from helpers.errors import InputError
from helpers.kernels import pdl as pdl_launch
from helpers.kernels.cuda_source import HERE, cupy_module, torch_stream

DH = 128  # DH in decode_attention.cu
THREADS = 128  # WARPS * 32 in decode_attention.cu (one thread per head dimension when merging)
UNROLL = 4  # keys a warp reads per step
BLOCKS_PER_SM = 4  # the plan aims at this many blocks per SM (an H100 probe, 2026-12-07: twice the chunks of 2 a SM
# were faster at batch 1, 8 and 16, not resolved at 4)
MAX_SPLITS = 64


def plan(batch: int, heads: int, positions: int, sms: int) -> tuple[int, int]:
    """(splits, chunk): chunks of `chunk` positions (the last one what is left), enough of them for BLOCKS_PER_SM blocks
    per SM where the cache has that many positions and MAX_SPLITS allows."""
    want = math.ceil(BLOCKS_PER_SM * sms / (batch * heads))
    chunk = max(math.ceil(positions / MAX_SPLITS), positions // want, 1)
    return math.ceil(positions / chunk), chunk


def _shapes(qkv: Any, cache: Any, heads: int) -> tuple[int, int]:
    """Validate a call; return (batch B, positions T)."""
    if not isinstance(heads, int) or isinstance(heads, bool) or heads < 1:
        raise InputError(f"heads must be a positive int, got {heads!r}.")
    if not isinstance(qkv, torch.Tensor) or qkv.dtype != torch.float16 or qkv.ndim not in (1, 2) \
            or qkv.shape[-1] != 3 * heads * DH or not qkv.is_contiguous():
        raise InputError(f"qkv must be a contiguous FP16 tensor (3d,) or (B, 3d) with d = heads x {DH} = "
                         f"{heads * DH}, got {getattr(qkv, 'dtype', type(qkv).__name__)} "
                         f"{tuple(getattr(qkv, 'shape', ()))}.")
    b = 1 if qkv.ndim == 1 else qkv.shape[0]
    want = (2, heads) if qkv.ndim == 1 else (2, b, heads)
    if not isinstance(cache, torch.Tensor) or cache.dtype != torch.float16 or not cache.is_contiguous() \
            or cache.ndim != len(want) + 2 or tuple(cache.shape[:len(want)]) != want or cache.shape[-1] != DH \
            or cache.shape[-2] < 1:
        raise InputError(f"cache must be a contiguous FP16 tensor {want + ('T', DH)} (keys, then values), got "
                         f"{getattr(cache, 'dtype', type(cache).__name__)} {tuple(getattr(cache, 'shape', ()))}.")
    if cache.device != qkv.device:
        raise InputError(f"qkv is on {qkv.device} but the cache on {cache.device}; keep both on one device.")
    if b < 1:
        raise InputError("qkv holds no sequence (B = 0).")
    if qkv.data_ptr() % 16 or cache.data_ptr() % 16:
        raise InputError("qkv and the cache must start on a 16-byte boundary (the kernel reads 8 bytes a lane); "
                         "pass a fresh tensor or .clone() of a sliced one.")
    return b, cache.shape[-2]


def reference(qkv: torch.Tensor, cache: torch.Tensor, heads: int) -> torch.Tensor:
    """What the kernel computes, in PyTorch: the new key and value written at position T - 1, then
    scaled_dot_product_attention of the query over the whole cache; (d,) or (B, d) FP16."""
    b, t = _shapes(qkv, cache, heads)
    q, k, v = qkv.reshape(b, 3, heads, DH).unbind(1)
    kv = cache.view(2, b, heads, t, DH)
    kv[0, :, :, t - 1] = k
    kv[1, :, :, t - 1] = v
    out = F.scaled_dot_product_attention(q[:, :, None, :], kv[0], kv[1])
    return out.reshape(qkv.shape[:-1] + (heads * DH,))


def np_split_attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, splits: int) -> np.ndarray:
    """One head's attention computed as the kernel does, in float64: the positions cut into `splits` chunks (as
    ``plan`` cuts them), each chunk's maximum score m, sum l of exp(s - m) and unnormalized output o, then the merge
    sum exp(m_c - M) o_c / sum exp(m_c - M) l_c. q (DH,), keys and values (T, DH)."""
    t = keys.shape[0]
    chunk = math.ceil(t / splits)
    s = keys.astype(np.float64) @ q.astype(np.float64) / math.sqrt(q.shape[0])
    parts = []
    for c0 in range(0, t, chunk):
        sc = s[c0:c0 + chunk]
        m = sc.max()
        p = np.exp(sc - m)
        parts.append((m, p.sum(), p @ values[c0:c0 + chunk].astype(np.float64)))
    big = max(m for m, _, _ in parts)
    total = sum(np.exp(m - big) * l for m, l, _ in parts)
    return sum(np.exp(m - big) * o for m, _, o in parts) / total


_functions: dict[str, Any] = {}
_scratch: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}


def _kernel(unroll: int) -> Any:
    """The compiled instance decode_attention<unroll>."""
    name = f"decode_attention<{unroll}>"
    if name not in _functions:
        from helpers.device import require_gpu

        require_gpu("compiling decode_attention.cu")
        mod = cupy_module().RawModule(code=_source(), options=("--std=c++17", "-lineinfo"), name_expressions=[name])
        _functions[name] = mod.get_function(name)
    return _functions[name]


@functools.cache
def _source() -> str:
    """The CUDA source text."""
    return (HERE / "decode_attention.cu").read_text(encoding="utf-8")


def attend(qkv: torch.Tensor, cache: torch.Tensor, heads: int, *, splits: int | None = None,
           unroll: int = UNROLL, pdl: bool = False) -> torch.Tensor:
    """Attention of the new token(s) over the cache, the token's key and value written at position T - 1 first;
    (d,) or (B, d) FP16. `splits` chunks of the cache per head (``plan``'s when None; equal chunks of
    ceil(T / splits) positions, so fewer chunks where those cover T sooner); pdl: launch with programmatic dependent
    launch where the GPU has it (``helpers.kernels.pdl``)."""
    b, t = _shapes(qkv, cache, heads)
    if not qkv.is_cuda:
        from helpers.errors import NoGPUError

        raise NoGPUError("the CUDA decode attention (qkv must be a CUDA tensor; reference() runs anywhere)")
    if splits is None:
        splits, chunk = plan(b, heads, t, torch.cuda.get_device_properties(qkv.device).multi_processor_count)
    else:
        if not isinstance(splits, int) or not 1 <= splits <= min(MAX_SPLITS, t):
            raise InputError(f"splits must be an int in 1..{min(MAX_SPLITS, t)} (at most one chunk per position), "
                             f"got {splits!r}.")
        chunk = math.ceil(t / splits)
        splits = math.ceil(t / chunk)
    if unroll not in (1, 2, 4, 8):
        raise InputError(f"unroll must be 1, 2, 4 or 8, got {unroll!r}.")
    key = (qkv.device, b, heads, splits)
    if key not in _scratch:
        _scratch[key] = (torch.empty(b * heads * splits * (DH + 2), dtype=torch.float32, device=qkv.device),
                         torch.zeros(b * heads, dtype=torch.int32, device=qkv.device))
    part, count = _scratch[key]
    out = torch.empty(qkv.shape[:-1] + (heads * DH,), dtype=torch.float16, device=qkv.device)
    fn = _kernel(unroll)
    args = (np.uint64(qkv.data_ptr()), np.uint64(cache.data_ptr()), np.int64(b * heads * t * DH),
            np.uint64(part.data_ptr()), np.uint64(count.data_ptr()), np.uint64(out.data_ptr()), np.int32(heads),
            np.int32(t), np.int32(chunk), np.float32(math.log2(math.e) / math.sqrt(DH)))
    if pdl and pdl_launch.supported():
        pdl_launch.launch(fn, (splits, heads, b), (THREADS,), args)
    else:
        with torch_stream():
            fn((splits, heads, b), (THREADS,), args)
    return out
