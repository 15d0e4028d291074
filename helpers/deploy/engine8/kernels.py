"""The engine's Triton kernels: an 8-bit GEMM and an 8-bit convolution with the epilogue fused (the row-wise
LayerNorm + quantize are in ``helpers.deploy.engine8.norm``).

Each kernel reads 8-bit codes, multiplies on the tensor cores (FP8 e4m3 or INT8, FP32/INT32 accumulation) and
finishes in registers before anything is written: ``y = acc * scale[n] + bias[n] (+ residual) -> activation``, then
writes FP16 ``y`` and/or its 8-bit codes for the next layer (``q = quantize(y, out_scale)``). That is TensorRT's
layer fusion: the dequantize, bias, activation, residual add and the next layer's quantize cost no extra pass over
memory.

    y = gemm(a, w, scale, bias=b, act="gelu", out=("fp8", s_next))         # (M, K) x (N, K)ᵀ
    y, q = conv(x, w, scale, bias=b, residual=r, act="relu", fp16=True, out=("fp8", s_next), stride=2, pad=1)
    q = conv(x, w, scale, residual=x8, residual_scale=s_x, act="relu", out=("int8", s_next))   # an 8-bit skip

The small helpers every kernel wrapper needs (``out_spec``, ``outputs``, ``result``, ``residual_spec``,
``exact_products`` and the Triton ``store_codes``) are public: ``norm`` builds its row-wise kernels on them.

Every function runs the Triton kernel on a CUDA tensor and the exact PyTorch reference (``*_reference``) elsewhere,
so the engine computes the same function on the CPU, only slower. Launches go to torch's current stream (a CUDA
graph can capture them).

Serves: core — used by chapter 9.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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

_ahead = {"on": False}  # inside compiling_ahead(): kernels are compiled, not run

# 'gelu': BERT's erf GELU; 'gelu_tanh': its tanh approximation (as TensorRT's BERT plugins and FasterTransformer use),
# within 4.8e-4 of erf's everywhere (tests/deploy/test_engine8.py), computed on the GPU with the hardware's
# tanh.approx instruction where the exact form calls libdevice's erf (the time each costs: the encoder docstring)
ACTS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3}
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): a safe default; tuned tables override it per shape.
DEFAULT_CONFIG = (128, 128, 128, 8, 8, 3)


def triton_ready(t: torch.Tensor) -> bool:
    """True when `t` lives on a CUDA GPU and Triton is installed (else the references run)."""
    return triton is not None and t.is_cuda


def out_spec(out: tuple[str, float] | None) -> tuple[int, float]:
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
                       act: str, fp16: bool, out: tuple[str, float] | None,
                       residual_scale: float | None = None) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The fused epilogue in PyTorch, in the kernels' order: scale, bias, residual (FP16, or codes times
    `residual_scale`), activation, then FP16 and codes."""
    y = acc.float() * scale.float()
    if bias is not None:
        y = y + bias.float()
    if residual is not None:
        y = y + (residual.float() if residual_scale is None else residual.float() * residual_scale)
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


