"""The engine's Triton kernels: an 8-bit GEMM and an 8-bit convolution with the epilogue fused, LayerNorm + quantize.

Each kernel reads 8-bit codes, multiplies on the tensor cores (FP8 e4m3 or INT8, FP32/INT32 accumulation) and
finishes in registers before anything is written: ``y = acc * scale[n] + bias[n] (+ residual) -> activation``, then
writes FP16 ``y`` and/or its 8-bit codes for the next layer (``q = quantize(y, out_scale)``). That is TensorRT's
layer fusion: the dequantize, bias, activation, residual add and the next layer's quantize cost no extra pass over
memory.

    y = gemm(a, w, scale, bias=b, act="gelu", out=("fp8", s_next))         # (M, K) x (N, K)ᵀ
    y, q = conv(x, w, scale, bias=b, residual=r, act="relu", fp16=True, out=("fp8", s_next), stride=2, pad=1)
    y, q = layernorm(h, gamma, beta, eps, out=("fp8", s_next))

Every function runs the Triton kernel on a CUDA tensor and the exact PyTorch reference (``*_reference``) elsewhere,
so the engine computes the same function on the CPU, only slower. Launches go to torch's current stream (a CUDA
graph can capture them).

Serves: core — used by chapter 9.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from helpers.deploy.engine8 import formats
from helpers.errors import InputError

try:  # Triton comes with PyTorch's CUDA wheels, not with the CPU wheel
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the wheel
    triton = None

# 'gelu': BERT's erf GELU; 'gelu_tanh': its tanh approximation (as TensorRT's BERT plugins and FasterTransformer use),
# within 4.8e-4 of erf's everywhere (tests/deploy/test_engine8.py), computed on the GPU with the hardware's
# tanh.approx instruction where the exact form calls libdevice's erf (the time each costs: ../shared/FACTS.md)
ACTS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3}
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): a safe default; tuned tables override it per shape.
DEFAULT_CONFIG = (128, 128, 128, 8, 8, 3)


def triton_ready(t: torch.Tensor) -> bool:
    """True when `t` lives on a CUDA GPU and Triton is installed (else the references run)."""
    return triton is not None and t.is_cuda


def _out_spec(out: tuple[str, float] | None) -> tuple[int, float]:
    """(kernel code, 1 / scale) of an output quantization ('fp8'|'int8', scale), or (0, 1.0) for none."""
    if out is None:
        return 0, 1.0
    fmt = formats.get(out[0])
    return fmt.kind, float(fmt.inverse(out[1]))


def activation(y: torch.Tensor, act: str) -> torch.Tensor:
    """The epilogue's activation (``ACTS``) in PyTorch."""
    if act == "relu":
        return torch.relu(y)
    if act == "gelu":
        return 0.5 * y * (1.0 + torch.erf(y * 0.7071067811865476))
    if act == "gelu_tanh":
        return torch.nn.functional.gelu(y, approximate="tanh")
    return y


