"""Quantize the Linear layers of a TinyLM with one of chapter 12's schemes, and measure its activations.

Schemes (weights (N, K); x the layer input):
    fp16        weights, inputs and outputs rounded to FP16, FP32 accumulation (a GPU's FP16 GEMM)
    w8a16       INT8 weights per output channel; x untouched
    w4a16       INT4 weights per group of `group_size` inputs (group_size >= K: one scale per row); with
                `bits` 2 or 3 the same with fewer levels (helpers.quant.core), to see where it breaks
    w8a8        INT8 weights per channel, x quantized per token on every call (exact int32 products)
    w8a8_tensor the same with one dynamic scale for the whole x
    fp8         FP8 E4M3 weights per channel and x per token
`smooth` rescales each group of layers that read the same input before quantizing: 'smoothquant'
(with alpha) or 'awq' (alpha searched per group, with W4 groups of `group_size`). Bits other than 4
outside w4a16, a group size other than 128 for a per-channel scheme (unless AWQ searches with it), alpha
without SmoothQuant and calibration windows without smoothing are refused: an option never silently unused.
Every Linear is quantized, the output head included (in this small model it carries much of the
prediction); the embeddings and norms stay in FP32. The division x / s stays explicit here; folding s
into the RMSNorm gain before gives the same numbers up to float rounding.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from helpers.errors import InputError
from helpers.models.tiny_lm import TinyLM
from helpers.quant import act_quant, core, kv_cache, smoothing, weight_only
from helpers.validation import (require_choice, require_finite, require_float_tensor, require_int_range,
                                require_positive, require_real, require_size, require_tensor, require_values_in)

SCHEMES = ("fp16", "w8a16", "w4a16", "w8a8", "w8a8_tensor", "fp8")
SMOOTHING = (None, "smoothquant", "awq")
GROUP_SIZE, BITS, ALPHA = 128, 4, 0.5  # the defaults: a scheme that does not use one takes only this value


def _check_options(scheme: str, group_size: int, bits: int, uses_groups: bool) -> None:
    """A known scheme; bits 2..4 for w4a16 only; a group size other than 128 only where groups are used."""
    require_choice(scheme, SCHEMES, "scheme")
    require_size(group_size, "group_size")
    require_size(bits, "bits")
    if scheme == "w4a16":
        require_int_range(bits, 2, 4, "bits (w4a16 runs 2-, 3- or 4-bit groups; for 8 bits use scheme='w8a16')")
    elif bits != BITS:
        raise InputError(f"bits={bits} does not apply to scheme={scheme!r} (its precision is in its name); "
                         "use scheme='w4a16' with bits=2, 3 or 4, or leave bits out.")
    if group_size != GROUP_SIZE and not uses_groups:
        raise InputError(f"group_size={group_size} does not apply to scheme={scheme!r} (one scale per channel); "
                         "use scheme='w4a16' (or smooth='awq'), or leave group_size out.")


class QuantLinear(nn.Module):
    """A bias-free Linear computed with a quantization scheme (see the module docstring)."""

    def __init__(self, weight: torch.Tensor, scheme: str, group_size: int = GROUP_SIZE,
                 in_scale: torch.Tensor | None = None, bits: int = BITS):
        super().__init__()
        _check_options(scheme, group_size, bits, scheme == "w4a16")
        require_float_tensor(weight, "weight", (2,), "a Linear's weight (out, in)")
        require_finite(weight, "weight")
        if in_scale is not None:
            require_float_tensor(in_scale, "in_scale", (1,), f"one scale per input (K={weight.shape[1]},)")
            if in_scale.shape[0] != weight.shape[1] or not bool(torch.isfinite(in_scale).all() & (in_scale > 0).all()):
                raise InputError(f"in_scale must hold {weight.shape[1]} finite values > 0 (one per input), got "
                                 f"shape {tuple(in_scale.shape)}; compute it with helpers.quant.smoothing.")
        w = weight.detach().float()
        if in_scale is not None:
            w = w * in_scale[None, :]
        self.scheme = scheme
        self.register_buffer("in_scale", None if in_scale is None else in_scale.float())
        self.w8 = weight_only.quantize_w8(w) if scheme in ("w8a16", "w8a8", "w8a8_tensor") else None
        if scheme == "w4a16" and bits != 4:
            self.register_buffer("w", core.roundtrip(w, bits=bits, axis=1, group_size=min(group_size, w.shape[1])))
        elif scheme == "w4a16":
            self.register_buffer("w", weight_only.quantize_w4(w, min(group_size, w.shape[1])).dequantize())
        elif scheme == "w8a16":
            self.register_buffer("w", self.w8.dequantize())
        elif scheme == "fp16":
            self.register_buffer("w", w.half().float())
        else:
            self.register_buffer("w", w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The layer's output for x (..., K)."""
        if self.in_scale is not None:
            x = x / self.in_scale
        if self.scheme in ("w8a8", "w8a8_tensor"):
            return act_quant.w8a8_linear(x, self.w8, "per_token" if self.scheme == "w8a8" else "per_tensor")
        if self.scheme == "fp8":
            return act_quant.fp8_linear(x, self.w)
        if self.scheme == "fp16":
            return F.linear(x.half().float(), self.w).half().float()
        return F.linear(x, self.w)


