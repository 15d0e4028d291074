"""TensorRT-style Q/DQ fake quantization of Conv/Linear layers from calibrated scales.

Each Conv1d/Conv2d/Linear gets an int8 per-tensor quantizer on its input (scale = amax / 127,
amax from a calibrator) and an int8 per-channel quantizer on its weight (axis 0, scale =
max|w| per output channel / 127). ``torch.onnx.export`` turns both into
QuantizeLinear/DequantizeLinear pairs. The same scales drive the integer GPU path
(``helpers.deploy.torch_int8``), so every backend is compared with one PyTorch model.

Serves: core — used by chapters 9–12 and labs 08, 09.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import torch
from torch import nn

from helpers.errors import InputError
from helpers.validation import require_choice, require_finite

QUANTIZABLE = (nn.Conv1d, nn.Conv2d, nn.Linear)
QMAX = 127


def quantizable_layers(model: nn.Module) -> dict[str, nn.Module]:
    """The Conv/Linear layers of `model` by qualified name."""
    return {n: m for n, m in model.named_modules() if isinstance(m, QUANTIZABLE)}


@torch.no_grad()
def calibrate(
    model: nn.Module,
    batches: Iterable[torch.Tensor],
    method: str = "max",
    percentile: float = 99.99,
) -> dict[str, float]:
    """Activation amax of every Conv/Linear input over `batches` (tensors, or dicts of keyword inputs)."""
    require_choice(method, ("max", "percentile"), "method")
    layers = quantizable_layers(model)
    if not layers:
        raise InputError("the model has no Conv1d/Conv2d/Linear layer to quantize.")
    seen: dict[str, list[torch.Tensor]] = {n: [] for n in layers}
    rng = torch.Generator().manual_seed(0)

    def keep(name: str, x: torch.Tensor) -> None:
        """Keep the batch max ('max') or a random sample of |x| of at most 65536 values."""
        a = x.detach().abs().flatten().float()
        if method == "max":
            seen[name].append(a.max().reshape(1).cpu())
        else:
            idx = torch.randint(0, a.numel(), (min(a.numel(), 65536),), generator=rng)
            seen[name].append(a.cpu()[idx])

    hooks = [
        m.register_forward_pre_hook(lambda _m, a, n=n: keep(n, a[0])) for n, m in layers.items()
    ]
    was_training = model.training
    model.eval()
    count = 0
    try:
        for x in batches:
            model(**x) if isinstance(x, dict) else model(x)
            count += 1
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    if count == 0:
        raise InputError(
            "calibrate() got no batches. Pass a few batches of real inputs (e.g. dataset.calib)."
        )
    amax = {}
    for n, parts in seen.items():
        v = torch.cat(parts).numpy()
        amax[n] = float(v.max() if method == "max" else np.percentile(v, percentile))
    return amax


def weight_scales(weight: torch.Tensor) -> torch.Tensor:
    """Per-output-channel (axis 0) symmetric int8 scales of a weight: max|w| / 127."""
    amax = weight.detach().abs().flatten(1).amax(dim=1).float()
    return torch.clamp(amax, min=1e-8) / QMAX


class QDQLayer(nn.Module):
    """A Conv/Linear whose input and weight pass through int8 fake quantization (Q/DQ on export)."""

    def __init__(self, layer: nn.Module, act_amax: float):
        super().__init__()
        if not np.isfinite(act_amax) or act_amax <= 0:
            raise InputError(
                f"activation amax must be a positive finite number, got {act_amax!r}. "
                "Calibrate on real, non-constant inputs."
            )
        self.layer = layer
        self.register_buffer("act_scale", torch.tensor(float(act_amax) / QMAX))
        self.register_buffer("w_scale", weight_scales(layer.weight))
        self.register_buffer("w_zero", torch.zeros_like(self.w_scale, dtype=torch.int32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Fake-quantize input and weight, then run the layer's own operation."""
        xq = torch.fake_quantize_per_tensor_affine(x, float(self.act_scale), 0, -128, 127)
        wq = torch.fake_quantize_per_channel_affine(
            self.layer.weight, self.w_scale, self.w_zero, 0, -128, 127
        )
        if isinstance(self.layer, nn.Linear):
            return nn.functional.linear(xq, wq, self.layer.bias)
        return self.layer._conv_forward(xq, wq, self.layer.bias)


def insert_qdq(model: nn.Module, act_amax: Mapping[str, float]) -> nn.Module:
    """Replace each calibrated Conv/Linear of `model` (in place) by a QDQLayer; return the model."""
    layers = quantizable_layers(model)
    missing = [n for n in act_amax if n not in layers]
    if missing:
        raise InputError(
            f"act_amax names layers the model does not have: {missing[:3]}. "
            "Calibrate this very model with calibrate(model, batches)."
        )
    for name, amax in act_amax.items():
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, QDQLayer(layers[name], amax))
    return model


def qdq_layers(model: nn.Module) -> dict[str, QDQLayer]:
    """The QDQLayer modules of a model by name."""
    return {n: m for n, m in model.named_modules() if isinstance(m, QDQLayer)}


def fake_quant_copy(
    model: nn.Module, batches: Iterable[torch.Tensor], method: str = "max"
) -> nn.Module:
    """A calibrated fake-quant copy of `model` (BatchNorm folded first; the original is untouched)."""
    batches = list(batches)
    for i, b in enumerate(batches):
        require_finite(b, f"calibration batch {i}")
    from helpers.model_quant.ptq import fold_batchnorm

    folded = fold_batchnorm(model)
    return insert_qdq(folded, calibrate(folded, batches, method))
