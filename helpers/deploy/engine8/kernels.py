"""The engine's 8-bit GEMM with its epilogue fused, and what every engine kernel shares (the convolution is in
``helpers.deploy.engine8.convolution``, the row-wise LayerNorm + quantize in ``helpers.deploy.engine8.norm``).

Each kernel reads 8-bit codes, multiplies on the tensor cores (FP8 e4m3 or INT8, FP32/INT32 accumulation) and
finishes in registers before anything is written: ``y = acc * scale[n] + bias[n] (+ residual) -> activation``, then
writes FP16 ``y`` and/or its 8-bit codes for the next layer (``q = quantize(y, out_scale)``). That is TensorRT's
layer fusion: the dequantize, bias, activation, residual add and the next layer's quantize cost no extra pass over
memory.

    y = gemm(a, w, scale, bias=b, act="gelu", out=("fp8", s_next))         # (M, K) x (N, K)ᵀ
    y = gemm(a, w, scale, bias=b, config=(128, 128, 128, 8, 8, 3, "tma"))   # operand tiles loaded by the TMA unit

The GEMM loads its operand tiles with every thread's loads (any NVIDIA GPU Triton supports) or, on Hopper and later,
with the tensor memory accelerator (``LOADS``): one instruction copies a whole tile to shared memory, which leaves
the threads free for the multiply; the tuner times both (``helpers.chapters.ch09_deployment.engine_tune``).

The helpers every kernel wrapper needs (``out_spec``, ``outputs``, ``result``, ``residual_spec``, ``exact_products``,
``launch`` and the Triton ``tile``, ``mma``, ``finish``, ``store_codes``) are public: ``convolution`` and ``norm``
build on them.

Every function runs the Triton kernel on a CUDA tensor and the exact PyTorch reference (``*_reference``) elsewhere,
so the engine computes the same function on the CPU, only slower. Launches go to torch's current stream (a CUDA
graph can capture them).

Serves: core — used by chapter 9.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import torch

from helpers.deploy.engine8 import formats
from helpers.errors import InputError

try:  # Triton comes with PyTorch's CUDA wheels, not with the CPU wheel
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the wheel
    triton = None
try:  # host-side TMA descriptors: Triton 3.3 and later
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - depends on the wheel
    TensorDescriptor = None

_ahead = {"on": False}  # inside compiling_ahead(): kernels are compiled, not run

# 'gelu': BERT's erf GELU; 'gelu_tanh': its tanh approximation (as TensorRT's BERT plugins and FasterTransformer use),
# within 4.8e-4 of erf's everywhere (tests/deploy/test_engine8.py), computed on the GPU with the hardware's
# tanh.approx instruction where the exact form calls libdevice's erf (the time each costs: the encoder docstring)
ACTS = {"none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3}
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): a safe default; tuned tables override it per shape.
DEFAULT_CONFIG = (128, 128, 128, 8, 8, 3)
# An optional seventh element of a GEMM configuration: its operand tiles loaded by the TMA unit (Hopper and later),
# one output tile a program ('tma'), or one program an SM walking the tiles ('tma persistent')
LOADS = ("tma", "tma persistent")


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


def check_codes(a: torch.Tensor, w: torch.Tensor, what: str) -> None:
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
    def finish(acc, rm, rn, M, N, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul, res_mul,
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
    def mma(a, b, acc, INT_ACC: tl.constexpr):
        """acc += a @ b on the tensor cores (INT32 accumulation for INT8 codes, FP32 for FP8)."""
        if INT_ACC:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        else:
            acc = tl.dot(a, b, acc)
        return acc

    @triton.jit
    def tile(t, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
        """The first row and column of output tile `t`, in grouped order (neighbouring tiles share weight tiles in
        L2)."""
        num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        group = GROUP_M * num_n
        first_m = (t // group) * GROUP_M
        rows = min(num_m - first_m, GROUP_M)
        return (first_m + (t % group) % rows) * BLOCK_M, ((t % group) // rows) * BLOCK_N

    @triton.jit
    def _gemm_kernel(a_ptr, w_ptr, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, M, N, K, out_mul, res_mul,
                     HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_CODES: tl.constexpr, ACT: tl.constexpr,
                     WRITE_Y: tl.constexpr,
                     OUT_KIND: tl.constexpr, INT_ACC: tl.constexpr, EVEN_K: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        """Y = epilogue(A (M, K) @ W (N, K)ᵀ), both row-major 8-bit codes (K-major, as the tensor cores want)."""
        om, on = tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
        rm, rn, rk = om + tl.arange(0, BLOCK_M), on + tl.arange(0, BLOCK_N), tl.arange(0, BLOCK_K)
        a = a_ptr + (rm % M)[:, None] * K + rk[None, :]
        b = w_ptr + (rn % N)[None, :] * K + rk[:, None]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if INT_ACC else tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                acc = mma(tl.load(a), tl.load(b), acc, INT_ACC)
            else:
                left = K - k * BLOCK_K
                acc = mma(tl.load(a, mask=rk[None, :] < left, other=0.0),
                          tl.load(b, mask=rk[:, None] < left, other=0.0), acc, INT_ACC)
            a += BLOCK_K
            b += BLOCK_K
        finish(acc, rm, rn, M, N, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul, res_mul,
               HAS_BIAS, HAS_RES, RES_CODES, ACT, WRITE_Y, OUT_KIND)

    @triton.jit
    def _tma_tile(t, a_desc, w_desc, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, M, N, K, out_mul, res_mul,
                  HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_CODES: tl.constexpr, ACT: tl.constexpr,
                  WRITE_Y: tl.constexpr, OUT_KIND: tl.constexpr, INT_ACC: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        """Output tile `t` of the GEMM, its operand tiles brought to shared memory by the TMA unit (descriptors:
        one instruction a tile, zeros past the edges) instead of every thread's loads."""
        om, on = tile(t, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if INT_ACC else tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            acc = mma(a_desc.load([om, k * BLOCK_K]), w_desc.load([on, k * BLOCK_K]).T, acc, INT_ACC)
        finish(acc, om + tl.arange(0, BLOCK_M), on + tl.arange(0, BLOCK_N), M, N, scale_ptr, bias_ptr, res_ptr, y_ptr,
               q_ptr, out_mul, res_mul, HAS_BIAS, HAS_RES, RES_CODES, ACT, WRITE_Y, OUT_KIND)

    @triton.jit
    def _gemm_tma_kernel(a_desc, w_desc, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, M, N, K, out_mul, res_mul,
                         PROGRAMS, HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_CODES: tl.constexpr,
                         ACT: tl.constexpr, WRITE_Y: tl.constexpr, OUT_KIND: tl.constexpr, INT_ACC: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                         PERSISTENT: tl.constexpr):
        """The GEMM with TMA loads: one tile a program, or (PERSISTENT) `PROGRAMS` programs, one per SM, each
        walking the tiles (the next tile's loads start while this one finishes its epilogue)."""
        if PERSISTENT:
            for t in tl.range(tl.program_id(0), tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N), PROGRAMS, flatten=True):
                _tma_tile(t, a_desc, w_desc, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, M, N, K, out_mul, res_mul,
                          HAS_BIAS, HAS_RES, RES_CODES, ACT, WRITE_Y, OUT_KIND, INT_ACC, BLOCK_M, BLOCK_N, BLOCK_K,
                          GROUP_M)
        else:
            _tma_tile(tl.program_id(0), a_desc, w_desc, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, M, N, K, out_mul,
                      res_mul, HAS_BIAS, HAS_RES, RES_CODES, ACT, WRITE_Y, OUT_KIND, INT_ACC, BLOCK_M, BLOCK_N,
                      BLOCK_K, GROUP_M)


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


