"""The engine's attention: PyTorch's fused SDPA on q, k, v read in place from the packed QKV GEMM output, through the
backend that measured fastest on those very views (dispatch by measurement, as the GEMM tuner does); or, where the
8-bit engine needs the context's codes next, the engine's own Triton kernel that writes them directly
(``attention_codes``: the quantize fused into the attention, used where it measured faster than SDPA + quantize).

On Hopper, PyTorch offers cuDNN's fused attention, FlashAttention-2 and the memory-efficient kernel; which is fastest
depends on the shape and on the strides of the packed views, so the first call at a new shape (outside CUDA-graph
capture) times each backend that accepts the views, in CUDA graphs and interleaved rounds, and keeps the fastest for
that shape. The CPU runs the float32 reference.

The fused kernel covers what BERT-base needs: a whole sequence in one tile (up to 256 tokens), head_dim a power of two.
One program takes one head of one sequence (and BLOCK_M of its query rows): it reads q, k, v from the packed QKV rows,
computes softmax(q kᵀ / √d) v with float32 scores and sums on the tensor cores, and writes the context's 8-bit codes:
the context never crosses memory in 16 bits, and the separate quantize kernel disappears.

Serves: core — used by chapter 9.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from helpers.deploy.engine8 import formats, norm
from helpers.deploy.engine8.kernels import out_spec, triton
from helpers.errors import InputError

if triton is not None:
    import triton.language as tl

    from helpers.deploy.engine8.kernels import store_codes

BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")  # the fused ones, in PyTorch's own order
_PICKED: dict[tuple, str] = {}
UNFUSED = "SDPA + quantize"
FUSED = {"fused, 64 query rows": 64, "fused, 128 query rows": 128}  # the engine's kernel, by its BLOCK_M
MAX_FUSED_SEQ = 256  # the fused kernel holds a whole sequence's keys in one tile
_CODES_PICKED: dict[tuple, str] = {}


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


def packed(qkv: torch.Tensor, batch: int, heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v (batch, heads, seq, head_dim) as views of the packed QKV GEMM output (T, 3D): read in place."""
    t, d3 = qkv.shape
    v5 = qkv.view(batch, t // batch, 3, heads, d3 // 3 // heads)
    q, k, v = (v5[:, :, i].transpose(1, 2) for i in range(3))
    return q, k, v


if triton is not None:
    @triton.jit
    def _attention_codes_kernel(qkv_ptr, q_ptr, seq, heads, D, sm_scale, out_mul, HD: tl.constexpr,
                                BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr, OUT_KIND: tl.constexpr):
        """One head of one sequence, BLOCK_M query rows: softmax(q kᵀ · sm_scale) v, written as codes."""
        bh, mb = tl.program_id(0), tl.program_id(1)
        b, h = bh // heads, bh % heads
        rm = mb * BLOCK_M + tl.arange(0, BLOCK_M)
        rs, rd = tl.arange(0, BLOCK_S), tl.arange(0, HD)
        row0, col0 = b * seq, h * HD
        q = tl.load(qkv_ptr + (row0 + rm)[:, None] * (3 * D) + col0 + rd[None, :], mask=(rm < seq)[:, None], other=0.0)
        kv = qkv_ptr + (row0 + rs)[:, None] * (3 * D) + col0 + rd[None, :]
        k = tl.load(kv + D, mask=(rs < seq)[:, None], other=0.0)
        v = tl.load(kv + 2 * D, mask=(rs < seq)[:, None], other=0.0)
        s = tl.dot(q, tl.trans(k)) * (sm_scale * 1.4426950408889634)  # log2(e): exp2 below
        s = tl.where((rs < seq)[None, :], s, float("-inf"))
        p = tl.exp2(s - tl.max(s, 1)[:, None])
        o = tl.dot(p.to(v.dtype), v) / tl.sum(p, 1)[:, None]
        store_codes(q_ptr + (row0 + rm)[:, None] * D + col0 + rd[None, :], o * out_mul, (rm < seq)[:, None], OUT_KIND)


def fits(seq: int, head_dim: int) -> bool:
    """Whether the fused kernel takes this shape: a sequence in one tile, head_dim a power of two from 16 to 128."""
    return seq <= MAX_FUSED_SEQ and head_dim in (16, 32, 64, 128)


def fused_codes(qkv: torch.Tensor, batch: int, heads: int, out: tuple[str, float], block_m: int = 128) -> torch.Tensor:
    """The context's codes (T, D) from the packed QKV (T, 3D), FP16 or BF16 on a GPU: the engine's fused kernel."""
    t, d3 = qkv.shape
    d, seq = d3 // 3, t // batch
    if not fits(seq, d // heads) or not qkv.is_cuda or triton is None or not qkv.is_contiguous():
        raise InputError(f"the fused attention takes a contiguous packed QKV on a GPU, seq <= {MAX_FUSED_SEQ} and "
                         f"head_dim 16/32/64/128; got {tuple(qkv.shape)} for batch {batch}, {heads} heads; use "
                         "attention_codes, which falls back to SDPA + quantize.")
    kind, mul = out_spec(out)
    q = torch.empty((t, d), dtype=formats.get(out[0]).dtype, device=qkv.device)
    bs = max(16, triton.next_power_of_2(seq))
    bm = min(block_m, bs)
    _attention_codes_kernel[(batch * heads, triton.cdiv(seq, bm))](
        qkv, q, seq, heads, d, (d // heads) ** -0.5, mul, HD=d // heads, BLOCK_M=bm, BLOCK_S=bs, OUT_KIND=kind,
        num_warps=8 if bm * bs >= 128 * 128 else 4)
    return q


def _unfused(qkv: torch.Tensor, batch: int, heads: int, out: tuple[str, float]) -> torch.Tensor:
    """SDPA (the backend picked for these views) on the packed views, then a quantize kernel."""
    return norm.quantize(attention(*packed(qkv, batch, heads)).reshape(qkv.shape[0], -1), out)


def agrees(got: torch.Tensor, want: torch.Tensor, out: tuple[str, float], terms: torch.Tensor) -> bool:
    """Whether two codes of the same context differ by at most one 8-bit step (of the larger value, where FP8's
    rounding crossed a power of two) beyond what 16-bit probabilities allow: each term p·v of the weighted sum moves
    by 2**-8 of itself, so the context by 2**-8 of `terms`, the softmax-weighted mean of |v| (twice that, for
    room)."""
    scale = out[1]
    a, b = got.float() * scale, want.float() * scale
    step = scale if out[0] == "int8" else torch.maximum(a.abs(), b.abs()) * 2 ** -3 + scale * 2 ** -6
    return bool(((a - b).abs() <= step + terms.float().abs() * 2 ** -7 + 1e-6).all())


def weighted_abs(qkv: torch.Tensor, batch: int, heads: int) -> torch.Tensor:
    """softmax(q kᵀ / √d) |v| (T, D): the scale of the terms the context sums (``agrees`` reads it)."""
    q, k, v = packed(qkv, batch, heads)
    return attention(q, k, v.abs()).reshape(qkv.shape[0], -1)


def _ways(qkv: torch.Tensor, batch: int, heads: int, out: tuple[str, float]) -> dict[str, Any]:
    """Every way to get the context's codes that runs on these operands and agrees with SDPA + quantize, by name."""
    ways = {UNFUSED: lambda: _unfused(qkv, batch, heads, out)}
    want, terms = _unfused(qkv, batch, heads, out), weighted_abs(qkv, batch, heads)
    for name, bm in FUSED.items():
        try:
            ok = agrees(fused_codes(qkv, batch, heads, out, bm), want, out, terms)
        except Exception:  # noqa: BLE001 - a kernel that does not compile or fit here is not a candidate
            continue
        if not ok:  # a kernel that computes something else is never picked, however fast
            print(f"the fused attention ({name}) disagrees with SDPA + quantize at {tuple(qkv.shape)}: not used")
            continue
        ways[name] = lambda bm=bm: fused_codes(qkv, batch, heads, out, bm)
    return ways


def attention_codes(qkv: torch.Tensor, batch: int, heads: int, out: tuple[str, float]) -> torch.Tensor:
    """The attention context's codes (T, D) for the next 8-bit GEMM, from the packed QKV (T, 3D).

    On a GPU the first call at a new shape (outside CUDA-graph capture) times SDPA + quantize against the fused kernel
    (each BLOCK_M) in CUDA graphs and interleaved rounds, and keeps the fastest; on the CPU, the float32 reference
    and the same quantize (what SDPA + quantize computes)."""
    seq, head_dim = qkv.shape[0] // batch, qkv.shape[1] // 3 // heads
    if not qkv.is_cuda or triton is None or not fits(seq, head_dim) or not qkv.is_contiguous():
        return _unfused(qkv, batch, heads, out)
    key = (tuple(qkv.shape), batch, heads, qkv.dtype, qkv.device.index, out[0])
    name = _CODES_PICKED.get(key)
    if name is None and not torch.cuda.is_current_stream_capturing():
        ways = _ways(qkv, batch, heads, out)
        name = UNFUSED
        if len(ways) > 1:
            from helpers import bench

            with torch.inference_mode():
                t = bench.interleaved(ways, rounds=5, clock="torch", warmup=2, inner=10, graph=True)
            name = min(ways, key=t.median_s)
        _CODES_PICKED[key] = name
    if name in FUSED:
        return fused_codes(qkv, batch, heads, out, FUSED[name])
    return _unfused(qkv, batch, heads, out)


def codes_picked() -> dict[str, str]:
    """{'(T, 3D) dtype format': way} of every shape ``attention_codes`` picked in this process."""
    return {f"{k[0]} {str(k[3]).replace('torch.', '')} {k[5]}": v for k, v in _CODES_PICKED.items()}
