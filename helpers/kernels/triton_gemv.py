"""Batch-1 matrix-vector products (GEMV) that read FP16, INT8 or packed INT4 weights, written in Triton.

At batch 1 a Linear layer is a GEMV: every weight is read once and used for one multiply-add, so its
time is the weight bytes divided by the memory bandwidth. 8-bit weights read half the bytes of FP16, and
4-bit a quarter (plus one FP16 scale per group). These kernels dequantize in registers: the codes go
from memory straight into the multiply, and no dequantized copy of the weight is ever written.

Kernel layout (`gemv_words`): codes are stored offset-binary (q + 128 or q + 8) in int32 words of 4 bytes or
8 nibbles, reordered inside blocks of 16 words so that code i of word j holds element i * 16 + j of its block
(an INT4 block is one group of 128). The x values that meet code i of 16 neighbouring words are then 16
neighbouring floats: one vector load, not 16 scalar ones. A code u becomes a float with one OR and one
subtraction: the bits 0x4B000000 | u are the float 2**23 + u. Each program computes BLOCK_N outputs and walks
K in steps of BLOCK_K (several blocks, each INT4 block with its scale), keeping partial sums in registers.
Optional fusions, so that a decoder layer needs few kernels: an RMSNorm of x (its gain folded into the
weight), a residual add, and SwiGLU (gate and up rows in one weight, silu(gate) * up written out).

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from helpers.errors import InputError, NoGPUError
from helpers.quant.weight_only import W4Weight, W8Weight, unpack_int4
from helpers.validation import (require_choice, require_finite, require_float_tensor, require_instance,
                                require_int_range, require_int_tensor, require_positive, require_power_of_two,
                                require_size, require_values_in, require_vector)

try:  # Triton comes with PyTorch's CUDA (Linux) wheels, not with the CPU wheel
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the wheel
    triton = None

KINDS = ("fp16", "w8", "w4")
WPB = 16  # words per block of the kernel layout


def available() -> bool:
    """True when Triton is importable (kernels also need a GPU, or TRITON_INTERPRET=1 for the CPU)."""
    return triton is not None


def interpreting() -> bool:
    """True when TRITON_INTERPRET=1 runs kernels on the CPU (slow; for tests)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


@dataclass(frozen=True)
class GemvWeight:
    """A weight prepared for the kernels: its kind, device layout, scales, shape and group size."""

    kind: str
    data: torch.Tensor  # fp16 (N, K) | int32 (N, K/4) | int32 (N, K/8)
    scale: torch.Tensor | None  # fp32 (N,) | fp16 (N, K/G)
    n: int
    k: int
    group_size: int = 0

    @property
    def nbytes(self) -> int:
        """Bytes one GEMV reads for the weight (codes plus scales)."""
        extra = 0 if self.scale is None else self.scale.numel() * self.scale.element_size()
        return self.data.numel() * self.data.element_size() + extra


