"""Fake quantization for training: quantize-dequantize forward, straight-through gradient backward.

Serves: core — used by chapter 8 and lab 07.
"""

from __future__ import annotations

from typing import Any

from helpers.errors import InputError
from helpers.quant.core import _broadcast, fake_quantize, quant_range
from helpers.validation import require_float


def _autograd_function() -> Any:
    """Build the torch.autograd.Function lazily (torch is imported only when used)."""
    import torch

    class FakeQuantSTE(torch.autograd.Function):
        """y = dequantize(quantize(x)); dy/dx = 1 (inside the range only when clip_gradient)."""

        @staticmethod
        def forward(ctx, x, scale, zero_point, bits, signed, narrow, axis, clip_gradient):  # noqa: D102
            y = fake_quantize(x.detach(), scale, zero_point, bits=bits, signed=signed,
                              narrow=narrow, axis=axis)
            if clip_gradient:
                qmin, qmax = quant_range(bits, signed, narrow)
                s = _broadcast(scale, x, axis, None).to(x.dtype)
                z = _broadcast(zero_point, x, axis, None).to(x.dtype)
                inside = (x >= (qmin - z) * s) & (x <= (qmax - z) * s)
            else:
                inside = torch.ones_like(x, dtype=torch.bool)
            ctx.save_for_backward(inside)
            return y

        @staticmethod
        def backward(ctx, grad):  # noqa: D102
            (inside,) = ctx.saved_tensors
            return grad * inside.to(grad.dtype), None, None, None, None, None, None, None

    return FakeQuantSTE


_FN: list[Any] = []


def fake_quant_ste(x: Any, scale: Any, zero_point: Any = 0, *, bits: int = 8, signed: bool = True,
                   narrow: bool = False, axis: int | None = None,
                   clip_gradient: bool = True) -> Any:
    """Differentiable fake quantization of a torch tensor (STE; zero gradient outside the range if clipped)."""
    if not type(x).__module__.startswith("torch"):
        raise InputError("fake_quant_ste works on torch tensors (it is an autograd function); "
                         "for numpy use helpers.quant.fake_quantize.")
    require_float(x)
    if not _FN:
        _FN.append(_autograd_function())
    return _FN[0].apply(x, scale, zero_point, bits, signed, narrow, axis, clip_gradient)
