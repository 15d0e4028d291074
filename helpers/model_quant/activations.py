"""Collect the activations a model's layers see, and run it with quantized weights or activations.

Serves: core — used by chapters 5, 6.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from helpers.errors import InputError


def _linear_layers(model: Any) -> list[tuple[str, Any]]:
    """(name, module) of the Linear and Conv layers, in order."""
    from torch import nn

    kinds = (nn.Linear, nn.Conv1d, nn.Conv2d)
    return [(n, m) for n, m in model.named_modules() if isinstance(m, kinds)]


def layer_inputs(model: Any, x: Any) -> dict[str, Any]:
    """{layer name: the input tensor each Linear/Conv layer receives} for one forward pass."""
    import torch

    layers = _linear_layers(model)
    if not layers:
        raise InputError("the model has no Linear or Conv layers to collect inputs for.")
    seen: dict[str, Any] = {}
    hooks = [m.register_forward_pre_hook(lambda _m, args, n=n: seen.__setitem__(n, args[0].detach()))
             for n, m in layers]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for h in hooks:
            h.remove()
    return seen


def with_quantized_inputs(model: Any, amax: dict[str, float], bits: int = 8,
                          unsigned: bool = False) -> Any:
    """A copy of model whose Linear/Conv layers fake-quantize their inputs with the given amax."""
    from helpers.quant.core import fake_quantize, quant_range

    model = copy.deepcopy(model)
    _, qmax = quant_range(bits, signed=not unsigned)
    for n, m in _linear_layers(model):
        if n not in amax:
            continue
        scale = max(float(amax[n]), 1e-12) / qmax
        m.register_forward_pre_hook(
            lambda _m, args, s=scale: (fake_quantize(args[0], s, bits=bits, signed=not unsigned),))
    return model


def with_quantized_weights(model: Any, quantize_fn: Callable[[Any], Any]) -> Any:
    """A copy of model whose Linear/Conv weights are replaced by quantize_fn(weight) (fake-quantized)."""
    import torch

    model = copy.deepcopy(model)
    with torch.no_grad():
        for _, m in _linear_layers(model):
            m.weight.copy_(quantize_fn(m.weight.detach()))
    return model