def linear_groups(model: TinyLM) -> Iterator[tuple[str, list[str]]]:
    """(name of what feeds the group, [Linear names]) for every group of Linears that read the same input."""
    _check_model(model)
    for i in range(len(model.blocks)):
        b = f"blocks.{i}"
        yield f"{b}.norm1", [f"{b}.attn.q", f"{b}.attn.k", f"{b}.attn.v"]
        yield f"{b}.attn (softmax · v)", [f"{b}.attn.o"]
        yield f"{b}.norm2", [f"{b}.mlp.gate", f"{b}.mlp.up"]
        yield f"{b}.mlp (silu · up)", [f"{b}.mlp.down"]
    yield "norm (final)", ["head"]


@torch.no_grad()
def linear_inputs(model: TinyLM, windows: torch.Tensor, max_rows: int = 4096) -> dict[str, torch.Tensor]:
    """The inputs (tokens, K) each Linear of the blocks sees on calibration windows, at most max_rows each."""
    _check_model(model)
    _check_windows(model, windows, "windows")
    require_size(max_rows, "max_rows")
    seen: dict[str, list[torch.Tensor]] = {}
    hooks = []
    for _, names in linear_groups(model):
        for name in names:
            def hook(mod: nn.Module, args: tuple, name: str = name) -> None:
                seen.setdefault(name, []).append(args[0].reshape(-1, args[0].shape[-1]).detach())
            hooks.append(model.get_submodule(name).register_forward_pre_hook(hook))
    try:
        model.eval()
        model(windows[:, :-1])
    finally:
        for h in hooks:
            h.remove()
    return {k: torch.cat(v)[:max_rows].float() for k, v in seen.items()}


def outlier_stats(inputs: dict[str, torch.Tensor]) -> list[dict]:
    """Per Linear input: the largest channel range over the median one, and where it sits."""
    if not isinstance(inputs, dict) or not inputs:
        raise InputError("inputs must be a non-empty {layer name: inputs (tokens, K)} dict; "
                         "get it from linear_inputs(model, windows).")
    for name, x in inputs.items():
        require_float_tensor(x, f"inputs[{name!r}]", (2,), "a layer's inputs (tokens, K)")
        require_finite(x, f"inputs[{name!r}]")
    rows = []
    for name, x in inputs.items():
        amax = x.abs().amax(dim=0)
        rows.append({"layer input of": name, "channels": x.shape[1], "max |x|": float(amax.max()),
                     "median channel max": float(amax.median()),
                     "outlier ratio": float(amax.max() / amax.median().clamp_min(1e-8)),
                     "top channel": int(amax.argmax())})
    return rows


def _group_scales(model: TinyLM, names: list[str], x: torch.Tensor, smooth: str, alpha: float,
                  group_size: int) -> tuple[torch.Tensor, float]:
    """The input scales s (and the α used) for one group of Linears that read x."""
    weights = [model.get_submodule(n).weight.detach().float() for n in names]
    if smooth == "smoothquant":
        return smoothing.smoothquant_scales(x.abs().amax(dim=0), smoothing.weight_column_amax(weights), alpha), alpha
    g = min(group_size, x.shape[1])
    best, s, _ = smoothing.awq_search(x, weights, lambda w: weight_only.quantize_w4(w, g).dequantize())
    return s, best


