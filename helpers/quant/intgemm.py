"""Integer inference arithmetic: int8 GEMM/conv references, integer-only requantization, GPU paths.

Every path gives int32 results that must equal the numpy reference exactly:
numpy (reference), a dp4a CUDA-core kernel (cupy RawKernel, dp4a.cu) and the Tensor Core
path torch._int_mm. Requantization maps int32 accumulators to int8 with a fixed-point
multiplier and shift, as integer-only inference engines do.

Serves: core — used by chapters 1, 2, 5, 9–12 and labs 01, 04, 09, 11.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from helpers.errors import InputError, NoGPUError
from helpers.quant.core import check_zero_point, is_torch, quant_range, round_values
from helpers.validation import require_dtype, require_ndim, require_nonempty

MAX_K = 2**31 // (128 * 128)  # beyond this an int32 accumulator can overflow


def _np(x: Any) -> np.ndarray:
    """A numpy view of a numpy array, torch tensor or cupy array."""
    if is_torch(x):
        return x.detach().cpu().numpy()
    if hasattr(x, "get") and hasattr(x, "__cuda_array_interface__"):
        return x.get()
    return np.asarray(x)


def _check_int8_pair(a: Any, b: Any) -> None:
    """a (M x K) and b (K x N) must be non-empty 2-D int8 with matching K that cannot overflow."""
    for v, n in ((a, "a"), (b, "b")):
        require_dtype(v, ("int8",), n)
        require_ndim(v, (2,), n)
        require_nonempty(v, n)
    if a.shape[1] != b.shape[0]:
        raise InputError(f"inner sizes differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}; "
                         "a's columns must equal b's rows.")
    if a.shape[1] > MAX_K:
        raise InputError(f"K={a.shape[1]} can overflow an int32 accumulator (limit {MAX_K}).")


def gemm_int8_ref(a: Any, b: Any) -> np.ndarray:
    """int8 (M x K) @ int8 (K x N) -> int32, exact (float64 BLAS is exact for these integer sums)."""
    _check_int8_pair(a, b)
    return (_np(a).astype(np.float64) @ _np(b).astype(np.float64)).astype(np.int32)


def im2col(x: np.ndarray, kh: int, kw: int, stride: int = 1, padding: int = 0) -> np.ndarray:
    """Patches of an (N, C, H, W) array as (N, Ho, Wo, C*kh*kw) rows, zero padded."""
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    n, c, ho, wo = win.shape[:4]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(n, ho, wo, c * kh * kw)


def conv2d_int8_ref(x: Any, w: Any, stride: int = 1, padding: int = 0) -> np.ndarray:
    """int8 conv2d (x: N,C,H,W; w: O,C,kh,kw) -> int32 (N,O,Ho,Wo), exact, via im2col + GEMM."""
    require_dtype(x, ("int8",), "x")
    require_dtype(w, ("int8",), "w")
    require_ndim(x, (4,), "x")
    require_ndim(w, (4,), "w")
    xn, wn = _np(x), _np(w)
    if xn.shape[1] != wn.shape[1]:
        raise InputError(f"x has {xn.shape[1]} channels but w expects {wn.shape[1]}.")
    o, c, kh, kw = wn.shape
    cols = im2col(xn, kh, kw, stride, padding)
    n, ho, wo, k = cols.shape
    out = gemm_int8_ref(cols.reshape(-1, k), np.ascontiguousarray(wn.reshape(o, k).T))
    return out.reshape(n, ho, wo, o).transpose(0, 3, 1, 2).copy()


# ---------- requantization ----------

def quantize_multiplier(m: Any) -> tuple[np.ndarray, np.ndarray]:
    """Write each real multiplier m (0 < m < 2**30) as M0 * 2**-(31 + shift), M0 an int32 in [2**30, 2**31)."""
    mm = np.asarray(m, dtype=np.float64)
    if mm.size == 0 or not np.all(np.isfinite(mm)) or np.any(mm <= 0) or np.any(mm >= 2**30):
        raise InputError("multipliers must be finite and in (0, 2**30); m = s_in * s_w / s_out.")
    f, e = np.frexp(mm)  # m = f * 2**e, 0.5 <= f < 1
    m0 = np.round(f * 2**31).astype(np.int64)
    carry = m0 == 2**31
    m0 = np.where(carry, m0 // 2, m0)
    e = e + carry
    return m0.astype(np.int64), (-e).astype(np.int64)


def _per_channel(v: np.ndarray, acc: np.ndarray, axis: int | None) -> np.ndarray:
    """Reshape a per-channel vector to broadcast along `axis` of acc (scalars pass through)."""
    if v.ndim == 0 or axis is None:
        return v
    shape = [1] * acc.ndim
    shape[axis] = -1
    return v.reshape(shape)


def requantize_fixed(acc: Any, m0: Any, shift: Any, zero_point: int = 0, *, bits: int = 8,
                     signed: bool = True, narrow: bool = False, axis: int | None = None) -> np.ndarray:
    """Integer-only requantization: clamp(((acc * M0) >> (31 + shift), rounded) + zero_point).

    Ties round up (toward +inf), as a rounding right shift does. Per-channel M0/shift go along `axis`.
    """
    a = _np(acc)
    require_dtype(a, ("int32",), "acc")
    qmin, qmax = quant_range(bits, signed, narrow)
    check_zero_point(zero_point, qmin, qmax)
    m0v = _per_channel(np.asarray(m0, np.int64), a, axis)
    total = _per_channel(np.asarray(shift, np.int64), a, axis) + 31
    if np.any(total < 1) or np.any(total > 62):
        raise InputError("31 + shift must lie in 1..62; get M0 and shift from quantize_multiplier().")
    prod = a.astype(np.int64) * m0v
    r = (prod + (np.int64(1) << (total - 1))) >> total
    out = np.clip(r + zero_point, qmin, qmax)
    return out.astype(np.int8 if bits <= 8 and signed else np.int32)


def requantize_float(acc: Any, multiplier: Any, zero_point: int = 0, *, bits: int = 8,
                     signed: bool = True, narrow: bool = False, axis: int | None = None,
                     rounding: str = "half_even") -> np.ndarray:
    """Float requantization, the reference: clamp(round(acc * m) + zero_point) in float64."""
    a = _np(acc)
    require_dtype(a, ("int32",), "acc")
    qmin, qmax = quant_range(bits, signed, narrow)
    check_zero_point(zero_point, qmin, qmax)
    m = _per_channel(np.asarray(multiplier, np.float64), a, axis)
    out = np.clip(round_values(a.astype(np.float64) * m, rounding) + zero_point, qmin, qmax)
    return out.astype(np.int8 if bits <= 8 and signed else np.int32)


def quantize_bias(bias: Any, s_in: float, s_w: Any) -> np.ndarray:
    """Bias as int32 in the accumulator's scale s_in * s_w (per output channel if s_w is a vector)."""
    b = _np(bias).astype(np.float64)
    return np.rint(b / (float(s_in) * np.asarray(s_w, np.float64))).astype(np.int32)


