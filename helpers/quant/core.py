"""Integer quantization on numpy arrays and torch tensors: ranges, scales, quantize, dequantize.

Conventions (the same as TensorRT and pytorch-quantization where they overlap):
    q = clamp(round(x / scale) + zero_point, qmin, qmax)        x_hat = (q - zero_point) * scale
Symmetric quantization has zero_point 0. `narrow` drops the most negative signed code
(-127..127 for 8 bits, as TensorRT uses); it has no effect on unsigned ranges.
Per-tensor: scalar scale. Per-channel: 1-D scale of length x.shape[axis]. Per-group: groups of
`group_size` consecutive elements along `axis`; scale has x's shape with that axis divided by it.

Serves: core — used by chapters 1, 2, 5–12 and labs 00, 01, 04–13.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.errors import InputError
from helpers.validation import (
    normalize_axis,
    require_array,
    require_choice,
    require_finite,
    require_float,
    require_int_range,
    require_nonempty,
)

ROUNDINGS = ("half_even", "half_away")
MIN_BITS, MAX_BITS = 2, 16

Array = Any  # a numpy array or a torch tensor


def is_torch(x: Any) -> bool:
    """True for a torch tensor."""
    return type(x).__module__.startswith("torch")


def _check_bits(bits: int) -> None:
    """Bits must be an integer in 2..16."""
    require_int_range(bits, MIN_BITS, MAX_BITS, "bits")


def quant_range(bits: int = 8, signed: bool = True, narrow: bool = False) -> tuple[int, int]:
    """The integer grid's (qmin, qmax): 8 bits give (-128, 127), narrow (-127, 127), unsigned (0, 255)."""
    _check_bits(bits)
    if not signed:
        return 0, 2**bits - 1
    qmax = 2 ** (bits - 1) - 1
    return (-qmax if narrow else -qmax - 1), qmax


def int_dtype(bits: int, signed: bool, torch_dtype: bool = False) -> Any:
    """The smallest integer dtype holding the grid: int8/uint8 up to 8 bits, else int16/int32."""
    _check_bits(bits)
    if bits <= 8:
        name = "int8" if signed else "uint8"
    else:
        name = "int16" if signed else "int32"
    if torch_dtype:
        import torch

        return getattr(torch, name)
    return np.dtype(name)


def _as_param(v: Any, like: Any) -> Any:
    """A scale or zero point as the same kind of object as `like` (numpy or torch)."""
    if is_torch(like):
        import torch

        return v.to(like.device) if is_torch(v) else torch.as_tensor(np.asarray(v), device=like.device)
    return v.detach().cpu().numpy() if is_torch(v) else np.asarray(v)


def _work_dtype(x: Array) -> Any:
    """Float dtype that arithmetic runs in: float32 for half precisions, else x's own."""
    if is_torch(x):
        import torch

        return torch.float64 if x.dtype == torch.float64 else torch.float32
    return np.float64 if x.dtype == np.float64 else np.float32


def _validate_float_input(x: Array, name: str = "x") -> None:
    """x must be a non-empty, finite, floating-point array or tensor."""
    require_float(x, name)
    require_nonempty(x, name)
    require_finite(x, name)


def _broadcast(param: Any, x: Array, axis: int | None, group_size: int | None) -> Any:
    """Reshape a per-tensor/channel/group parameter so that it broadcasts against x."""
    p = _as_param(param, x)
    ndim = len(x.shape)
    if group_size is not None:
        ax = normalize_axis(-1 if axis is None else axis, ndim)
        want = _group_shape(tuple(x.shape), ax, group_size)
        if tuple(p.shape) == ():
            return p
        if tuple(p.shape) != want:
            raise InputError(f"per-group parameter has shape {tuple(p.shape)}; expected {want} "
                             f"(x shape {tuple(x.shape)}, groups of {group_size} along axis {ax}).")
        if is_torch(p):
            return p.repeat_interleave(group_size, dim=ax)
        return np.repeat(p, group_size, axis=ax)
    if axis is None:
        n = int(np.prod(tuple(p.shape))) if len(p.shape) else 1
        if n != 1:
            raise InputError(f"a per-tensor scale/zero point must be a single number, got shape "
                             f"{tuple(p.shape)}. For per-channel parameters pass axis=...")
        return p.reshape(())
    ax = normalize_axis(axis, ndim)
    n = int(np.prod(tuple(p.shape))) if len(p.shape) else 1
    if n == 1:
        return p.reshape(())
    if len(p.shape) != 1 or p.shape[0] != x.shape[ax]:
        raise InputError(f"a per-channel parameter along axis {ax} needs {x.shape[ax]} values "
                         f"(x shape {tuple(x.shape)}), got shape {tuple(p.shape)}.")
    shape = [1] * ndim
    shape[ax] = x.shape[ax]
    return p.reshape(shape)