def epilogue_reference(acc: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None,
                       act: str, fp16: bool, out: tuple[str, float] | None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The fused epilogue in PyTorch, in the kernels' order: scale, bias, residual, activation, then FP16 and codes."""
    y = acc.float() * scale.float()
    if bias is not None:
        y = y + bias.float()
    if residual is not None:
        y = y + residual.float()
    y = activation(y, act)
    q = None
    if out is not None:
        fmt = formats.get(out[0])
        q = fmt.saturate(y * fmt.inverse(out[1]).to(y.device))
    return (y.half() if fp16 else None), q


def _check_codes(a: torch.Tensor, w: torch.Tensor, what: str) -> None:
    """Both operands 8-bit codes of one format, or an InputError saying which to quantize."""
    ok = (torch.float8_e4m3fn, torch.int8, torch.float16)  # FP16: the same kernel as the baseline
    if a.dtype not in ok or w.dtype != a.dtype:
        raise InputError(f"{what} multiplies 8-bit codes of one format (float8_e4m3fn or int8; or both FP16), got "
                         f"{a.dtype} and {w.dtype}; quantize both with helpers.deploy.engine8.formats first.")


def _exact_products(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ w (N, K)ᵀ of codes, exact: float64 holds every INT8 sum and FP8 product exactly."""
    acc = a.double() @ w.double().t()
    return acc.round().to(torch.int32) if a.dtype == torch.int8 else acc.float()


if triton is not None:

    @triton.jit
    def _finish(acc, rm, rn, M, N, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul,
                HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr, WRITE_Y: tl.constexpr,
                OUT_KIND: tl.constexpr):
        """The fused epilogue on one (BLOCK_M, BLOCK_N) tile: scale, bias, residual, activation, FP16 and/or codes."""
        nmask = rn < N
        mask = (rm[:, None] < M) & nmask[None, :]
        y = acc.to(tl.float32) * tl.load(scale_ptr + rn, mask=nmask, other=0.0)[None, :]
        if HAS_BIAS:
            y += tl.load(bias_ptr + rn, mask=nmask, other=0.0)[None, :]
        offs = rm[:, None] * N + rn[None, :]
        if HAS_RES:
            y += tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        if ACT == 1:
            y = tl.maximum(y, 0.0)
        if ACT == 2:
            y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
        if ACT == 3:
            y = 0.5 * y * (1.0 + _tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)))
        if WRITE_Y:
            tl.store(y_ptr + offs, y.to(tl.float16), mask=mask)
        _store_codes(q_ptr + offs, y * out_mul, mask, OUT_KIND)

    @triton.jit
    def _tanh(x):
        """tanh through the GPU's one-instruction approximation (PTX ISA: maximum relative error 2**-10.987)."""
        return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                         pack=1)

    @triton.jit
    def _store_codes(ptrs, y, mask, OUT_KIND: tl.constexpr):
        """Store y (already divided by its scale) as codes: FP8 e4m3 saturated to ±448, or INT8 rounded to even."""
        if OUT_KIND == 1:
            tl.store(ptrs, tl.clamp(y, -448.0, 448.0).to(tl.float8e4nv), mask=mask)
        if OUT_KIND == 2:
            tl.store(ptrs, tl.clamp(_rint(y), -128.0, 127.0).to(tl.int8), mask=mask)

    @triton.jit
    def _rint(y):
        """Round to the nearest integer, ties to even (as torch.round): adding and removing 1.5 * 2**23 leaves
        float32 no fraction bits; exact for |y| < 2**22, and anything larger saturates in the clamp after it."""
        return (y + 12582912.0) - 12582912.0

    @triton.jit
    def _mma(a, b, acc, INT_ACC: tl.constexpr):
        """acc += a @ b on the tensor cores (INT32 accumulation for INT8 codes, FP32 for FP8)."""
        if INT_ACC:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        else:
            acc = tl.dot(a, b, acc)
        return acc

    @triton.jit
    def _tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
        """This program's output tile, in grouped order (neighbouring programs share weight tiles in L2)."""
        pid = tl.program_id(0)
        num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        group = GROUP_M * num_n
        first_m = (pid // group) * GROUP_M
        rows = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % group) % rows
        pid_n = (pid % group) // rows
        return pid_m * BLOCK_M + tl.arange(0, BLOCK_M), pid_n * BLOCK_N + tl.arange(0, BLOCK_N)

    @triton.jit
    def _gemm_kernel(a_ptr, w_ptr, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, M, N, K, out_mul,
                     HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr, WRITE_Y: tl.constexpr,
                     OUT_KIND: tl.constexpr, INT_ACC: tl.constexpr, EVEN_K: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        """Y = epilogue(A (M, K) @ W (N, K)ᵀ), both row-major 8-bit codes (K-major, as the tensor cores want)."""
        rm, rn = _tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
        rk = tl.arange(0, BLOCK_K)
        a = a_ptr + (rm % M)[:, None] * K + rk[None, :]
        b = w_ptr + (rn % N)[None, :] * K + rk[:, None]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if INT_ACC else tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                acc = _mma(tl.load(a), tl.load(b), acc, INT_ACC)
            else:
                left = K - k * BLOCK_K
                acc = _mma(tl.load(a, mask=rk[None, :] < left, other=0.0),
                           tl.load(b, mask=rk[:, None] < left, other=0.0), acc, INT_ACC)
            a += BLOCK_K
            b += BLOCK_K
        _finish(acc, rm, rn, M, N, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul,
                HAS_BIAS, HAS_RES, ACT, WRITE_Y, OUT_KIND)

    @triton.jit
    def _conv_kernel(x_ptr, w_ptr, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, NB, H, W, C, HO, WO, COUT, out_mul,
                     R: tl.constexpr, S: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                     HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, ACT: tl.constexpr, WRITE_Y: tl.constexpr,
                     OUT_KIND: tl.constexpr, INT_ACC: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        """Implicit-GEMM convolution, NHWC codes: rows are output pixels, K runs over (r, s, channel)."""
        M = NB * HO * WO
        rm, rn = _tile(M, COUT, BLOCK_M, BLOCK_N, GROUP_M)
        img = rm // (HO * WO)
        pix = rm % (HO * WO)
        h0 = (pix // WO) * SH - PH
        w0 = (pix % WO) * SW - PW
        rk = tl.arange(0, BLOCK_K)
        kc = tl.cdiv(C, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if INT_ACC else tl.float32)
        for kk in range(0, R * S * kc):
            rs = kk // kc
            c = (kk % kc) * BLOCK_K + rk
            hi = h0 + rs // S
            wi = w0 + rs % S
            inside = (rm < M) & (hi >= 0) & (hi < H) & (wi >= 0) & (wi < W)
            a = tl.load(x_ptr + ((img * H + hi) * W + wi)[:, None] * C + c[None, :],
                        mask=inside[:, None] & (c < C)[None, :], other=0.0)
            b = tl.load(w_ptr + rn[None, :] * (R * S * C) + (rs * C + c)[:, None],
                        mask=(c < C)[:, None] & (rn < COUT)[None, :], other=0.0)
            acc = _mma(a, b, acc, INT_ACC)
        _finish(acc, rm, rn, M, COUT, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul,
                HAS_BIAS, HAS_RES, ACT, WRITE_Y, OUT_KIND)

    @triton.jit
    def _layernorm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, q_ptr, M, N, eps, out_mul, OUT_KIND: tl.constexpr,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        """LayerNorm of BLOCK_M rows of FP16 x; writes FP16 y and its 8-bit codes in the same pass."""
        rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tl.arange(0, BLOCK_N)
        mask = (rm[:, None] < M) & (rn[None, :] < N)
        offs = rm[:, None] * N + rn[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
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


def _outputs(shape: tuple[int, ...], device: torch.device, fp16: bool, out: tuple[str, float] | None) -> tuple[Any, Any]:
    """Empty FP16 and code tensors for a kernel's results (None where not asked for)."""
    y = torch.empty(shape, dtype=torch.float16, device=device) if fp16 else None
    q = torch.empty(shape, dtype=formats.get(out[0]).dtype, device=device) if out is not None else None
    return y, q


def _result(y: Any, q: Any) -> Any:
    """(y, q) when both were written, else the one that was."""
    return (y, q) if y is not None and q is not None else (y if y is not None else q)


def _launch_args(scale: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None,
                 y: Any, q: Any) -> tuple[Any, ...]:
    """Pointer arguments, with a harmless stand-in for the ones a flag switches off."""
    return (y if y is not None else scale, q if q is not None else scale, scale,
            bias if bias is not None else scale, residual if residual is not None else scale)


def gemm(a: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, *, bias: torch.Tensor | None = None,
         residual: torch.Tensor | None = None, act: str = "none", fp16: bool | None = None,
         out: tuple[str, float] | None = None, config: tuple[int, ...] | None = None) -> Any:
    """epilogue(a (M, K) @ w (N, K)ᵀ): 8-bit codes in; FP16 and/or the next layer's codes out (see the module doc).

    `scale` (N,) float32 is s_a * s_w[n]; `bias` (N,) float32; `residual` (M, N) FP16; `out` = (format, scale) of
    the codes to write; `fp16` (default: when no codes are asked for) writes the FP16 result too.
    """
    _check_codes(a, w, "gemm")
    if a.dim() != 2 or w.dim() != 2 or a.shape[1] != w.shape[1]:
        raise InputError(f"gemm needs a (M, K) and w (N, K) with the same K, got {tuple(a.shape)} and {tuple(w.shape)}.")
    if act not in ACTS:
        raise InputError(f"act must be one of {', '.join(ACTS)}, got {act!r}.")
    m, k = a.shape
    n = w.shape[0]
    fp16 = out is None if fp16 is None else fp16
    if not triton_ready(a):
        y, q = epilogue_reference(_exact_products(a, w), scale, bias, residual, act, fp16, out)
        return _result(y, q)
    kind, mul = _out_spec(out)
    y, q = _outputs((m, n), a.device, fp16, out)
    bm, bn, bk, gm, warps, stages = config or DEFAULT_CONFIG
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _gemm_kernel[grid](a, w, *_launch_args(scale, bias, residual, y, q), m, n, k, mul,
                       HAS_BIAS=bias is not None, HAS_RES=residual is not None, ACT=ACTS[act], WRITE_Y=fp16,
                       OUT_KIND=kind, INT_ACC=a.dtype == torch.int8, EVEN_K=k % bk == 0,
                       BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages)
    return _result(y, q)


def conv(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, *, stride: int | tuple[int, int] = 1,
         pad: int | tuple[int, int] = 0,
         bias: torch.Tensor | None = None, residual: torch.Tensor | None = None, act: str = "none",
         fp16: bool | None = None, out: tuple[str, float] | None = None, config: tuple[int, ...] | None = None) -> Any:
    """epilogue(conv2d(x, w)) on NHWC codes: x (N, H, W, C), w (Cout, R, S, C); residual (N, Ho, Wo, Cout) FP16.

    `stride` and `pad` are one number or (height, width) pairs: a 1-D convolution is H = R = 1, stride (1, s).
    """
    (sh, sw), (ph, pw) = (stride, stride) if isinstance(stride, int) else stride, (pad, pad) if isinstance(pad, int) else pad
    _check_codes(x, w, "conv")
    if x.dim() != 4 or w.dim() != 4 or x.shape[3] != w.shape[3]:
        raise InputError(f"conv needs NHWC x (N, H, W, C) and w (Cout, R, S, C) with the same C, got "
                         f"{tuple(x.shape)} and {tuple(w.shape)}.")
    nb, h, wd, c = x.shape
    cout, r, s, _ = w.shape
    ho, wo = (h + 2 * ph - r) // sh + 1, (wd + 2 * pw - s) // sw + 1
    fp16 = out is None if fp16 is None else fp16
    if not triton_ready(x):
        acc = F.conv2d(x.permute(0, 3, 1, 2).double(), w.permute(0, 3, 1, 2).double(), stride=(sh, sw), padding=(ph, pw))
        acc = acc.permute(0, 2, 3, 1).reshape(-1, cout)
        acc = acc.round().to(torch.int32) if x.dtype == torch.int8 else acc.float()
        res = None if residual is None else residual.reshape(-1, cout)
        y, q = epilogue_reference(acc, scale, bias, res, act, fp16, out)
        shape = (nb, ho, wo, cout)
        return _result(None if y is None else y.reshape(shape), None if q is None else q.reshape(shape))
    kind, mul = _out_spec(out)
    y, q = _outputs((nb, ho, wo, cout), x.device, fp16, out)
    bm, bn, bk, gm, warps, stages = config or DEFAULT_CONFIG
    bk = min(bk, max(32, triton.next_power_of_2(c)))
    grid = (triton.cdiv(nb * ho * wo, bm) * triton.cdiv(cout, bn),)
    _conv_kernel[grid](x, w, *_launch_args(scale, bias, residual, y, q), nb, h, wd, c, ho, wo, cout, mul,
                       R=r, S=s, SH=sh, SW=sw, PH=ph, PW=pw, HAS_BIAS=bias is not None, HAS_RES=residual is not None,
                       ACT=ACTS[act], WRITE_Y=fp16, OUT_KIND=kind, INT_ACC=x.dtype == torch.int8,
                       BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages)
    return _result(y, q)


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
              out: tuple[str, float] | None) -> Any:
    """LayerNorm over the last axis of FP16 x (M, N): FP16 y, and its codes when `out` is given, in one pass."""
    if x.dim() != 2 or x.dtype != torch.float16:
        raise InputError(f"layernorm takes FP16 rows (M, N), got {x.dtype} {tuple(x.shape)}.")
    if not triton_ready(x):
        y = F.layer_norm(x.float(), (x.shape[1],), weight.float(), bias.float(), eps)
        q = None
        if out is not None:
            fmt = formats.get(out[0])
            q = fmt.saturate(y * fmt.inverse(out[1]))
        return _result(y.half(), q)
    m, n = x.shape
    kind, mul = _out_spec(out)
    y, q = _outputs((m, n), x.device, True, out)
    block_n = triton.next_power_of_2(n)
    block_m = max(1, 4096 // block_n)
    _layernorm_kernel[(triton.cdiv(m, block_m),)](x, weight, bias, y, q if q is not None else y, m, n, float(eps), mul,
                                                 OUT_KIND=kind, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=4)
    return _result(y, q)


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


def gemm_flops(m: int, n: int, k: int) -> float:
    """2mnk."""
    return 2.0 * m * n * k


def gelu_exact(x: torch.Tensor) -> torch.Tensor:
    """The erf GELU the kernels apply (BERT's), for references."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
