"""FP8 (E4M3, E5M2) and INT4 emulation: round onto the format's grid, saturate, pack nibbles.

Serves: core — used by chapters 5, 10, 12 and labs 10, 13.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from helpers.errors import InputError
from helpers.quant.core import Array, is_torch
from helpers.validation import require_choice, require_dtype, require_finite, require_float, require_positive


@dataclass(frozen=True)
class FloatFormat:
    """A small floating-point format: exponent and mantissa bits, bias, largest finite value."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    max_value: float

    @property
    def min_normal(self) -> float:
        """Smallest positive normal number."""
        return 2.0 ** (1 - self.bias)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive (subnormal) number."""
        return 2.0 ** (1 - self.bias - self.mantissa_bits)


# E4M3 is the "fn" variant (no infinities, max 448) used by NVIDIA Hopper; E5M2 is IEEE-like.
FORMATS = {
    "e4m3": FloatFormat("e4m3", 4, 3, 7, 448.0),
    "e5m2": FloatFormat("e5m2", 5, 2, 15, 57344.0),
}


def fp8_format(fmt: str) -> FloatFormat:
    """The FloatFormat named 'e4m3' or 'e5m2'."""
    require_choice(fmt, tuple(FORMATS), "fmt")
    return FORMATS[fmt]


def fp8_round(x: Array, fmt: str = "e4m3") -> Array:
    """Round floats to the nearest FP8 value (ties to even), saturating at ±max; same type as x."""
    f = fp8_format(fmt)
    require_float(x)
    require_finite(x)
    v = x.detach().cpu().numpy() if is_torch(x) else np.asarray(x)
    a = np.abs(v.astype(np.float64))
    # exponent of each value, floored at the smallest normal exponent (subnormals share its spacing)
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, 1 - f.bias)
    quantum = np.exp2(e - f.mantissa_bits)
    r = np.minimum(np.rint(a / quantum) * quantum, f.max_value) * np.sign(v)
    if is_torch(x):
        import torch

        return torch.from_numpy(r).to(device=x.device, dtype=x.dtype)
    return r.astype(v.dtype)


def fp8_grid(fmt: str = "e4m3") -> np.ndarray:
    """Every non-negative finite value of the format, ascending (for plots of the grid)."""
    f = fp8_format(fmt)
    vals = {0.0}
    for e in range(1 - f.bias, int(np.log2(f.max_value)) + 1):
        for m in range(2**f.mantissa_bits):
            vals.add(2.0**e * (1 + m / 2**f.mantissa_bits))
    for m in range(1, 2**f.mantissa_bits):
        vals.add(m * f.min_subnormal)
    return np.array(sorted(v for v in vals if v <= f.max_value))


def fp8_scale(amax: float, fmt: str = "e4m3") -> float:
    """Per-tensor scale that maps amax onto the format's largest value (x_fp8 = x / scale)."""
    return require_positive(amax, "amax") / fp8_format(fmt).max_value


def fp8_fake_quantize(x: Array, scale: float = 1.0, fmt: str = "e4m3") -> Array:
    """Scale, round to FP8, scale back: the values an FP8 GEMM sees."""
    scale = require_positive(scale, "scale")
    require_float(x)
    return fp8_round(x / scale, fmt) * scale


def pack_int4(q: Array) -> np.ndarray:
    """Pack signed INT4 values (-8..7, last axis even) two per byte, low nibble first, as uint8 (numpy)."""
    import torch

    from helpers.quant import weight_only

    v = q.detach().cpu().numpy() if is_torch(q) else np.asarray(q)
    require_dtype(v, ("int8", "int16", "int32", "int64"), "q")
    return weight_only.pack_int4(torch.from_numpy(np.ascontiguousarray(v))).numpy()


def unpack_int4(packed: Array) -> np.ndarray:
    """Undo pack_int4: uint8 bytes back to signed INT4 values as int8 (numpy)."""
    import torch

    from helpers.quant import weight_only

    p = packed.detach().cpu().numpy() if is_torch(packed) else np.asarray(packed)
    require_dtype(p, ("uint8",), "packed")
    return weight_only.unpack_int4(torch.from_numpy(np.ascontiguousarray(p))).numpy()
