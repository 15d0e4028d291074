"""The engine's 8-bit convolution: an implicit GEMM over NHWC codes with the same fused epilogue as its GEMM
(``helpers.deploy.engine8.kernels``): scale, bias, residual (FP16 or 8-bit codes), activation, FP16 and/or the next
layer's codes, all before anything is written.

    y, q = conv(x, w, scale, bias=b, residual=r, act="relu", fp16=True, out=("fp8", s_next), stride=2, pad=1)
    q = conv(x, w, scale, residual=x8, residual_scale=s_x, act="relu", out=("int8", s_next))   # an 8-bit skip

A CUDA tensor runs the Triton kernel; anything else runs the exact PyTorch reference (float64 sums), so the engine
computes the same function on the CPU, only slower.

Serves: core — used by chapter 9.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from helpers.deploy.engine8 import kernels as K
from helpers.deploy.engine8.kernels import triton
from helpers.errors import InputError

if triton is not None:
    import triton.language as tl

    @triton.jit
    def _conv_kernel(x_ptr, w_ptr, y_ptr, q_ptr, scale_ptr, bias_ptr, res_ptr, NB, H, W, C, HO, WO, COUT, out_mul,
                     res_mul,
                     R: tl.constexpr, S: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr,
                     PW: tl.constexpr,
                     HAS_BIAS: tl.constexpr, HAS_RES: tl.constexpr, RES_CODES: tl.constexpr, ACT: tl.constexpr,
                     WRITE_Y: tl.constexpr, OUT_KIND: tl.constexpr, INT_ACC: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        """Implicit-GEMM convolution, NHWC codes: rows are output pixels, K runs over (r, s, channel)."""
        M = NB * HO * WO
        om, on = K.tile(tl.program_id(0), M, COUT, BLOCK_M, BLOCK_N, GROUP_M)
        rm, rn = om + tl.arange(0, BLOCK_M), on + tl.arange(0, BLOCK_N)
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
            acc = K.mma(a, b, acc, INT_ACC)
        K.finish(acc, rm, rn, M, COUT, scale_ptr, bias_ptr, res_ptr, y_ptr, q_ptr, out_mul, res_mul,
                 HAS_BIAS, HAS_RES, RES_CODES, ACT, WRITE_Y, OUT_KIND)


def conv(x: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, *, stride: int | tuple[int, int] = 1,
         pad: int | tuple[int, int] = 0,
         bias: torch.Tensor | None = None, residual: torch.Tensor | None = None, residual_scale: float | None = None,
         act: str = "none", fp16: bool | None = None, out: tuple[str, float] | None = None,
         config: tuple[int, ...] | None = None) -> Any:
    """epilogue(conv2d(x, w)) on NHWC codes: x (N, H, W, C), w (Cout, R, S, C); residual (N, Ho, Wo, Cout) FP16,
    or codes read as codes * `residual_scale`.

    `stride` and `pad` are one number or (height, width) pairs: a 1-D convolution is H = R = 1, stride (1, s).
    """
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    ph, pw = (pad, pad) if isinstance(pad, int) else pad
    K.check_codes(x, w, "conv")
    if x.dim() != 4 or w.dim() != 4 or x.shape[3] != w.shape[3]:
        raise InputError(f"conv needs NHWC x (N, H, W, C) and w (Cout, R, S, C) with the same C, got "
                         f"{tuple(x.shape)} and {tuple(w.shape)}.")
    nb, h, wd, c = x.shape
    cout, r, s, _ = w.shape
    ho, wo = (h + 2 * ph - r) // sh + 1, (wd + 2 * pw - s) // sw + 1
    fp16 = out is None if fp16 is None else fp16
    res_codes, res_mul = K.residual_spec(residual, residual_scale)
    (bm, bn, bk, gm, warps, stages), _ = K.config_tuple(config)
    if not K.triton_ready(x):
        acc = F.conv2d(x.permute(0, 3, 1, 2).double(), w.permute(0, 3, 1, 2).double(), stride=(sh, sw),
                       padding=(ph, pw))
        acc = acc.permute(0, 2, 3, 1).reshape(-1, cout)
        acc = acc.round().to(torch.int32) if x.dtype == torch.int8 else acc.float()
        res = None if residual is None else residual.reshape(-1, cout)
        y, q = K.epilogue_reference(acc, scale, bias, res, act, fp16, out, residual_scale)
        shape = (nb, ho, wo, cout)
        return K.result(None if y is None else y.reshape(shape), None if q is None else q.reshape(shape))
    kind, mul = K.out_spec(out)
    y, q = K.outputs((nb, ho, wo, cout), x.device, fp16, out)
    bk = min(bk, max(32, triton.next_power_of_2(c)))
    grid = (triton.cdiv(nb * ho * wo, bm) * triton.cdiv(cout, bn),)
    K.launch(_conv_kernel, grid, x, w, *K.pointer_args(scale, bias, residual, y, q), nb, h, wd, c, ho, wo, cout, mul,
             res_mul, R=r, S=s, SH=sh, SW=sw, PH=ph, PW=pw, HAS_BIAS=bias is not None, HAS_RES=residual is not None,
             RES_CODES=res_codes, ACT=K.ACTS[act], WRITE_Y=fp16, OUT_KIND=kind, INT_ACC=x.dtype == torch.int8,
             BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, num_warps=warps, num_stages=stages)
    return K.result(y, q)
