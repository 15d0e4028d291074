"""An INT8 GEMM with the dequantization fused into its epilogue, written in Triton.

``torch._int_mm`` (cuBLASLt) writes its int32 accumulators to memory; a second kernel reads
them back, multiplies by ``s_x * s_w[n]``, adds the bias and writes FP16. For a BERT-base
feed-forward GEMM (M=4096, K=768, N=3072) that round trip moves 100 MB of int32: about 20 us at
the H200's ~4.8 TB/s, roughly what the 19 GOP GEMM itself takes at the ~935 TOPS ``_int_mm``
reaches at 8192³ in chapter 2 (``ch02.gemm_tflops.int8.n8192``), and less than it takes at this smaller shape (an estimate, not a
measurement of this kernel). Here one kernel does
everything: int8 x int8 -> int32 in the tensor cores, then
``acc * out_scale[n] + bias[n]`` in registers, and only the FP16/BF16 result is written.

The kernel is wrapped as the PyTorch operator ``workbook::int8_linear`` so that
``torch.compile`` treats it as one opaque call and still fuses the activation quantization
into the operation before it (LayerNorm, GELU). It needs a CUDA GPU and Triton, which ships
with PyTorch's CUDA wheels; ``available()`` says whether both are here.

Serves: core — used by chapters 9–12 and lab 08.
"""

from __future__ import annotations

import torch

from helpers.errors import InputError, NoGPUError

try:  # Triton comes with PyTorch's CUDA (Linux) wheels, not with the CPU wheel
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the wheel
    triton = None


def available() -> bool:
    """True when a CUDA GPU and Triton are both present."""
    return triton is not None and torch.cuda.is_available()


def reference(q: torch.Tensor, w: torch.Tensor, out_scale: torch.Tensor,
              bias: torch.Tensor | None, out_dtype: torch.dtype) -> torch.Tensor:
    """What the fused kernel computes, in plain int32/float32 PyTorch (any device, slow)."""
    acc = (q.cpu().to(torch.int32) @ w.cpu().to(torch.int32).t()).to(q.device)  # CUDA has no int32 matmul
    y = acc.float() * out_scale.float()
    return (y if bias is None else y + bias.float()).to(out_dtype)


def _check(q: torch.Tensor, w: torch.Tensor, out_scale: torch.Tensor, bias: torch.Tensor | None) -> None:
    """Shapes and dtypes the kernel needs, or an InputError that names the one that is wrong."""
    if q.dtype != torch.int8 or w.dtype != torch.int8:
        raise InputError(f"int8_linear multiplies int8 by int8, got {q.dtype} and {w.dtype}; "
                         "quantize first (helpers.deploy.torch_int8.quantize_act).")
    if q.dim() != 2 or w.dim() != 2 or q.shape[1] != w.shape[1]:
        raise InputError(f"int8_linear needs q (M, K) and w (N, K) with the same K, got "
                         f"{tuple(q.shape)} and {tuple(w.shape)}.")
    if out_scale.shape != (w.shape[0],) or (bias is not None and bias.shape != (w.shape[0],)):
        raise InputError(f"out_scale and bias must have one value per output channel ({w.shape[0]}).")


if triton is not None:
    _CONFIGS = [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for bm, bn, bk, s, w in (
            (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (128, 128, 128, 4, 8), (128, 128, 64, 4, 4),
            (128, 256, 64, 4, 8), (64, 256, 128, 4, 4), (128, 64, 128, 4, 4), (64, 128, 64, 4, 4),
        )
    ]

    @triton.autotune(configs=_CONFIGS, key=["M", "N", "K"])
    @triton.jit
    def _int8_linear_kernel(a_ptr, b_ptr, c_ptr, scale_ptr, bias_ptr, M, N, K,
                            stride_am, stride_ak, stride_bn, stride_bk, stride_cm, stride_cn,
                            HAS_BIAS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                            BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        """C[M, N] = (A[M, K] @ B[N, K]^T) * scale[N] + bias[N], int32 accumulation."""
        pid = tl.program_id(0)
        num_m, num_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        group = GROUP_M * num_n  # grouped ordering: neighbouring programs share B tiles in L2
        first_m = (pid // group) * GROUP_M
        rows = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (pid % group) % rows
        pid_n = (pid % group) // rows
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        a = a_ptr + (rm % M)[:, None] * stride_am + rk[None, :] * stride_ak
        b = b_ptr + rk[:, None] * stride_bk + (rn % N)[None, :] * stride_bn
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            left = K - k * BLOCK_K
            acc = tl.dot(tl.load(a, mask=rk[None, :] < left, other=0),
                         tl.load(b, mask=rk[:, None] < left, other=0), acc, out_dtype=tl.int32)
            a += BLOCK_K * stride_ak
            b += BLOCK_K * stride_bk
        y = acc.to(tl.float32) * tl.load(scale_ptr + rn, mask=rn < N, other=0.0)[None, :]
        if HAS_BIAS:
            y += tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]
        c = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
        tl.store(c, y.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


@torch.library.custom_op("workbook::int8_linear", mutates_args=())
def int8_linear(q: torch.Tensor, w: torch.Tensor, out_scale: torch.Tensor, bias: torch.Tensor | None,
                out_dtype: torch.dtype) -> torch.Tensor:
    """(q int8 (M, K) @ w int8 (N, K)ᵀ) * out_scale[n] + bias[n], as `out_dtype`, in one Triton kernel."""
    _check(q, w, out_scale, bias)
    if not available():
        raise NoGPUError("the fused Triton INT8 GEMM (it also needs Triton, shipped with torch's CUDA wheels)")
    m, k = q.shape
    n = w.shape[0]
    out = torch.empty((m, n), dtype=out_dtype, device=q.device)
    scale = out_scale.float().contiguous()
    b = bias.float().contiguous() if bias is not None else scale  # unused when HAS_BIAS is False

    def grid(meta: dict) -> tuple[int]:
        """One program per output tile."""
        return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

    _int8_linear_kernel[grid](q, w, out, scale, b, m, n, k, q.stride(0), q.stride(1), w.stride(0), w.stride(1),
                              out.stride(0), out.stride(1), HAS_BIAS=bias is not None)
    return out


@int8_linear.register_fake
def _(q: torch.Tensor, w: torch.Tensor, out_scale: torch.Tensor, bias: torch.Tensor | None,
      out_dtype: torch.dtype) -> torch.Tensor:
    """Shape and dtype of the result, for torch.compile's tracing."""
    return q.new_empty((q.shape[0], w.shape[0]), dtype=out_dtype)