def gemv_words(q: torch.Tensor, bits: int) -> torch.Tensor:
    """Signed codes (N, K) in the kernel layout: int32 words (N, K * bits / 32), blocks of 16 words reordered."""
    require_choice(bits, (8, 4), "bits")
    require_int_tensor(q, "q", (2,), "quantize first (helpers.quant.weight_only).")
    require_values_in(q, -(1 << bits - 1), (1 << bits - 1) - 1, "q", f"quantize to {bits} bits first.")
    per = 32 // bits
    n, k = q.shape
    if k % (per * WPB):
        raise InputError(f"K={k} must be a multiple of {per * WPB} for the {bits}-bit kernel layout.")
    u = (q.to(torch.int16) + (1 << (bits - 1))).to(torch.uint8)  # offset binary
    u = u.reshape(n, k // (per * WPB), per, WPB).transpose(2, 3)  # (block, word j, code i) = element i*16 + j
    if bits == 4:
        u = u[..., 0::2] | (u[..., 1::2] << 4)  # two codes a byte, code 2b in the low nibble of byte b
    return u.contiguous().view(torch.int32).reshape(n, k // per)


def codes_from_words(words: torch.Tensor, bits: int) -> torch.Tensor:
    """Undo gemv_words: the signed codes (N, K) as int16."""
    require_choice(bits, (8, 4), "bits")
    require_int_tensor(words, "words", (2,), "pass what gemv_words returns.")
    if words.dtype != torch.int32 or words.shape[1] % WPB:
        raise InputError(f"words must be int32 (N, a multiple of {WPB}) as gemv_words returns them, got {words.dtype}.")
    per = 32 // bits
    n, kw = words.shape
    b = words.contiguous().view(torch.uint8).reshape(n, kw // WPB, WPB, 4).to(torch.int16)
    if bits == 4:
        b = torch.stack([b & 0xF, b >> 4], dim=-1).reshape(n, kw // WPB, WPB, 8)
    return b.transpose(2, 3).reshape(n, kw * per) - (1 << (bits - 1))


def prepare_fp16(w: torch.Tensor) -> GemvWeight:
    """An FP16 weight (N, K), contiguous."""
    require_float_tensor(w, "w", (2,), "a 2-D float weight (N, K)")
    require_finite(h := w.half(), "w as FP16 (|w| <= 65504)")
    return GemvWeight("fp16", h.contiguous(), None, w.shape[0], w.shape[1])


def prepare_w8(w: W8Weight) -> GemvWeight:
    """INT8 codes in the kernel layout, float32 per-channel scales."""
    require_instance(w, W8Weight, "w", "build it with helpers.quant.weight_only.quantize_w8(weight).")
    return GemvWeight("w8", gemv_words(w.q, 8), w.scale.float().contiguous(), *w.q.shape)


def prepare_w4(w: W4Weight) -> GemvWeight:
    """INT4 codes in the kernel layout (groups of 128), FP16 per-group scales."""
    require_instance(w, W4Weight, "w", "build it with helpers.quant.weight_only.quantize_w4(weight, 128).")
    if w.group_size != 8 * WPB:  # one block of 16 words
        raise InputError(f"the INT4 GEMV reads groups of 128, got group_size={w.group_size}; use quantize_w4(w, 128).")
    q = unpack_int4(w.packed)
    return GemvWeight("w4", gemv_words(q, 4), w.scale.half().contiguous(), *q.shape, w.group_size)


def reference(x: torch.Tensor, w: GemvWeight, *, norm_eps: float | None = None,
              residual: torch.Tensor | None = None, glu: bool = False) -> torch.Tensor:
    """What the kernels compute, in float32 PyTorch on x's device (slow, exact math)."""
    _check(x, w, norm_eps, residual, glu)
    if w.kind == "fp16":
        dense = w.data.float()
    elif w.kind == "w8":
        dense = codes_from_words(w.data, 8).float() * w.scale[:, None].float()
    else:
        dense = codes_from_words(w.data, 4).float() * w.scale.float().repeat_interleave(w.group_size, dim=1)
    v = x.float().reshape(-1)
    if norm_eps is not None:
        v = v * torch.rsqrt(v.pow(2).mean() + norm_eps)
    y = dense @ v
    if glu:
        half = w.n // 2
        y = torch.nn.functional.silu(y[:half]) * y[half:]
    if residual is not None:
        y = y + residual.float().reshape(-1)
    return y.to(torch.float16)


# Half2 dequantize-and-dot of one int32 word (inline PTX): (w >> 4i) & 0x000F000F | 0x64006400 is the FP16 pair
# (1024 + code i, 1024 + code i+4); subtracting 1024 + offset gives the signed codes exactly, and two FMAs
# run at once on each pair. $1 is the word, $2.. the x pairs packed as f16x2, $0 the float32 sum.
_DOT_W4_PTX = """{
.reg .b32 c, m, k, s, t<4>, a;
.reg .b16 lo, hi;
.reg .f32 fl, fh;
mov.b32 m, 0x000F000F;
mov.b32 c, 0x64006400;
mov.b32 k, 0x64086408;
lop3.b32 t0, $1, m, c, 0xEA;
shr.u32 s, $1, 4;
lop3.b32 t1, s, m, c, 0xEA;
shr.u32 s, $1, 8;
lop3.b32 t2, s, m, c, 0xEA;
shr.u32 s, $1, 12;
lop3.b32 t3, s, m, c, 0xEA;
sub.f16x2 t0, t0, k;
sub.f16x2 t1, t1, k;
sub.f16x2 t2, t2, k;
sub.f16x2 t3, t3, k;
mul.f16x2 a, t0, $2;
fma.rn.f16x2 a, t1, $3, a;
fma.rn.f16x2 a, t2, $4, a;
fma.rn.f16x2 a, t3, $5, a;
mov.b32 {lo, hi}, a;
cvt.f32.f16 fl, lo;
cvt.f32.f16 fh, hi;
add.f32 $0, fl, fh;
}"""
_DOT_W8_PTX = """{
.reg .b32 c, m, k, s, t<2>, a;
.reg .b16 lo, hi;
.reg .f32 fl, fh;
mov.b32 m, 0x00FF00FF;
mov.b32 c, 0x64006400;
mov.b32 k, 0x64806480;
lop3.b32 t0, $1, m, c, 0xEA;
shr.u32 s, $1, 8;
lop3.b32 t1, s, m, c, 0xEA;
sub.f16x2 t0, t0, k;
sub.f16x2 t1, t1, k;
mul.f16x2 a, t0, $2;
fma.rn.f16x2 a, t1, $3, a;
mov.b32 {lo, hi}, a;
cvt.f32.f16 fl, lo;
cvt.f32.f16 fh, hi;
add.f32 $0, fl, fh;
}"""

if triton is not None:
    _W4_ASM = tl.constexpr(_DOT_W4_PTX)
    _W8_ASM = tl.constexpr(_DOT_W8_PTX)

    @triton.jit
    def _codes(words, i: tl.constexpr, BITS: tl.constexpr, MATH: tl.constexpr):
        """Code number i of each int32 word, as float32 (offset removed): int convert, or the 2**23 trick."""
        mask: tl.constexpr = (1 << BITS) - 1
        offset: tl.constexpr = 1 << (BITS - 1)
        u = (words >> (i * BITS)) & mask
        if MATH == 0:
            return u.to(tl.float32) - offset
        return (u | 0x4B000000).to(tl.float32, bitcast=True) - (8388608.0 + offset)

    @triton.jit
    def _half2(lo, hi):
        """Two float32 tensors as one int32 tensor of FP16 pairs (lo in the low half)."""
        return tl.inline_asm_elementwise("cvt.rn.f16x2.f32 $0, $2, $1;", "=r,r,r", [lo, hi], dtype=tl.int32,
                                         is_pure=True, pack=1)

    @triton.jit
    def _load(ptrs, mask, EVEN: tl.constexpr):
        """tl.load, masked (zeros outside) unless EVEN says every address is inside."""
        if EVEN:
            v = tl.load(ptrs)
        else:
            v = tl.load(ptrs, mask=mask, other=0)
        return v

    @triton.jit
    def _fp16_rows(x_ptr, w_ptr, rows, K, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EVEN_K: tl.constexpr):
        """sum_k W[rows, k] x[k] for FP16 weights."""
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_N, BLOCK_K), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            inside = k0 + rk < K
            w = _load(w_ptr + rows[:, None] * K + (k0 + rk)[None, :], inside[None, :], EVEN_K).to(tl.float32)
            acc += w * _load(x_ptr + k0 + rk, inside, EVEN_K).to(tl.float32)[None, :]
        return tl.sum(acc, axis=1)

    @triton.jit
    def _word_dots(words, x_ptr, base, BITS: tl.constexpr, MATH: tl.constexpr, inside, EVEN_K: tl.constexpr):
        """Each word's codes times their x values, summed per word (float32, shape of words)."""
        PER: tl.constexpr = 32 // BITS
        if MATH == 2:  # half2 PTX: x values paired (i, i + PER / 2), as the PTX unpacks the codes
            x0 = _load(x_ptr + base, inside, EVEN_K).to(tl.float32)
            x1 = _load(x_ptr + base + 16, inside, EVEN_K).to(tl.float32)
            x2 = _load(x_ptr + base + 32, inside, EVEN_K).to(tl.float32)
            x3 = _load(x_ptr + base + 48, inside, EVEN_K).to(tl.float32)
            if BITS == 4:
                x4 = _load(x_ptr + base + 64, inside, EVEN_K).to(tl.float32)
                x5 = _load(x_ptr + base + 80, inside, EVEN_K).to(tl.float32)
                x6 = _load(x_ptr + base + 96, inside, EVEN_K).to(tl.float32)
                x7 = _load(x_ptr + base + 112, inside, EVEN_K).to(tl.float32)
                part = tl.inline_asm_elementwise(
                    _W4_ASM, "=r,r,r,r,r,r",
                    [words, _half2(x0, x4), _half2(x1, x5), _half2(x2, x6), _half2(x3, x7)],
                    dtype=tl.float32, is_pure=True, pack=1)
            else:
                part = tl.inline_asm_elementwise(_W8_ASM, "=r,r,r,r", [words, _half2(x0, x2), _half2(x1, x3)],
                                                 dtype=tl.float32, is_pure=True, pack=1)
        else:
            part = tl.zeros(words.shape, tl.float32)
            for i in tl.static_range(PER):
                xi = _load(x_ptr + base + 16 * i, inside, EVEN_K).to(tl.float32)
                part += _codes(words, i, BITS, MATH) * xi
        return part

    @triton.jit
    def _coded_rows(x_ptr, w_ptr, s_ptr, rows, K, KW, KG, BITS: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr, MATH: tl.constexpr, EVEN_K: tl.constexpr):
        """sum_k W[rows, k] x[k] for codes in the kernel layout; INT4 (BITS 4) scales each block (group)."""
        PER: tl.constexpr = 32 // BITS
        ELEMS: tl.constexpr = PER * 16  # elements per block of 16 words
        NB: tl.constexpr = BLOCK_K // ELEMS
        rb = tl.arange(0, NB)
        rj = tl.arange(0, 16)
        woff = rb[:, None] * 16 + rj[None, :]  # word (block, j) of the step
        xoff = rb[:, None] * ELEMS + rj[None, :]  # element of code 0 of that word; code i adds 16 * i
        acc = tl.zeros((BLOCK_N, NB, 16), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            inside = k0 + xoff < K  # whole blocks: K is a multiple of ELEMS
            words = _load(w_ptr + rows[:, None, None] * KW + (k0 // PER + woff)[None, :, :], inside[None, :, :],
                          EVEN_K)
            part = _word_dots(words, x_ptr, (k0 + xoff)[None, :, :], BITS, MATH, inside[None, :, :], EVEN_K)
            if BITS == 4:
                s = _load(s_ptr + rows[:, None] * KG + (k0 // ELEMS + rb)[None, :], (k0 + rb * ELEMS < K)[None, :],
                          EVEN_K).to(tl.float32)
                part = part * s[:, :, None]
            acc += part
        y = tl.sum(tl.sum(acc, axis=2), axis=1)
        if BITS == 8:
            y = y * tl.load(s_ptr + rows)
        return y

    @triton.jit
    def _rows_dot(x_ptr, w_ptr, s_ptr, rows, K, KW, KG, KIND: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, MATH: tl.constexpr, EVEN_K: tl.constexpr):
        """The dot products of the given weight rows with x, for any weight kind."""
        if KIND == 0:
            y = _fp16_rows(x_ptr, w_ptr, rows, K, BLOCK_N, BLOCK_K, EVEN_K)
        else:
            y = _coded_rows(x_ptr, w_ptr, s_ptr, rows, K, KW, KG, 8 if KIND == 1 else 4, BLOCK_N, BLOCK_K,
                            MATH, EVEN_K)
        return y

    @triton.jit
    def _gemv_kernel(x_ptr, w_ptr, s_ptr, y_ptr, r_ptr, N, K, KW, KG, eps,
                     KIND: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                     NORM: tl.constexpr, RESID: tl.constexpr, GLU: tl.constexpr, MATH: tl.constexpr,
                     EVEN_K: tl.constexpr):
        """y[n] = sum_k W[n, k] x[k] (with the optional RMSNorm, SwiGLU and residual fusions)."""
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
        y = _rows_dot(x_ptr, w_ptr, s_ptr, rows, K, KW, KG, KIND, BLOCK_N, BLOCK_K, MATH, EVEN_K)
        if NORM:
            rk = tl.arange(0, BLOCK_K)
            sq = tl.zeros((BLOCK_K,), tl.float32)
            for k0 in range(0, K, BLOCK_K):
                xv = _load(x_ptr + k0 + rk, k0 + rk < K, EVEN_K).to(tl.float32)
                sq += xv * xv
            y = y / tl.sqrt(tl.sum(sq, axis=0) / K + eps)
        if GLU:
            up = _rows_dot(x_ptr, w_ptr, s_ptr, rows + N, K, KW, KG, KIND, BLOCK_N, BLOCK_K, MATH, EVEN_K)
            if NORM:
                up = up / tl.sqrt(tl.sum(sq, axis=0) / K + eps)
            y = y / (1.0 + tl.exp(-y)) * up
        if RESID:
            y += tl.load(r_ptr + rows).to(tl.float32)
        tl.store(y_ptr + rows, y.to(tl.float16))


@dataclass(frozen=True)
class Config:
    """Launch parameters: outputs per program, K per step, warps, stages, code math (0 convert, 1 2**23, 2 half2)."""

    block_n: int = 16
    block_k: int = 256
    warps: int = 4
    stages: int = 3
    math: int = 1

    def __post_init__(self) -> None:
        """Tile sizes and warps powers of 2, stages >= 1, math 0 (convert), 1 (the 2**23 trick) or 2 (half2)."""
        for name, high in (("block_n", 1 << 16), ("block_k", 1 << 16), ("warps", 32)):
            require_power_of_two(getattr(self, name), name, high)
        require_size(self.stages, "stages")
        require_int_range(self.math, 0, 2, "math")


def default_config(w: GemvWeight) -> Config:
    """A launch configuration for this weight (tuned on an H200; see chapter 12's benchmark)."""
    _check_weight(w)
    math = 1 if interpreting() else 2  # the interpreter cannot run inline PTX
    block_n, warps = {"fp16": (4, 4), "w8": (2, 4), "w4": (8, 8)}[w.kind]  # fastest on an H200 at 7B shapes
    return Config(block_n=block_n, block_k=1024, warps=warps, stages=3, math=math)


def _check_weight(w: GemvWeight) -> None:
    """A GemvWeight whose data and scales have the shapes and dtypes of its kind (metadata only: no GPU sync)."""
    want = {"fp16": (torch.float16, (w.n, w.k), None), "w8": (torch.int32, (w.n, w.k // 4), (w.n,)),
            "w4": (torch.int32, (w.n, w.k // 8), (w.n, w.k // 128))}.get(w.kind) if isinstance(w, GemvWeight) else None
    if want is None or (getattr(w.data, "dtype", None), getattr(w.data, "shape", None), getattr(w.scale, "shape", None)) \
            != want or (w.kind == "w4") != (w.group_size == 128):
        raise InputError(f"w must be a GemvWeight in the layout of its kind ({', '.join(KINDS)}), got {type(w).__name__} "
                         f"{getattr(w, 'kind', None)!r}; build it with prepare_fp16, prepare_w8 or prepare_w4.")


def _check(x: torch.Tensor, w: GemvWeight, norm_eps: float | None, residual: torch.Tensor | None, glu: bool,
           cfg: Config | None = None, out: torch.Tensor | None = None) -> int:
    """Validate the weight, x, the fusions' arguments, the config's tiling and `out` (metadata only): N out."""
    _check_weight(w)
    require_vector(x, "x", w.k, torch.float16, w.data.device, "this kernel is for batch 1 (use a GEMM for more rows).")
    if norm_eps is not None:
        require_positive(norm_eps, "norm_eps")
    if not isinstance(glu, bool) or (glu and w.n % 2):
        raise InputError(f"glu must be True or False, True with an even N (gate rows, then up), got {glu!r}, N={w.n}.")
    n = w.n // 2 if glu else w.n
    if residual is not None:
        require_vector(residual, "residual", n, None, x.device, "pass the vector the output is added to.")
    if out is not None:
        require_vector(out, "out", n, torch.float16, x.device, "or leave out=None.", contiguous=True)
    step = {"fp16": 1, "w8": 64, "w4": 128}[w.kind]  # elements per block of the kernel layout
    if cfg is not None and (w.k % step or n % cfg.block_n or cfg.block_k % step):
        raise InputError(f"config {cfg} does not tile N={n}, K={w.k} (K and block_k must be multiples of {step}).")
    return n


def gemv(x: torch.Tensor, w: GemvWeight, *, norm_eps: float | None = None, residual: torch.Tensor | None = None,
         glu: bool = False, config: Config | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """y = W x (FP16 out) for one FP16 vector x, with optional fused RMSNorm of x, SwiGLU and residual."""
    if config is not None and not isinstance(config, Config):
        raise InputError(f"config must be a Config, got {type(config).__name__}; e.g. Config(block_n=4, block_k=1024).")
    cfg = config if config is not None else default_config(w)
    n = _check(x, w, norm_eps, residual, glu, cfg, out)
    if triton is None or not (x.is_cuda or interpreting()):
        raise NoGPUError("the Triton GEMV kernels (Triton ships with torch's CUDA wheels)")
    x, residual = x.contiguous(), None if residual is None else residual.contiguous()  # read as flat vectors
    y = out if out is not None else torch.empty(n, dtype=torch.float16, device=x.device)
    scale = w.scale if w.scale is not None else w.data
    _gemv_kernel[(n // cfg.block_n,)](
        x, w.data, scale, y, residual if residual is not None else y, n, w.k, w.data.shape[1],
        w.scale.shape[1] if w.kind == "w4" else 1, 1e-5 if norm_eps is None else norm_eps,
        KIND=KINDS.index(w.kind), BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, NORM=norm_eps is not None, RESID=residual is not None,
        GLU=glu, MATH=cfg.math, EVEN_K=w.k % cfg.block_k == 0, num_warps=cfg.warps, num_stages=cfg.stages)
    return y