def _group_shape(shape: tuple[int, ...], axis: int, group_size: int) -> tuple[int, ...]:
    """Shape of per-group parameters: `shape` with shape[axis] divided by group_size."""
    require_int_range(group_size, 1, 2**31, "group_size")
    if shape[axis] % group_size:
        raise InputError(f"group_size={group_size} does not divide the length {shape[axis]} of "
                         f"axis {axis}. Pick a divisor of {shape[axis]} or pad the tensor.")
    return shape[:axis] + (shape[axis] // group_size,) + shape[axis + 1:]


def round_values(v: Array, rounding: str = "half_even") -> Array:
    """Round to integers (as floats): 'half_even' (banker's, like torch.round) or 'half_away'."""
    require_choice(rounding, ROUNDINGS, "rounding")
    if is_torch(v):
        import torch

        if rounding == "half_even":
            return torch.round(v)
        return torch.sign(v) * torch.floor(torch.abs(v) + 0.5)
    if rounding == "half_even":
        return np.rint(v)
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _clip(v: Array, lo: float, hi: float) -> Array:
    """Clamp to [lo, hi] for numpy or torch."""
    return v.clamp(lo, hi) if is_torch(v) else np.clip(v, lo, hi)


def _check_scale(scale: Any) -> None:
    """Scales must be finite and positive."""
    s = scale.detach().cpu().numpy() if is_torch(scale) else np.asarray(scale, dtype=np.float64)
    if s.size == 0 or not np.all(np.isfinite(s)) or not np.all(s > 0):
        raise InputError("scale must hold finite, positive numbers; compute it with "
                         "scale_zero_point(amin, amax) (it maps a zero range to scale 1).")


def check_zero_point(zero_point: Any, qmin: int, qmax: int) -> None:
    """Zero points must be finite whole numbers on the integer grid qmin..qmax (a code of the grid)."""
    z = zero_point.detach().cpu().numpy() if is_torch(zero_point) else np.asarray(zero_point)
    if z.dtype == bool or not np.issubdtype(z.dtype, np.number) or z.size == 0:
        raise InputError(f"zero_point must be a whole number or an array of them, got {zero_point!r}. "
                         "Use the zero point that scale_zero_point() returns.")
    zf = z.astype(np.float64)
    bad = zf[~np.isfinite(zf) | (zf != np.round(zf))]
    if bad.size:
        raise InputError(f"zero_point must hold whole numbers (a code of the integer grid), "
                         f"got {float(bad.flat[0])!r}. "
                         "Use the integer from scale_zero_point(), or round it first.")
    out = zf[(zf < qmin) | (zf > qmax)]
    if out.size:
        raise InputError(f"zero_point {int(out.flat[0])} is outside the integer grid {qmin}..{qmax}, so every value "
                         "would saturate. Compute it with scale_zero_point() for the same bits and signed "
                         "(an unsigned zero point such as 128 needs signed=False).")


def quantize(
    x: Array,
    scale: Any,
    zero_point: Any = 0,
    *,
    bits: int = 8,
    signed: bool = True,
    narrow: bool = False,
    rounding: str = "half_even",
    axis: int | None = None,
    group_size: int | None = None,
) -> Array:
    """Quantize floats to saturated integers: clamp(round(x / scale) + zero_point, qmin, qmax)."""
    _validate_float_input(x)
    qmin, qmax = quant_range(bits, signed, narrow)
    require_choice(rounding, ROUNDINGS, "rounding")
    _check_scale(scale)
    check_zero_point(zero_point, qmin, qmax)
    if axis is not None:
        normalize_axis(axis, len(x.shape))
    wd = _work_dtype(x)
    s = _broadcast(scale, x, axis, group_size)
    z = _broadcast(zero_point, x, axis, group_size)
    if is_torch(x):
        v = x.to(wd) / s.to(wd)
        q = _clip(round_values(v, rounding) + z.to(wd), qmin, qmax)
        return q.to(int_dtype(bits, signed, torch_dtype=True))
    v = x.astype(wd, copy=False) / s.astype(wd)
    q = _clip(round_values(v, rounding) + z.astype(wd), qmin, qmax)
    return q.astype(int_dtype(bits, signed))


def dequantize(q: Array, scale: Any, zero_point: Any = 0, *, axis: int | None = None,
               group_size: int | None = None) -> Array:
    """Integers back to floats: (q - zero_point) * scale (float32, or float64 with a float64 scale)."""
    require_array(q, "q")
    require_nonempty(q, "q")
    kind = str(q.dtype).replace("torch.", "")
    if not (kind.startswith("int") or kind.startswith("uint")):
        raise InputError(f"q must hold integers (the output of quantize), got dtype {kind}. "
                         "Quantize it first with quantize(x, scale, zero_point).")
    _check_scale(scale)
    info = np.iinfo(np.dtype(kind))
    check_zero_point(zero_point, int(info.min), int(info.max))
    s = _broadcast(scale, q, axis, group_size)
    z = _broadcast(zero_point, q, axis, group_size)
    if is_torch(q):
        import torch

        wd = torch.float64 if s.dtype == torch.float64 else torch.float32
        return (q.to(wd) - z.to(wd)) * s.to(wd)
    wd = np.float64 if s.dtype == np.float64 else np.float32
    return (q.astype(wd) - z.astype(wd)) * s.astype(wd)


def fake_quantize(x: Array, scale: Any, zero_point: Any = 0, **kwargs: Any) -> Array:
    """Quantize then dequantize (same keywords as quantize): the float values INT arithmetic sees."""
    q = quantize(x, scale, zero_point, **kwargs)
    out = dequantize(q, scale, zero_point, axis=kwargs.get("axis"), group_size=kwargs.get("group_size"))
    return out.to(x.dtype) if is_torch(x) else out.astype(x.dtype, copy=False)


def min_max(x: Array, axis: int | None = None, group_size: int | None = None) -> tuple[Array, Array]:
    """Per-tensor (axis None), per-channel (along axis) or per-group minimum and maximum."""
    _validate_float_input(x)
    ndim = len(x.shape)
    if group_size is not None:
        ax = normalize_axis(-1 if axis is None else axis, ndim)
        gshape = _group_shape(tuple(x.shape), ax, group_size)
        split = tuple(x.shape[:ax]) + (gshape[ax], group_size) + tuple(x.shape[ax + 1:])
        xs = x.reshape(split)
        if is_torch(x):
            return xs.amin(dim=ax + 1), xs.amax(dim=ax + 1)
        return xs.min(axis=ax + 1), xs.max(axis=ax + 1)
    if axis is None:
        if is_torch(x):
            return x.min(), x.max()
        return np.asarray(x.min()), np.asarray(x.max())
    ax = normalize_axis(axis, ndim)
    others = tuple(d for d in range(ndim) if d != ax)
    if is_torch(x):
        return (x.amin(dim=others), x.amax(dim=others)) if others else (x, x)
    return x.min(axis=others), x.max(axis=others)


def scale_zero_point(
    amin: Any,
    amax: Any,
    bits: int = 8,
    symmetric: bool = True,
    signed: bool = True,
    narrow: bool = False,
) -> tuple[Any, Any]:
    """Scale and integer zero point mapping [amin, amax] onto the grid (per-tensor or per-channel arrays).

    Symmetric: scale = max(|amin|, |amax|) / qmax and zero point 0. Asymmetric: the range is
    widened to contain 0, scale = (amax - amin) / (qmax - qmin), zero point = round(qmin - amin / scale).
    A range of width zero gives scale 1 (any scale represents all-zero data exactly).
    """
    qmin, qmax = quant_range(bits, signed, narrow)
    torch_mode = is_torch(amin) or is_torch(amax)
    if torch_mode:
        import torch

        ref = amin if is_torch(amin) else amax
        lo = torch.as_tensor(amin, device=ref.device)
        hi = torch.as_tensor(amax, device=ref.device)
        wide = torch.float64 if torch.float64 in (lo.dtype, hi.dtype) else torch.float32
        lo, hi = lo.to(wide), hi.to(wide)
        lo, hi = torch.broadcast_tensors(lo, hi.to(lo.dtype))
        xp_abs, xp_max, xp_min, xp_where = torch.abs, torch.maximum, torch.minimum, torch.where
        finite = bool(torch.isfinite(lo).all() and torch.isfinite(hi).all())
    else:
        lo, hi = np.broadcast_arrays(np.asarray(amin), np.asarray(amax))
        dt = np.result_type(lo.dtype, hi.dtype, np.float32)
        lo, hi = lo.astype(dt), hi.astype(dt)
        xp_abs, xp_max, xp_min, xp_where = np.abs, np.maximum, np.minimum, np.where
        finite = bool(np.isfinite(lo).all() and np.isfinite(hi).all())
    if not finite:
        raise InputError("amin/amax hold NaN or Inf; calibrate on finite data.")
    if bool((lo > hi).any()):
        raise InputError("amin is larger than amax somewhere; pass (minimum, maximum) in that order.")
    if symmetric:
        amax_abs = xp_max(xp_abs(lo), xp_abs(hi))
        scale = amax_abs / qmax
        zp = scale * 0
    else:
        lo, hi = xp_min(lo, lo * 0), xp_max(hi, hi * 0)
        scale = (hi - lo) / (qmax - qmin)
    scale = xp_where(scale > 0, scale, scale * 0 + 1)
    if not symmetric:
        zp = _clip(round_values(qmin - lo / scale), qmin, qmax)
    if torch_mode:
        zp = zp.to(torch.int32)
    else:
        zp = zp.astype(np.int32)
        if scale.ndim == 0 and not isinstance(amin, np.ndarray) and not isinstance(amax, np.ndarray):
            return float(scale), int(zp)
    return scale, zp


def params_for(x: Array, *, bits: int = 8, symmetric: bool = True, signed: bool = True,
               narrow: bool = False, axis: int | None = None,
               group_size: int | None = None) -> tuple[Any, Any]:
    """Scale and zero point from x's own min/max (per-tensor, per-channel or per-group)."""
    lo, hi = min_max(x, axis, group_size)
    return scale_zero_point(lo, hi, bits, symmetric, signed, narrow)


def _quantize_with_own_params(x: Array, axis: int | None, group_size: int | None,
                              **kw: Any) -> tuple[Array, Any, Any]:
    """Quantize x with parameters from its own min/max; return (q, scale, zero_point)."""
    rounding = kw.pop("rounding", "half_even")
    scale, zp = params_for(x, axis=axis, group_size=group_size, **kw)
    kw.pop("symmetric", None)
    q = quantize(x, scale, zp, rounding=rounding, axis=axis, group_size=group_size, **kw)
    return q, scale, zp


def quantize_per_tensor(x: Array, *, bits: int = 8, symmetric: bool = True, signed: bool = True,
                        narrow: bool = False, rounding: str = "half_even") -> tuple[Array, Any, Any]:
    """One scale for the whole tensor, from its min/max; returns (q, scale, zero_point)."""
    return _quantize_with_own_params(x, None, None, bits=bits, symmetric=symmetric, signed=signed,
                                     narrow=narrow, rounding=rounding)


def quantize_per_channel(x: Array, axis: int = 0, *, bits: int = 8, symmetric: bool = True,
                         signed: bool = True, narrow: bool = False,
                         rounding: str = "half_even") -> tuple[Array, Any, Any]:
    """One scale per slice along `axis` (0 = output channels of a weight); returns (q, scale, zero_point)."""
    require_array(x)
    normalize_axis(axis, len(x.shape))
    return _quantize_with_own_params(x, axis, None, bits=bits, symmetric=symmetric, signed=signed,
                                     narrow=narrow, rounding=rounding)


def quantize_per_group(x: Array, group_size: int, axis: int = -1, *, bits: int = 4,
                       symmetric: bool = True, signed: bool = True, narrow: bool = False,
                       rounding: str = "half_even") -> tuple[Array, Any, Any]:
    """One scale per `group_size` consecutive values along `axis` (INT4 weight style); (q, scale, zp)."""
    require_array(x)
    normalize_axis(axis, len(x.shape))
    return _quantize_with_own_params(x, axis, group_size, bits=bits, symmetric=symmetric,
                                     signed=signed, narrow=narrow, rounding=rounding)


def roundtrip(x: Array, *, bits: int = 8, symmetric: bool = True, signed: bool = True,
              narrow: bool = False, axis: int | None = None, group_size: int | None = None,
              rounding: str = "half_even") -> Array:
    """Fake-quantize x with parameters from its own min/max: the float values after INT storage."""
    q, scale, zp = _quantize_with_own_params(x, axis, group_size, bits=bits, symmetric=symmetric,
                                             signed=signed, narrow=narrow, rounding=rounding)
    out = dequantize(q, scale, zp, axis=axis, group_size=group_size)
    return out.to(x.dtype) if is_torch(x) else out.astype(x.dtype, copy=False)
