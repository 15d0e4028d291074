"""Optional: the same INT8 PTQ with NVIDIA Model Optimizer (nvidia-modelopt), pytorch-quantization's successor.

Not installed by default (``INSTALL`` says how): notebooks skip this section cleanly when it is missing.
The library's quirks (config copies, histogram calibrators loaded by hand) live in
``helpers.plugins.modelopt_compat``; here is the experiment: the same model, calibrators and data as
``helpers.model_quant.ptq``.

Serves: core — used by chapter 7.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from helpers.model_quant.ptq import METHODS, fold_batchnorm
from helpers.models.train import _as_loader, evaluate, model_device
from helpers.plugins import modelopt_compat
from helpers.plugins.modelopt_compat import INSTALL, available
from helpers.validation import require_choice

__all__ = ["INSTALL", "available", "ptq", "side_by_side"]


def ptq(model: nn.Module, data: Any, *, method: str = "max", fold_bn: bool = True) -> nn.Module:
    """INT8 PTQ of a copy of `model` with modelopt (per-channel weights), calibrated on data's calib split."""
    mtq = modelopt_compat.mtq()
    require_choice(method, METHODS, "method")
    qmodel = fold_batchnorm(model) if fold_bn else copy.deepcopy(model).eval()
    dev = model_device(qmodel)
    cfg = modelopt_compat.int8_config()

    def forward_loop(m: nn.Module) -> None:
        with torch.no_grad():
            for x, _ in _as_loader(data, "calib", batch_size=256):
                m(x.to(dev))

    if method == "max":
        return mtq.quantize(qmodel, cfg, forward_loop).eval()
    cfg["algorithm"] = None  # collect with mtq.quantize's own calibration off, then load amax by hand
    return modelopt_compat.histogram_calibrate(mtq.quantize(qmodel, cfg), forward_loop, method).eval()


def side_by_side(model: nn.Module, data: Any, pq_accuracies: dict[str, float],
                 methods: tuple[str, ...] = ("max", "percentile")) -> list[dict[str, Any]]:
    """Rows {calibrator, pytorch-quantization %, modelopt %} for per-channel INT8 on the test split."""
    rows = []
    for method in methods:
        rows.append({"calibrator": method, "pytorch-quantization %": pq_accuracies.get(method),
                     "modelopt %": evaluate(ptq(model, data, method=method), data, "test")})
    return rows