def int8_linear(xq: Any, wq: Any, bias_q: Any, m0: Any, shift: Any, zero_point: int = 0) -> np.ndarray:
    """Integer-only linear layer: int8 x (B x K), int8 W (N x K), int32 bias -> int8 y (B x N)."""
    acc = gemm_int8_ref(xq, np.ascontiguousarray(_np(wq).T))
    if bias_q is not None:
        acc = acc + _np(bias_q).astype(np.int32)
    return requantize_fixed(acc, m0, shift, zero_point, axis=1)


# ---------- GPU paths ----------

@functools.cache
def _dp4a_kernel() -> Any:
    """Compile dp4a.cu with cupy once per process."""
    import cupy

    src = (Path(__file__).with_name("dp4a.cu")).read_text(encoding="utf-8")
    return cupy.RawModule(code=src, options=("--std=c++17",)).get_function("dp4a_gemm")


def _require_cupy() -> Any:
    """cupy with a GPU, or a clear error."""
    from helpers.device import has_gpu
    from helpers.errors import require_package

    if not has_gpu():
        raise NoGPUError("The dp4a kernel")
    return require_package("cupy", "pip install cupy-cuda13x==14.2.0", "the dp4a kernel runs through cupy")


def pack_for_dp4a(a: Any, b: Any) -> tuple[Any, Any]:
    """Device int32 views: A (M x K/4) and B transposed (N x K/4), 4 int8 per word."""
    cp = _require_cupy()
    _check_int8_pair(a, b)
    if a.shape[1] % 4:
        raise InputError(f"the dp4a kernel needs K to be a multiple of 4, got K={a.shape[1]}; pad K with zeros.")
    a_d = cp.ascontiguousarray(cp.asarray(a))
    bt_d = cp.ascontiguousarray(cp.asarray(b).T)
    return a_d.view(cp.int32), bt_d.view(cp.int32)