@torch.no_grad()
def quantize_lm(model: TinyLM, scheme: str, *, group_size: int = GROUP_SIZE, smooth: str | None = None,
                alpha: float = ALPHA, calib: torch.Tensor | None = None,
                bits: int = BITS) -> tuple[TinyLM, dict[str, float]]:
    """A copy of `model` with every Linear replaced by QuantLinear; also {group: α} when smoothing (on calib)."""
    _check_model(model)
    require_choice(smooth, SMOOTHING, "smooth")
    _check_options(scheme, group_size, bits, scheme == "w4a16" or smooth == "awq")
    alpha = require_real(alpha, "alpha", 0.0, 1.0)
    if alpha != ALPHA and smooth != "smoothquant":
        raise InputError(f"alpha={alpha} is used by smooth='smoothquant' only (awq searches its own); "
                         "pass smooth='smoothquant', or leave alpha out.")
    if smooth is not None and calib is None:
        raise InputError(f"smooth={smooth!r} needs calibration windows: pass calib=... (a few training windows).")
    if smooth is None and calib is not None:
        raise InputError("calib is used by smooth='smoothquant' or 'awq' only; pass smooth=..., or leave calib out.")
    if smooth is not None:
        _check_windows(model, calib, "calib")
    inputs = linear_inputs(model, calib) if smooth is not None else {}
    out = copy.deepcopy(model).eval()
    alphas: dict[str, float] = {}
    for feeder, names in linear_groups(model):
        s = None
        if smooth is not None:
            s, alphas[feeder] = _group_scales(model, names, inputs[names[0]], smooth, alpha, group_size)
        for name in names:
            parent, attr = name.rsplit(".", 1) if "." in name else ("", name)
            lin = model.get_submodule(name)
            g = group_size if scheme == "w4a16" else GROUP_SIZE
            setattr(out.get_submodule(parent), attr, QuantLinear(lin.weight, scheme, g, s, bits))
    return out, alphas


def with_kv_cache(model: TinyLM, kind: str) -> TinyLM:
    """A copy of `model` whose attention reads keys and values back from a `kind` cache (int8, fp8, int4)."""
    _check_model(model)
    require_choice(kind, tuple(kv_cache.KINDS), "kind")
    out = copy.deepcopy(model).eval()
    for block in out.blocks:
        block.attn.kv_hook = lambda t, kind=kind: kv_cache.fake_quant_kv(t, kind)
    return out


@torch.no_grad()
def inject_outlier(model: TinyLM, block: int = 0, channel: int = 0, factor: float = 40.0) -> TinyLM:
    """The same function with an outlier channel made on purpose: norm1 gain ×factor, q/k/v column ÷factor."""
    _check_model(model)
    require_int_range(block, 0, len(model.blocks) - 1, "block")
    require_int_range(channel, 0, model.cfg.d_model - 1, "channel")
    factor = require_positive(factor, "factor")
    out = copy.deepcopy(model).eval()
    b = out.blocks[block]
    b.norm1.weight[channel] *= factor
    for lin in (b.attn.q, b.attn.k, b.attn.v):
        lin.weight[:, channel] /= factor
    return out


def _check_model(model: TinyLM) -> None:
    """A TinyLM (the only model whose layer groups this module knows)."""
    if not isinstance(model, TinyLM):
        raise InputError(f"model must be a TinyLM, got {type(model).__name__}; load one with "
                         "helpers.models.lm_train (other models' Linears are grouped differently).")


def _check_windows(model: TinyLM, windows: torch.Tensor, name: str) -> None:
    """Token windows (batch, T + 1): integer ids of the vocabulary, 2 <= T + 1 <= ctx + 1."""
    require_tensor(windows, name)
    ctx = model.cfg.ctx
    if windows.ndim != 2 or windows.is_floating_point() or windows.dtype == torch.bool \
            or not 2 <= windows.shape[1] <= ctx + 1 or not windows.shape[0]:
        raise InputError(f"{name} must be integer token windows (batch, T + 1) with 2 <= T + 1 <= {ctx + 1}, got "
                         f"{windows.dtype} {tuple(windows.shape)}; take a few windows of the training tokens.")
    require_values_in(windows, 0, model.cfg.vocab - 1, name, "pass token ids of the model's vocabulary.")
