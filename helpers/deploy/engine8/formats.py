"""The engine's two 8-bit formats, FP8 e4m3 and INT8, and their exact quantization arithmetic.

Both kernels and references quantize the same way, so that a GPU result can be checked bit for bit:
``q = cast(clamp(x * inv_scale))`` with ``inv_scale = float32(1 / scale)``; INT8 rounds half to even
(``rint``) and saturates to -128..127; FP8 saturates to ±448 and rounds to nearest even in the cast.

    fmt = FORMATS["fp8"]
    s = fmt.scale(amax)              # amax / 448
    q = fmt.quantize(x, s)           # torch.float8_e4m3fn tensor
    x_hat = fmt.dequantize(q, s)     # float32

Serves: core — used by chapter 9.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers.errors import InputError


@dataclass(frozen=True)
class Format:
    """One 8-bit format: its name, largest code, torch dtype and the kernels' code for it (1 FP8, 2 INT8)."""

    name: str
    qmax: float
    dtype: torch.dtype
    kind: int

    def scale(self, amax: float) -> float:
        """The per-tensor scale that maps |x| <= amax onto the format's range (amax <= 0 gives 1 / qmax)."""
        amax = float(amax)
        if not amax == amax:  # NaN
            raise InputError("amax is NaN: the calibration saw a NaN activation; check the model's inputs.")
        return amax / self.qmax if amax > 0 else 1.0 / self.qmax

    def inverse(self, scale: float | torch.Tensor) -> torch.Tensor:
        """float32(1 / scale): what the kernels multiply by (one rounding, the same everywhere)."""
        return (1.0 / torch.as_tensor(scale, dtype=torch.float64)).to(torch.float32)

    def saturate(self, y: torch.Tensor) -> torch.Tensor:
        """y (float32, already multiplied by 1/scale) rounded and clamped onto the codes, as `dtype`."""
        if self.kind == 2:
            return torch.clamp(torch.round(y), -128, 127).to(torch.int8)  # torch.round: half to even, as rint
        return torch.clamp(y, -self.qmax, self.qmax).to(self.dtype)

    def quantize(self, x: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
        """Codes of x with one scale (a float or a 0-d tensor)."""
        inv = self.inverse(scale).to(x.device)
        return self.saturate(x.float() * inv)

    def dequantize(self, q: torch.Tensor, scale: float | torch.Tensor) -> torch.Tensor:
        """float32 values of codes q with one scale, or one scale per row of q (a 1-D tensor)."""
        s = torch.as_tensor(scale, dtype=torch.float32, device=q.device)
        return q.float() * (s[:, None] if s.dim() == 1 else s)


FORMATS = {
    "fp8": Format("fp8", 448.0, torch.float8_e4m3fn, 1),
    "int8": Format("int8", 127.0, torch.int8, 2),
}
# The FP16 baseline runs the same engine with FP16 operands: no codes, no scales (kind 0: nothing to quantize).
FP16 = Format("fp16", 65504.0, torch.float16, 0)


def get(name: str, fp16: bool = False) -> Format:
    """The Format called `name` ('fp8' or 'int8'; 'fp16' too when `fp16`), or an InputError naming the choices."""
    if fp16 and name == "fp16":
        return FP16
    if name not in FORMATS:
        raise InputError(f"8-bit format must be one of {', '.join(FORMATS)}, got {name!r}.")
    return FORMATS[name]


def quantize_weight(w: torch.Tensor, fmt: Format) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-output-channel codes of a weight (Cout, ...) and its float32 scales (Cout,): amax of each row / qmax.

    For the FP16 baseline (kind 0) the "codes" are the FP16 weight and every scale is 1.
    """
    if fmt.kind == 0:
        return w.detach().half(), torch.ones(w.shape[0], device=w.device)
    flat = w.detach().float().reshape(w.shape[0], -1)
    amax = flat.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / fmt.qmax, torch.full_like(amax, 1.0 / fmt.qmax))
    inv = (1.0 / scale.double()).float()
    q = fmt.saturate(flat * inv[:, None])
    return q.reshape(w.shape), scale