def dp4a_gemm_packed(a4: Any, bt4: Any, out: Any) -> Any:
    """Launch the dp4a kernel on packed operands into out (M x N int32 cupy array); returns out."""
    cp = _require_cupy()
    m, k4 = a4.shape
    n = bt4.shape[0]
    grid = ((n + 63) // 64, (m + 63) // 64)
    _dp4a_kernel()(grid, (16, 16), (a4, bt4, out, cp.int32(m), cp.int32(n), cp.int32(k4)))
    return out


def dp4a_gemm(a: Any, b: Any) -> np.ndarray:
    """int8 GEMM on CUDA cores with __dp4a; returns the int32 result as numpy."""
    cp = _require_cupy()
    a4, bt4 = pack_for_dp4a(a, b)
    out = cp.empty((a4.shape[0], bt4.shape[0]), dtype=cp.int32)
    return cp.asnumpy(dp4a_gemm_packed(a4, bt4, out))


def column_major(b: Any) -> Any:
    """The same matrix stored column-major (b.t().contiguous().t()): cuBLASLt's fast INT8 layout.

    On the H200 (2026-11-29) torch._int_mm ran at 947 TOPS with a column-major B and 128 TOPS
    with a row-major one, at 8192^3.
    """
    return b.t().contiguous().t()


def int_mm(a: Any, b: Any) -> Any:
    """int8 GEMM through torch._int_mm (Tensor Cores on a GPU; M > 16, K and N multiples of 8 there)."""
    import torch

    _check_int8_pair(a, b)
    ta = a if is_torch(a) else torch.from_numpy(np.ascontiguousarray(a))
    tb = b if is_torch(b) else torch.from_numpy(np.ascontiguousarray(b))
    if ta.is_cuda and (ta.shape[0] <= 16 or ta.shape[1] % 8 or tb.shape[1] % 8):
        raise InputError(f"torch._int_mm on a GPU needs M > 16 and K, N multiples of 8; got "
                         f"{tuple(ta.shape)} @ {tuple(tb.shape)}. Pad the matrices.")
    return torch._int_mm(ta, column_major(tb) if ta.is_cuda else tb)


def gemm_throughput(m: int = 8192, n: int = 8192, k: int = 8192, repeats: int = 20) -> dict[str, float]:
    """GPU: TOPS of the dp4a kernel, torch._int_mm and a BF16 matmul of one shape, measured in one run."""
    import torch

    from helpers.bench import gemm_flops, tflops, timeit

    cp = _require_cupy()
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda", generator=gen)
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8, device="cuda", generator=gen)
    a4, bt4 = pack_for_dp4a(cp.asarray(a), cp.asarray(b))
    out = cp.empty((m, n), dtype=cp.int32)
    ab, bb = a.to(torch.bfloat16), b.to(torch.bfloat16)
    b_cm = column_major(b)
    ops = gemm_flops(m, n, k)
    t = {
        "dp4a": timeit(lambda: dp4a_gemm_packed(a4, bt4, out), backend="cupy", repeats=repeats),
        "int_mm": timeit(lambda: torch._int_mm(a, b_cm), backend="torch", repeats=repeats),
        "bf16": timeit(lambda: ab @ bb, backend="torch", repeats=repeats),
    }
    res = {f"{name}_tops": tflops(ops, tm.median_s) for name, tm in t.items()}
    res["dp4a_over_int_mm"] = res["dp4a_tops"] / res["int_mm_tops"]
    res["int_mm_over_bf16"] = res["int_mm_tops"] / res["bf16_tops"]
    return res
