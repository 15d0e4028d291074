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
from helpers.deploy.engine8.kernels import _exact_products, _out_spec, _outputs, _result, triton, triton_ready
from helpers.errors import InputError

if triton is not None:
    import triton.language as tl

    from helpers.deploy.engine8.kernels import _store_codes

    @triton.jit
    def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, q_ptr, cs_ptr, cb_ptr, r_ptr, M, N, eps, out_mul,
                          OUT_KIND: tl.constexpr, PRE: tl.constexpr, HAS_RES: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        """LayerNorm of BLOCK_M rows of FP16/BF16 x; writes FP16 y and its 8-bit codes in the same pass. PRE: x is a
        GEMM's unscaled sums, finished first (x * col_scale[n] + col_bias[n]); HAS_RES: plus an FP16 residual."""
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.arange(0, BLOCK_N)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        offs = rm[:, None] * N + rn[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if PRE:
            x = x * tl.load(cs_ptr + rn, mask=rn < N, other=0.0)[None, :] + tl.load(cb_ptr + rn, mask=rn < N,
                                                                                      other=0.0)[None, :]
        if HAS_RES:
            x += tl.load(r_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=1) / N
        d = tl.where(mask, x - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=1) / N + eps)
        y = d * rstd[:, None] * tl.load(w_ptr + rn, mask=rn < N, other=0.0)[None, :] \
            + tl.load(b_ptr + rn, mask=rn < N, other=0.0)[None, :]
        tl.store(y_ptr + offs, y.to(tl.float16), mask=mask)
        _store_codes(q_ptr + offs, y * out_mul, mask, OUT_KIND)

    @triton.jit
    def _quantize_kernel(x_ptr, q_ptr, n, out_mul, OUT_KIND: tl.constexpr, BLOCK: tl.constexpr):
        """Codes of a flat FP16 tensor with one scale."""
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        y = tl.load(x_ptr + i, mask=i < n, other=0.0).to(tl.float32) * out_mul
        _store_codes(q_ptr + i, y, i < n, OUT_KIND)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
              out: tuple[str, float] | None, *, col_scale: torch.Tensor | None = None,
              col_bias: torch.Tensor | None = None, residual: torch.Tensor | None = None) -> Any:
    """LayerNorm over the last axis of FP16 x (M, N): FP16 y, and its codes when `out` is given, in one pass.

    Where a library GEMM wrote x (``lt_gemm``: unscaled BF16 sums), the LayerNorm finishes its epilogue first:
    x * `col_scale` (N,) + `col_bias` (N,) (float32, both or neither) + `residual` (M, N) FP16.
    """
    if x.dim() != 2 or x.dtype not in (torch.float16, torch.bfloat16) or \
            (x.dtype == torch.bfloat16 and col_scale is None):
        raise InputError(f"layernorm takes FP16 rows (M, N), or lt_gemm's BF16 sums with their col_scale, got "
                         f"{x.dtype} {tuple(x.shape)}.")
    if (col_scale is None) != (col_bias is None):
        raise InputError("layernorm's col_scale and col_bias come together (a GEMM's scale and bias); pass both.")
    if residual is not None and (residual.dtype != torch.float16 or residual.shape != x.shape):
        raise InputError(f"layernorm's residual is FP16 of x's shape {tuple(x.shape)}, got {residual.dtype} "
                         f"{tuple(residual.shape)}.")
    if not triton_ready(x):
        xf = x.float()
        if col_scale is not None and col_bias is not None:
            xf = xf * col_scale.float() + col_bias.float()
        if residual is not None:
            xf = xf + residual.float()
        y = F.layer_norm(xf, (x.shape[1],), weight.float(), bias.float(), eps)
        q = None
        if out is not None:
            fmt = formats.get(out[0])
            q = fmt.saturate(y * fmt.inverse(out[1]))
        return _result(y.half(), q)
    m, n = x.shape
    kind, mul = _out_spec(out)
    y, q = _outputs((m, n), x.device, True, out)
    block_n = triton.next_power_of_2(n)
    # rows a program: picking among five launch shapes by measurement at the first call left BERT-base's LayerNorm
    # time unchanged on an H100 (2026-12-06), so one fixed shape serves
    block_m = max(1, 4096 // block_n)
    pre = col_scale is not None
    _layernorm_kernel[(triton.cdiv(m, block_m),)](
        x, weight, bias, y, q if q is not None else y, col_scale if pre else weight, col_bias if pre else weight,
        residual if residual is not None else y, m, n, float(eps), mul, OUT_KIND=kind, PRE=pre,
        HAS_RES=residual is not None, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return _result(y, q)


CUBLASLT = "cuBLASLt"  # a tuned 'configuration' that means: this GEMM runs in cuBLASLt (lt_gemm), its epilogue later
_ONES: dict[torch.device, torch.Tensor] = {}


def lt_gemm(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ w (N, K)ᵀ of FP8 codes in NVIDIA's cuBLASLt (``torch._scaled_mm``): the unscaled sums, in BF16.

    cuBLASLt cannot fuse a per-channel scale with a residual add, so its sums go to the LayerNorm that follows,
    which finishes the epilogue (``layernorm(..., col_scale=, col_bias=, residual=)``). BF16, not FP16: an
    unscaled sum of FP8 products can exceed FP16's range. The engine takes this path for a shape only where the
    tuner measured the pair faster than its own fused GEMM and LayerNorm.
    """
    if a.dtype != torch.float8_e4m3fn or w.dtype != a.dtype or a.dim() != 2 or w.dim() != 2 or a.shape[1] != w.shape[1]:
        raise InputError(f"lt_gemm multiplies FP8 codes a (M, K) and w (N, K), got {a.dtype} {tuple(a.shape)} and "
                         f"{w.dtype} {tuple(w.shape)}; INT8 and FP16 take kernels.gemm.")
    if not a.is_cuda:
        return _exact_products(a, w).to(torch.bfloat16)
    one = _ONES.get(a.device)
    if one is None:
        if torch.cuda.is_current_stream_capturing():  # a tensor made during capture holds nothing until a replay
            raise InputError("lt_gemm's first call on a device must come before a CUDA-graph capture; call it once "
                             "outside the capture (a warm-up) first.")
        one = _ONES[a.device] = torch.ones((), device=a.device)
    return torch._scaled_mm(a, w.t(), one, one, out_dtype=torch.bfloat16)


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
