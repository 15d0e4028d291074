"""Weight-only quantization (权重量化) for language models: W8A16 per channel, W4A16 per group (逐组) packed.

Weights are `nn.Linear` weights `w` of shape (N out, K in); activations stay in FP16/FP32.
    W8A16  q = clamp(round(w / s[n]), -128, 127) int8,            s[n] = max|w[n, :]| / 127
    W4A16  q = clamp(round(w / s[n, g]), -8, 7) packed two a byte, s[n, g] = max|w[n, group g]| / 7
The groups are `group_size` consecutive inputs along K (the reduction axis), so a GEMV reads each group's
scale once. Packing puts element 2i in the low nibble of byte i, element 2i+1 in the high nibble, two's
complement (`helpers.quant.fp8.pack_int4` is the numpy form of the same function). Everything here is
torch-only (CPU or GPU, no copies to numpy), and gives exactly the codes of `helpers.quant.core` (tests
compare them).

Serves: core — used by chapters 5, 10, 12 and labs 10, 13.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.errors import InputError
from helpers.validation import (require_activations, require_finite, require_float_tensor, require_instance,
                                require_nonempty, require_tensor, require_values_in)

INT4_MIN, INT4_MAX = -8, 7


@dataclass(frozen=True)
class W8Weight:
    """INT8 weight (N, K) with one float32 scale per output channel."""

    q: torch.Tensor
    scale: torch.Tensor

    def __post_init__(self) -> None:
        """int8 codes (N, K) and N scales; build it with quantize_w8."""
        _check_codes(self.q, "W8Weight.q", (torch.int8,), "quantize_w8(w)")
        _check_scales(self.scale, (self.q.shape[0],), "W8Weight.scale", "quantize_w8(w)")

    def dequantize(self) -> torch.Tensor:
        """The float32 weight the integers stand for."""
        return self.q.float() * self.scale[:, None]

    @property
    def nbytes(self) -> int:
        """Bytes a GEMV reads: int8 codes plus FP16 scales."""
        return self.q.numel() + 2 * self.scale.numel()


@dataclass(frozen=True)
class W4Weight:
    """INT4 weight (N, K) packed as uint8 (N, K/2), with a float32 scale per (output channel, group)."""

    packed: torch.Tensor
    scale: torch.Tensor
    group_size: int

    def __post_init__(self) -> None:
        """uint8 bytes (N, K/2) and (N, K/group_size) scales; build it with quantize_w4."""
        _check_codes(self.packed, "W4Weight.packed", (torch.uint8,), "quantize_w4(w, group_size)")
        n, k = self.packed.shape[0], 2 * self.packed.shape[1]
        if isinstance(self.group_size, bool) or not isinstance(self.group_size, int) or self.group_size < 2 \
                or k % self.group_size:
            raise InputError(f"W4Weight.group_size={self.group_size!r} must divide K={k}; "
                             "build the weight with quantize_w4(w, group_size).")
        _check_scales(self.scale, (n, k // self.group_size), "W4Weight.scale", "quantize_w4(w, group_size)")

    def dequantize(self) -> torch.Tensor:
        """The float32 weight the nibbles stand for."""
        q = unpack_int4(self.packed).float()
        return q * self.scale.repeat_interleave(self.group_size, dim=1)

    @property
    def nbytes(self) -> int:
        """Bytes a GEMV reads: half a byte a weight plus FP16 scales."""
        return self.packed.numel() + 2 * self.scale.numel()


def _check_codes(q: torch.Tensor, name: str, dtypes: tuple, fix: str) -> None:
    """Integer codes: a 2-D torch tensor of one of `dtypes`."""
    require_tensor(q, name)
    if q.ndim != 2 or q.dtype not in dtypes:
        raise InputError(f"{name} must be a 2-D {' or '.join(map(str, dtypes))} tensor, got {q.dtype} "
                         f"{tuple(q.shape)}; build it with {fix}.")


def _check_scales(s: torch.Tensor, shape: tuple, name: str, fix: str) -> None:
    """Float scales of the given shape."""
    require_tensor(s, name)
    if tuple(s.shape) != shape or not s.is_floating_point():
        raise InputError(f"{name} must be floating point of shape {shape}, got {s.dtype} {tuple(s.shape)}; "
                         f"build it with {fix}.")


def _check_weight(w: torch.Tensor) -> None:
    """A finite, non-empty, floating-point 2-D torch tensor."""
    require_float_tensor(w, "w", (2,), "a 2-D floating-point torch tensor (out, in)")
    require_finite(w, "w")


def _symmetric_scale(amax: torch.Tensor, qmax: int) -> torch.Tensor:
    """amax / qmax, with 1.0 where amax is 0 (as helpers.quant.core.scale_zero_point)."""
    s = amax.float() / qmax
    return torch.where(s > 0, s, torch.ones_like(s))


def quantize_w8(w: torch.Tensor) -> W8Weight:
    """Symmetric INT8 per output channel (W8A16)."""
    _check_weight(w)
    scale = _symmetric_scale(w.abs().amax(dim=1), 127)
    q = torch.round(w.float() / scale[:, None]).clamp(-128, 127).to(torch.int8)
    return W8Weight(q, scale)


def group_scales(w: torch.Tensor, group_size: int) -> torch.Tensor:
    """Symmetric INT4 scales (N, K / group_size): max |w| of each group along K, divided by 7."""
    _check_weight(w)
    n, k = w.shape
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2 or group_size % 2 \
            or k % group_size:
        raise InputError(f"group_size={group_size!r} must be an even divisor of K={k} (e.g. 32, 64 or 128); "
                         "groups run along the input axis.")
    return _symmetric_scale(w.abs().reshape(n, k // group_size, group_size).amax(dim=2), INT4_MAX)


def quantize_w4(w: torch.Tensor, group_size: int = 128) -> W4Weight:
    """Symmetric INT4 per group of `group_size` inputs, packed two a byte (W4A16)."""
    scale = group_scales(w, group_size)
    s = scale.repeat_interleave(group_size, dim=1)
    q = torch.round(w.float() / s).clamp(INT4_MIN, INT4_MAX).to(torch.int8)
    return W4Weight(pack_int4(q), scale, group_size)


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """Signed INT4 values (-8..7, last axis even) two a byte, low nibble first, as uint8 (torch)."""
    require_tensor(q, "q")
    require_nonempty(q, "q")
    if q.dtype not in (torch.int8, torch.int16, torch.int32, torch.int64) or q.ndim == 0 or q.shape[-1] % 2:
        raise InputError(f"q must be integers with an even last axis, got {q.dtype} {tuple(q.shape)}; "
                         "pad the last axis to an even length (numpy arrays: helpers.quant.fp8.pack_int4).")
    require_values_in(q, INT4_MIN, INT4_MAX, "q", "INT4 values must lie in -8..7; quantize with quantize_w4 "
                      "(or bits=4 in helpers.quant.core) first.")
    u = (q.to(torch.int16) & 0xF).to(torch.uint8)
    return u[..., 0::2] | (u[..., 1::2] << 4)


def unpack_int4(packed: torch.Tensor) -> torch.Tensor:
    """Undo pack_int4: uint8 bytes back to signed INT4 values as int8."""
    require_tensor(packed, "packed")
    require_nonempty(packed, "packed")
    if packed.dtype != torch.uint8 or packed.ndim == 0:
        raise InputError(f"packed must be uint8 with at least one axis (the output of pack_int4), got "
                         f"{packed.dtype} {tuple(packed.shape)}.")
    p = packed.to(torch.int16)
    out = torch.stack([p & 0xF, p >> 4], dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)
    return torch.where(out > 7, out - 16, out).to(torch.int8)


def w8a16_linear(x: torch.Tensor, w: W8Weight) -> torch.Tensor:
    """x @ dequant(w).T in x's dtype (the reference the W8A16 kernel must match); a NaN in x gives NaN out."""
    require_instance(w, W8Weight, "w", "build it with quantize_w8(weight).")
    require_activations(x, w.q.shape[1])
    return (x.float() @ w.dequantize().T).to(x.dtype)


def w4a16_linear(x: torch.Tensor, w: W4Weight) -> torch.Tensor:
    """x @ dequant(w).T in x's dtype (the reference the W4A16 kernel must match); a NaN in x gives NaN out."""
    require_instance(w, W4Weight, "w", "build it with quantize_w4(weight).")
    require_activations(x, 2 * w.packed.shape[1])
    return (x.float() @ w.dequantize().T).to(x.dtype)
