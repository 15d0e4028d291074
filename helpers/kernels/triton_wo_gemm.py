"""Weight-only GEMMs for more than one row (W8A16, W4A16) and per-row activation quantization, in Triton.

Beyond batch 1 the same weight tile serves BLOCK_M rows, so the kernel unpacks a tile of codes to FP16
in registers and hands it to the tensor cores (`tl.dot`). With few rows the time is still the weight
bytes; with many rows the unpacking and the FP16 math dominate, and a GEMM on 8-bit activations
(W8A8 INT8 or FP8) wins. `quantize_rows` is the dynamic per-token quantization that W8A8 needs before
its GEMM: one program per row, amax, scale and codes in one pass.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.errors import InputError, NoGPUError
from helpers.kernels.triton_gemv import interpreting
from helpers.quant.weight_only import W4Weight, W8Weight

try:  # Triton comes with PyTorch's CUDA (Linux) wheels, not with the CPU wheel
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the wheel
    triton = None


if triton is not None:

    @triton.jit
    def _wo_gemm_kernel(a_ptr, w_ptr, s_ptr, c_ptr, M, N, K, KB, KG, KIND: tl.constexpr, GROUP: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        """C[M, N] = A[M, K] @ dequant(W)[N, K]^T, W as INT8 (KIND 1) or packed INT4 (KIND 2) bytes, KB a row."""
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
        for k0 in range(0, K, BLOCK_K):
            rk = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptr + rm[:, None] * K + rk[None, :], mask=rm[:, None] < M, other=0.0)
            if KIND == 1:  # a (BLOCK_K, BLOCK_N) tile of W^T, read along K (contiguous in memory)
                u = tl.load(w_ptr + rn[None, :] * KB + rk[:, None]).to(tl.int32)
                acc = tl.dot(a, (u - 128).to(tl.float16), acc)
            else:
                rb = k0 // 2 + tl.arange(0, BLOCK_K // 2)
                b = tl.load(w_ptr + rn[None, :] * KB + rb[:, None]).to(tl.int32)
                w = tl.reshape(tl.permute(tl.join(b & 0xF, b >> 4), (0, 2, 1)), (BLOCK_K, BLOCK_N))
                s = tl.load(s_ptr + rn * KG + k0 // GROUP).to(tl.float32)
                acc += tl.dot(a, (w - 8).to(tl.float16)) * s[None, :]
        if KIND == 1:
            acc = acc * tl.load(s_ptr + rn)[None, :]
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.float16), mask=rm[:, None] < M)

    @triton.jit
    def _quantize_rows_kernel(x_ptr, q_ptr, s_ptr, K, QMAX: tl.constexpr, FP8: tl.constexpr, BLOCK: tl.constexpr):
        """One row: s = max|x| / QMAX, q = x / s (rounded to INT8, or cast to FP8 E4M3)."""
        row = tl.program_id(0)
        r = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * K + r, mask=r < K, other=0.0).to(tl.float32)
        amax = tl.max(tl.abs(x), axis=0)
        s = tl.where(amax > 0, amax / QMAX, 1.0)
        v = x / s
        if FP8:
            q = v.to(tl.float8e4nv)
        else:
            q = ((v + 12582912.0) - 12582912.0).to(tl.int8)  # 1.5 * 2**23: rounds half to even
        tl.store(q_ptr + row * K + r, q, mask=r < K)
        tl.store(s_ptr + row, s)


def _require_triton(x: torch.Tensor, what: str) -> None:
    """Raise NoGPUError unless Triton and a CUDA tensor are here."""
    if triton is None or not (x.is_cuda or interpreting()):
        raise NoGPUError(what)


@dataclass(frozen=True)
class GemmWeight:
    """Codes as offset-binary bytes (INT8 (N, K), or INT4 two a byte (N, K/2)) with their scales."""

    kind: str
    codes: torch.Tensor
    scale: torch.Tensor
    n: int
    k: int
    group_size: int = 0


def prepare(w: W8Weight | W4Weight) -> GemmWeight:
    """A weight_only weight in the GEMM's layout: XOR 0x80 / 0x88 turns two's complement into offset binary."""
    if isinstance(w, W8Weight):
        return GemmWeight("w8", w.q.view(torch.uint8) ^ 0x80, w.scale.float().contiguous(), *w.q.shape)
    n, half = w.packed.shape
    return GemmWeight("w4", w.packed ^ 0x88, w.scale.half().contiguous(), n, 2 * half, w.group_size)


def wo_gemm(a: torch.Tensor, w: GemmWeight, block_m: int = 16, block_n: int = 64, block_k: int = 128,
            warps: int = 4, stages: int = 3) -> torch.Tensor:
    """FP16 A (M, K) times a W8 or W4 weight (from `prepare`), dequantized in registers."""
    if a.ndim != 2 or a.shape[1] != w.k or a.dtype != torch.float16:
        raise InputError(f"wo_gemm needs FP16 A (M, {w.k}), got {a.dtype} {tuple(a.shape)}.")
    _require_triton(a, "the Triton weight-only GEMM")
    m = a.shape[0]
    if w.n % block_n or w.k % block_k or (w.kind == "w4" and w.group_size % block_k):
        raise InputError(f"block_n={block_n} and block_k={block_k} must divide N={w.n} and K={w.k} "
                         "(and the INT4 group size).")
    c = torch.empty((m, w.n), dtype=torch.float16, device=a.device)
    grid = (triton.cdiv(m, block_m), w.n // block_n)
    _wo_gemm_kernel[grid](a.contiguous(), w.codes, w.scale, c, m, w.n, w.k, w.codes.shape[1], w.scale.shape[-1],
                          KIND=1 if w.kind == "w8" else 2,
                          GROUP=max(w.group_size, 1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                          num_warps=warps, num_stages=stages)
    return c


def quantize_rows(x: torch.Tensor, kind: str = "int8") -> tuple[torch.Tensor, torch.Tensor]:
    """Dynamic per-row (per-token) quantization of FP16 x (M, K): codes (int8 or float8_e4m3fn), scales (M, 1)."""
    if kind not in ("int8", "fp8") or x.ndim != 2:
        raise InputError(f"quantize_rows takes 2-D x and kind 'int8' or 'fp8', got {tuple(x.shape)}, {kind!r}.")
    _require_triton(x, "the Triton per-token quantization")
    m, k = x.shape
    dtype = torch.int8 if kind == "int8" else torch.float8_e4m3fn
    q = torch.empty((m, k), dtype=dtype, device=x.device)
    s = torch.empty((m, 1), dtype=torch.float32, device=x.device)
    _quantize_rows_kernel[(m,)](x.contiguous(), q, s, k, QMAX=127.0 if kind == "int8" else 448.0,
                                FP8=kind == "fp8", BLOCK=triton.next_power_of_2(k), num_warps=8)
    return q, s