def config_tuple(config: Any, tma: bool = False) -> tuple[tuple[int, ...], str | None]:
    """(BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages) of a kernel configuration (DEFAULT_CONFIG for
    None) and its loads: None (each thread loads its share) or, where `tma` allows (the GEMM), one of ``LOADS``."""
    if config is None:
        return DEFAULT_CONFIG, None
    ok = not isinstance(config, str) and len(config) in (6, 7) and all(isinstance(v, int) for v in config[:6])
    if not ok or (len(config) == 7 and (not tma or config[6] not in LOADS)):
        raise InputError(f"a kernel configuration is six whole numbers (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, warps, "
                         f"stages){', then optionally one of ' + ', '.join(map(repr, LOADS)) if tma else ''}, got "
                         f"{config!r}; a library GEMM ('cuBLASLt') runs through norm.lt_gemm instead.")
    return tuple(config[:6]), (config[6] if len(config) == 7 else None)


def tma_ready(t: torch.Tensor) -> bool:
    """True when `t` is on a GPU with a TMA unit (compute capability 9.0 or later) and Triton has tensor descriptors."""
    return triton_ready(t) and TensorDescriptor is not None and torch.cuda.get_device_capability(t.device)[0] >= 9


@functools.lru_cache(maxsize=None)
def _sms(device: torch.device) -> int:
    """The GPU's streaming multiprocessors (a persistent kernel runs one program on each)."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def pointer_args(scale: torch.Tensor, bias: torch.Tensor | None, residual: torch.Tensor | None,
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


def launch(kernel: Any, grid: tuple[int, ...], *args: Any, **kw: Any) -> Any:
    """Launch a Triton kernel on torch's current stream, or inside ``compiling_ahead`` only compile it; the compiled
    kernel (its PTX in ``.asm['ptx']``)."""
    if _ahead["on"]:
        return kernel.warmup(*args, grid=grid, **kw)
    return kernel[grid](*args, **kw)


def gemm(a: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, *, bias: torch.Tensor | None = None,
         residual: torch.Tensor | None = None, residual_scale: float | None = None, act: str = "none",
         fp16: bool | None = None, out: tuple[str, float] | None = None, config: tuple[int, ...] | None = None,
         compiled: bool = False) -> Any:
    """epilogue(a (M, K) @ w (N, K)ᵀ): 8-bit codes in; FP16 and/or the next layer's codes out (see the module doc).

    `scale` (N,) float32 is s_a * s_w[n]; `bias` (N,) float32; `residual` (M, N) FP16, or 8-bit codes read as
    codes * `residual_scale`; `out` = (format, scale) of the codes to write; `fp16` (default: when no codes are
    asked for) writes the FP16 result too. `compiled`: return the Triton kernel it launched instead (on a GPU; its
    PTX in ``.asm['ptx']``, read by ``helpers.deploy.engine8.ptx``).
    """
    check_codes(a, w, "gemm")
    if a.dim() != 2 or w.dim() != 2 or a.shape[1] != w.shape[1]:
        raise InputError(f"gemm needs a (M, K) and w (N, K) with the same K, got {tuple(a.shape)} and {tuple(w.shape)}.")
    if act not in ACTS:
        raise InputError(f"act must be one of {', '.join(ACTS)}, got {act!r}.")
    m, k = a.shape
    n = w.shape[0]
    fp16 = out is None if fp16 is None else fp16
    res_codes, res_mul = residual_spec(residual, residual_scale)
    (bm, bn, bk, gm, warps, stages), loads = config_tuple(config, tma=True)
    if not triton_ready(a):
        if compiled:
            raise InputError("gemm(compiled=True) returns the Triton kernel a GPU runs; this tensor runs the PyTorch "
                             "reference (no CUDA GPU or no Triton). Move the operands to the GPU first.")
        y, q = epilogue_reference(exact_products(a, w), scale, bias, residual, act, fp16, out, residual_scale)
        return result(y, q)
    if loads and not tma_ready(a):
        raise InputError(f"{loads!r} loads need a GPU of compute capability 9.0 or later (Hopper) and a Triton with "
                         f"tensor descriptors; use the configuration without its seventh element.")
    if loads and k % 16:  # 16 bytes of 8-bit codes; FP16 is held to the same K (its TMA path is tested at those only)
        raise InputError(f"TMA loads need K a multiple of 16 (rows of whole 16-byte pieces of 8-bit codes), got "
                         f"K = {k}; use the configuration without {loads!r}.")
    kind, mul = out_spec(out)
    y, q = outputs((m, n), a.device, fp16, out)
    flags = dict(HAS_BIAS=bias is not None, HAS_RES=residual is not None, RES_CODES=res_codes, ACT=ACTS[act],
                 WRITE_Y=fp16, OUT_KIND=kind, INT_ACC=a.dtype == torch.int8,
                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages)
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    if loads:
        progs = min(tiles, _sms(a.device)) if loads == "tma persistent" else tiles
        kernel = launch(_gemm_tma_kernel, (progs,), TensorDescriptor.from_tensor(a, [bm, bk]),
                        TensorDescriptor.from_tensor(w, [bn, bk]), *pointer_args(scale, bias, residual, y, q), m, n,
                        k, mul, res_mul, progs, PERSISTENT=loads == "tma persistent", **flags)
    else:
        kernel = launch(_gemm_kernel, (tiles,), a, w, *pointer_args(scale, bias, residual, y, q), m, n, k, mul,
                        res_mul, EVEN_K=k % bk == 0, **flags)
    return kernel if compiled else result(y, q)


def gemm_flops(m: int, n: int, k: int) -> float:
    """2mnk."""
    return 2.0 * m * n * k
