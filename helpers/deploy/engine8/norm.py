"""The engine's row-wise kernels: LayerNorm fused with the next GEMM's quantize, and a plain quantize; with the
library GEMM (cuBLASLt's FP8, ``lt_gemm``) whose epilogue a LayerNorm can finish.

    y, q = layernorm(h, gamma, beta, eps, out=("fp8", s_next))            # FP16 y and its codes, one pass
    y, q = layernorm(lt_gemm(a, w), gamma, beta, eps, out=..., col_scale=s, col_bias=b, residual=r)
    q = quantize(x, ("int8", s))

As in ``helpers.deploy.engine8.kernels``, a CUDA tensor runs the Triton kernel and anything else the exact PyTorch
reference.

Serves: core — used by chapter 9.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from helpers.deploy.engine8 import formats
from helpers.deploy.engine8.kernels import (exact_products, out_spec, outputs, residual_spec, result, triton,
                                            triton_ready)
from helpers.errors import InputError

if triton is not None:
    import triton.language as tl

    from helpers.deploy.engine8.kernels import store_codes

    @triton.jit
    def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, q_ptr, cs_ptr, cb_ptr, r_ptr, M, N, eps, out_mul, res_mul,
                          OUT_KIND: tl.constexpr, PRE: tl.constexpr, HAS_RES: tl.constexpr, RES_CODES: tl.constexpr,
                          WRITE_Y: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        """LayerNorm of BLOCK_M rows of FP16/BF16 x; writes FP16 y (WRITE_Y) and/or its 8-bit codes in the same
        pass. PRE: x is a GEMM's unscaled sums, finished first (x * col_scale[n] + col_bias[n]); HAS_RES: plus a
        residual, FP16 or 8-bit codes times res_mul (RES_CODES)."""
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.arange(0, BLOCK_N)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        offs = rm[:, None] * N + rn[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if PRE:
            x = x * tl.load(cs_ptr + rn, mask=rn < N, other=0.0)[None, :] + tl.load(cb_ptr + rn, mask=rn < N,
                                                                                      other=0.0)[None, :]
        if HAS_RES:
            r = tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            if RES_CODES:
                r = r * res_mul
            x += r
        mean = tl.sum(x, axis=1) / N
        d = tl.where(mask, x - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / N + eps)
        y = d * rstd[:, None] * tl.load(w_ptr + rn, mask=rn < N, other=0.0)[None, :] \
            + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
        if WRITE_Y:
            tl.store(y_ptr + offs, y.to(tl.float16), mask=mask)
        if OUT_KIND != 0:
            store_codes(q_ptr + offs, y * out_mul, mask, OUT_KIND)

    @triton.jit
    def _quantize_kernel(x_ptr, q_ptr, n, out_mul, OUT_KIND: tl.constexpr, BLOCK: tl.constexpr):
        """Codes of a flat FP16 tensor with one scale."""
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        y = tl.load(x_ptr + i, mask=i < n, other=0.0).to(tl.float32) * out_mul
        store_codes(q_ptr + i, y, i < n, OUT_KIND)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
              out: tuple[str, float] | None, *, col_scale: torch.Tensor | None = None,
              col_bias: torch.Tensor | None = None, residual: torch.Tensor | None = None,
              residual_scale: float | None = None, fp16: bool = True) -> Any:
    """LayerNorm over the last axis of FP16 x (M, N): FP16 y (unless `fp16` is False), and its codes when `out` is
    given, in one pass.

    Where a library GEMM wrote x (``lt_gemm``: unscaled BF16 sums), the LayerNorm finishes its epilogue first:
    x * `col_scale` (N,) + `col_bias` (N,) (float32, both or neither) + `residual` (M, N): FP16, or 8-bit codes read
    as codes * `residual_scale` (TensorRT's 8-bit skip: the residual is the codes the sublayer's GEMM already read).
    """
    if x.dim() != 2 or x.dtype not in (torch.float16, torch.bfloat16) or \
            (x.dtype == torch.bfloat16 and col_scale is None):
        raise InputError(f"layernorm takes FP16 rows (M, N), or lt_gemm's BF16 sums with their col_scale, got "
                         f"{x.dtype} {tuple(x.shape)}.")
    if (col_scale is None) != (col_bias is None):
        raise InputError("layernorm's col_scale and col_bias come together (a GEMM's scale and bias); pass both.")
    if residual is not None and residual.shape != x.shape:
        raise InputError(f"layernorm's residual has x's shape {tuple(x.shape)}, got {tuple(residual.shape)}.")
    if not fp16 and out is None:
        raise InputError("layernorm with fp16=False writes only codes: give out=(format, scale).")
    res_codes, res_mul = residual_spec(residual, residual_scale)
    if not triton_ready(x):
        xf = x.float()
        if col_scale is not None and col_bias is not None:
            xf = xf * col_scale.float() + col_bias.float()
        if residual is not None:
            xf = xf + residual.float() * res_mul
        y = F.layer_norm(xf, (x.shape[1],), weight.float(), bias.float(), eps)
        q = None
        if out is not None:
            fmt = formats.get(out[0])
            q = fmt.saturate(y * fmt.inverse(out[1]))
        return result(y.half() if fp16 else None, q)
    m, n = x.shape
    kind, mul = out_spec(out)
    y, q = outputs((m, n), x.device, fp16, out)
    block_n = triton.next_power_of_2(n)
    # rows a program: picking among five launch shapes by measurement at the first call left BERT-base's LayerNorm
    # time unchanged on an H100 (2026-12-06), so one fixed shape serves
    block_m = max(1, 4096 // block_n)
    pre = col_scale is not None
    _layernorm_kernel[(triton.cdiv(m, block_m),)](
        x, weight, bias, y if y is not None else q, q if q is not None else y, col_scale if pre else weight,
        col_bias if pre else weight, residual if residual is not None else x, m, n, float(eps), mul, res_mul,
        OUT_KIND=kind, PRE=pre, HAS_RES=residual is not None, RES_CODES=res_codes, WRITE_Y=fp16,
        BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return result(y, q)


CUBLASLT = "cuBLASLt"  # a tuned 'configuration' that means: this GEMM runs in cuBLASLt (lt_gemm)
CUBLASLT_FAST = "cuBLASLt, fast accumulation"  # the same with Hopper's FP8 fast accumulation (lt_gemm(fast=True))
LIBRARY = (CUBLASLT, CUBLASLT_FAST)  # the configurations that name a library GEMM, not the engine's kernel
_ONES: dict[tuple[torch.device, tuple[int, ...]], torch.Tensor] = {}


def _ones(device: torch.device, shape: tuple[int, ...]) -> torch.Tensor:
    """A cached float32 tensor of ones (cuBLASLt's unit scales); made outside CUDA-graph capture only."""
    one = _ONES.get((device, shape))
    if one is None:
        if torch.cuda.is_current_stream_capturing():  # a tensor made during capture holds nothing until a replay
            raise InputError("lt_gemm's first call at a shape must come before a CUDA-graph capture; call it once "
                             "outside the capture (a warm-up) first.")
        one = _ONES[(device, shape)] = torch.ones(shape, device=device)
    return one


def lt_gemm(a: torch.Tensor, w: torch.Tensor, scale: torch.Tensor | None = None,
            bias: torch.Tensor | None = None, fast: bool = False) -> torch.Tensor:
    """a (M, K) @ w (N, K)ᵀ of FP8 codes in NVIDIA's cuBLASLt (``torch._scaled_mm``), in BF16.

    Without `scale`: the unscaled sums. cuBLASLt cannot fuse a per-channel scale with a residual add, so they go to
    the LayerNorm that follows, which finishes the epilogue (``layernorm(..., col_scale=, col_bias=, residual=)``).
    BF16, not FP16: an unscaled sum of FP8 products can exceed FP16's range. With `scale` (N,) float32 (s_a * s_w[n])
    and a BF16 `bias` (N,): the finished product, scaled per output channel (cuBLASLt's row-wise scaling) with the
    bias added in its epilogue — a GEMM with nothing else fused (BERT's QKV projection). The engine takes either
    path for a shape only where the tuner measured it faster than its own fused GEMM.

    `fast`: cuBLASLt's FP8 fast accumulation (``use_fast_accum``): the tensor cores keep their partial sums at reduced
    precision instead of promoting them to FP32 as they go. The tuner takes it only where, at that shape, every sum
    stays within ``FAST_TOLERANCE`` of its terms' magnitudes of the exact one. On the CPU the sums are exact either
    way.
    """
    if a.dtype != torch.float8_e4m3fn or w.dtype != a.dtype or a.dim() != 2 or w.dim() != 2 or a.shape[1] != w.shape[1]:
        raise InputError(f"lt_gemm multiplies FP8 codes a (M, K) and w (N, K), got {a.dtype} {tuple(a.shape)} and "
                         f"{w.dtype} {tuple(w.shape)}; INT8 and FP16 take kernels.gemm.")
    if (scale is None) != (bias is None):
        raise InputError("lt_gemm's scale and bias come together (the finished product), or neither (the sums).")
    if not a.is_cuda:
        acc = exact_products(a, w)
        if scale is not None and bias is not None:
            acc = acc * scale.float() + bias.float()
        return acc.to(torch.bfloat16)
    if scale is None or bias is None:
        one = _ones(a.device, ())
        return torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=fast)
    return torch._scaled_mm(a, w.t(), _ones(a.device, (a.shape[0], 1)), scale.view(1, -1), bias=bias,
                            out_dtype=torch.bfloat16, use_fast_accum=fast)


FAST_TOLERANCE = 2.0**-8  # what fast accumulation may cost each of lt_gemm's sums, as a fraction of the sum of its
#                           terms' magnitudes (sum over k of |a[m, k] * w[n, k]|), beyond rounding each sum to BF16:
#                           BF16's unit roundoff, no more than rounding every product to BF16 could cost. Measured on an
#                           H100 (2026-12-07, random codes at BERT-base's four shapes): at most 5.1e-4 (about 2**-11)
#                           with fast accumulation, 7.3e-5 without. A bound on the largest sum instead is too strict to
#                           mean anything: two BF16 roundings of nearly equal sums already differ by up to 2**-7 of it.


def quantize(x: torch.Tensor, out: tuple[str, float]) -> torch.Tensor:
    """Codes of FP16 x with one scale: out = (format, scale)."""
    fmt = formats.get(out[0])
    if not triton_ready(x):
        return fmt.quantize(x, out[1])
    xc = x.contiguous()
    q = torch.empty(xc.shape, dtype=fmt.dtype, device=x.device)
    n = xc.numel()
    _quantize_kernel[(triton.cdiv(n, 4096),)](xc, q, n, float(fmt.inverse(out[1])), OUT_KIND=fmt.kind, BLOCK=4096)
    return q