def exact_products(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ w (N, K)ᵀ of codes, exact: float64 holds every INT8 sum and FP8 product exactly."""
    acc = a.double() @ w.double().t()
    return acc.round().to(torch.int32) if a.dtype == torch.int8 else acc.float()


if triton is not None:

    @triton.jit
    def _finish(acc, rm, rn, M, N, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul, res_mul,
                HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_CODES: tl.constexpr, ACT: tl.constexpr,
                WRITE_Y: tl.constexpr, OUT_KIND: tl.constexpr):
        """The fused epilogue on one (BLOCK_M, BLOCK_N) tile: scale, bias, residual (FP16, or 8-bit codes times
        res_mul), activation, FP16 and/or codes."""
        nmask = rn < N
        mask = (rm[:, None] < M) & nmask[None, :]
        y = acc.to(tl.float32) * tl.load(scale_ptr + rn, mask=nmask, other=0.0)[None, :]
        if HAS_BIAS:
            y += tl.load(bias_ptr + rn, mask=nmask, other=0.0)[None, :]
        offs = rm[:, None] * N + rn[None, :]
        if HAS_RES:
            r = tl.load(res_ptr + offs, mask=mask, other=0.0).to(tl.float32)
            if RES_CODES:
                r = r * res_mul
            y += r
        if ACT == 1:
            y = tl.maximum(y, 0.0)
        if ACT == 2:
            y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
        if ACT == 3:
            y = 0.5 * y * (1.0 + _tanh(0.7978845608028654 * (y + 0.044715 * y * y * y)))
        if WRITE_Y:
            tl.store(y_ptr + offs, y.to(tl.float16), mask=mask)
        store_codes(q_ptr + offs, y * out_mul, mask, OUT_KIND)

    @triton.jit
    def _tanh(x):
        """tanh through the GPU's one-instruction approximation (PTX ISA: maximum relative error 2**-10.987)."""
        return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x], dtype=tl.float32, is_pure=True,
                                         pack=1)

    @triton.jit
    def store_codes(ptrs, y, mask, OUT_KIND: tl.constexpr):
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
    def _gemm_kernel(a_ptr, w_ptr, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, M, N, K, out_mul, res_mul,
                     HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_CODES: tl.constexpr, ACT: tl.constexpr,
                     WRITE_Y: tl.constexpr,
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
        _finish(acc, rm, rn, M, N, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul, res_mul,
                HAS_BIAS, HAS_RES, RES_CODES, ACT, WRITE_Y, OUT_KIND)

    @triton.jit
    def _conv_kernel(x_ptr, w_ptr, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, NB, H, W, C, HO, WO, COUT, out_mul,
                     res_mul,
                     R: tl.constexpr, S: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                     HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_CODES: tl.constexpr, ACT: tl.constexpr,
                     WRITE_Y: tl.constexpr, OUT_KIND: tl.constexpr, INT_ACC: tl.constexpr,
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
        _finish(acc, rm, rn, M, COUT, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul, res_mul,
                HAS_BIAS, HAS_RES, RES_CODES, ACT, WRITE_Y, OUT_KIND)


def outputs(shape: tuple[int, ...], device: torch.device, fp16: bool, out: tuple[str, float] | None) -> tuple[Any, Any]:
    """Empty FP16 and code tensors for a kernel's results (None where not asked for)."""
    y = torch.empty(shape, dtype=torch.float16, device=device) if fp16 else None
    q = torch.empty(shape, dtype=formats.get(out[0]).dtype, device=device) if out is not None else None
    return y, q


def result(y: Any, q: Any) -> Any:
    """(y, q) when both were written, else the one that was."""
    return (y, q) if y is not None and q is not None else (y if y is not None else q)


def residual_spec(residual: torch.Tensor | None, residual_scale: float | None) -> tuple[bool, float]:
    """(residual is 8-bit codes, their scale) — or (False, 1.0) for an FP16 residual or none; an InputError when a
    residual's kind and its scale disagree."""
    if residual is None:
        return False, 1.0
    codes = residual.dtype in (torch.float8_e4m3fn, torch.int8)
    if codes != (residual_scale is not None) or (not codes and residual.dtype != torch.float16):
        raise InputError(f"a residual is FP16 (no residual_scale) or 8-bit codes with their residual_scale, got "
                         f"{residual.dtype} with residual_scale={residual_scale!r}.")
    return codes, 1.0 if residual_scale is None else float(residual_scale)


def _config(config: Any) -> tuple[int, ...]:
    """A kernel configuration (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages), DEFAULT_CONFIG for None."""
    if config is None:
        return DEFAULT_CONFIG
    if isinstance(config, str) or len(config) != 6 or not all(isinstance(v, int) for v in config):
        raise InputError(f"a kernel configuration is six whole numbers (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, "
                         f"stages), got {config!r}; a library GEMM ('cuBLASLt') runs through norm.lt_gemm instead.")
    return tuple(config)


def _launch_args(scale: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None,
                 y: Any, q: Any) -> tuple[Any, ...]:
    """Pointer arguments, with a harmless stand-in for the ones a flag switches off."""
    return (y if y is not None else scale, q if q is not None else scale, scale,
            bias if bias is not None else scale, residual if residual is not None else scale)


@contextlib.contextmanager
def compiling_ahead() -> Iterator[bool]:
    """Inside the block the kernels are compiled, not run: each ``gemm`` or ``conv`` call hands the compile of its
    kernel to a pool of threads (one per core, at most 16) and returns its outputs unwritten;
    leaving the block waits for every compile. A tuner's candidates are each a kernel of their own to compile (about
    a second each); compiled side by side on the host's cores they cost a fraction of that, and the tuner's loop
    afterwards only times. A compile that fails is left for the call that runs the kernel, which raises as usual.
    The block's value says whether calls only compile: False where this Triton has no AsyncCompileMode, or there is
    no Triton (then the block changes nothing: calls run)."""
    mode = getattr(triton, "AsyncCompileMode", None)  # Triton 3.4 and later
    if mode is None or _ahead["on"]:
        yield _ahead["on"]
        return
    with ThreadPoolExecutor(min(16, os.cpu_count() or 1), thread_name_prefix="triton-compile") as pool, \
            mode(pool, ignore_errors=True):
        _ahead["on"] = True
        try:
            yield True
        finally:
            _ahead["on"] = False


def _run(kernel: Any, grid: tuple[int, ...], *args: Any, **kw: Any) -> None:
    """Launch a Triton kernel on torch's current stream, or inside ``compiling_ahead`` only compile it."""
    if _ahead["on"]:
        kernel.warmup(*args, grid=grid, **kw)
    else:
        kernel[grid](*args, **kw)


def gemm(a: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, *, bias: torch.Tensor | None = None,
         residual: torch.Tensor | None = None, residual_scale: float | None = None, act: str = "none",
         fp16: bool | None = None, out: tuple[str, float] | None = None, config: tuple[int, ...] | None = None) -> Any:
    """epilogue(a (M, K) @ w (N, K)ᵀ): 8-bit codes in; FP16 and/or the next layer's codes out (see the module doc).

    `scale` (N,) float32 is s_a * s_w[n]; `bias` (N,) float32; `residual` (M, N) FP16, or 8-bit codes read as
    codes * `residual_scale`; `out` = (format, scale) of the codes to write; `fp16` (default: when no codes are
    asked for) writes the FP16 result too.
    """
    _check_codes(a, w, "gemm")
    if a.dim() != 2 or w.dim() != 2 or a.shape[1] != w.shape[1]:
        raise InputError(f"gemm needs a (M, K) and w (N, K) with the same K, got {tuple(a.shape)} and {tuple(w.shape)}.")
    if act not in ACTS:
        raise InputError(f"act must be one of {', '.join(ACTS)}, got {act!r}.")
    m, k = a.shape
    n = w.shape[0]
    fp16 = out is None if fp16 is None else fp16
    res_codes, res_mul = residual_spec(residual, residual_scale)
    bm, bn, bk, gm, warps, stages = _config(config)
    if not triton_ready(a):
        y, q = epilogue_reference(exact_products(a, w), scale, bias, residual, act, fp16, out, residual_scale)
        return result(y, q)
    kind, mul = out_spec(out)
    y, q = outputs((m, n), a.device, fp16, out)
    grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
    _run(_gemm_kernel, grid, a, w, *_launch_args(scale, bias, residual, y, q), m, n, k, mul, res_mul,
         HAS_BIAS=bias is not None, HAS_RES=residual is not None, RES_CODES=res_codes, ACT=ACTS[act], WRITE_Y=fp16,
         OUT_KIND=kind, INT_ACC=a.dtype == torch.int8, EVEN_K=k % bk == 0,
         BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages)
    return result(y, q)


def conv(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, *, stride: int | tuple[int, int] = 1,
         pad: int | tuple[int, int] = 0,
         bias: torch.Tensor | None = None, residual: torch.Tensor | None = None, residual_scale: float | None = None,
         act: str = "none", fp16: bool | None = None, out: tuple[str, float] | None = None,
         config: tuple[int, ...] | None = None) -> Any:
    """epilogue(conv2d(x, w)) on NHWC codes: x (N, H, W, C), w (Cout, R, S, C); residual (N, Ho, Wo, Cout) FP16,
    or codes read as codes * `residual_scale`.

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
    res_codes, res_mul = residual_spec(residual, residual_scale)
    bm, bn, bk, gm, warps, stages = _config(config)
    if not triton_ready(x):
        acc = F.conv2d(x.permute(0, 3, 1, 2).double(), w.permute(0, 3, 1, 2).double(), stride=(sh, sw), padding=(ph, pw))
        acc = acc.permute(0, 2, 3, 1).reshape(-1, cout)
        acc = acc.round().to(torch.int32) if x.dtype == torch.int8 else acc.float()
        res = None if residual is None else residual.reshape(-1, cout)
        y, q = epilogue_reference(acc, scale, bias, res, act, fp16, out, residual_scale)
        shape = (nb, ho, wo, cout)
        return result(None if y is None else y.reshape(shape), None if q is None else q.reshape(shape))
    kind, mul = out_spec(out)
    y, q = outputs((nb, ho, wo, cout), x.device, fp16, out)
    bk = min(bk, max(32, triton.next_power_of_2(c)))
    grid = (triton.cdiv(nb * ho * wo, bm) * triton.cdiv(cout, bn),)
    _run(_conv_kernel, grid, x, w, *_launch_args(scale, bias, residual, y, q), nb, h, wd, c, ho, wo, cout, mul, res_mul,
         R=r, S=s, SH=sh, SW=sw, PH=ph, PW=pw, HAS_BIAS=bias is not None, HAS_RES=residual is not None,
         RES_CODES=res_codes, ACT=ACTS[act], WRITE_Y=fp16, OUT_KIND=kind, INT_ACC=x.dtype == torch.int8,
         BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages)
    return result(y, q)


def gemm_flops(m: int, n: int, k: int) -> float:
    """2mnk."""
    return 2.0 * m * n * k
