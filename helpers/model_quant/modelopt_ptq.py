"""Optional: the same INT8 PTQ with NVIDIA Model Optimizer (nvidia-modelopt), pytorch-quantization's successor.

Install (CPU, keeps the pinned torch): ``pip install torch==2.13.0 nvidia-modelopt==0.47.0 requests huggingface_hub``
(``requests`` and ``huggingface_hub`` are undeclared needs; without the torch pin pip pulls a CUDA torch;
avoid the ``[onnx]`` extra, it pulls onnxruntime-gpu and cupy). Not installed by default: notebooks skip
this section cleanly when it is missing. Configs are ordered lists of quantizer patterns now, and the
histogram calibrator has to be loaded by hand (``load_calib_amax`` per quantizer), which ``ptq`` does.

Serves: core — used by chapter 7.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from helpers.errors import optional_package, require_package
from helpers.models.train import _as_loader, evaluate, model_device
from helpers.model_quant.ptq import METHODS, fold_batchnorm
from helpers.validation import require_choice

INSTALL = "pip install torch==2.13.0 nvidia-modelopt==0.47.0 requests huggingface_hub"


def available() -> bool:
    """True when modelopt.torch.quantization imports."""
    return optional_package("modelopt.torch.quantization") is not None


def ptq(model: nn.Module, data: Any, *, method: str = "max", fold_bn: bool = True) -> nn.Module:
    """INT8 PTQ of a copy of `model` with modelopt (per-channel weights), calibrated on data's calib split."""
    mtq = require_package("modelopt.torch.quantization", INSTALL, "the optional Model Optimizer comparison")
    require_choice(method, METHODS, "method")
    qmodel = fold_batchnorm(model) if fold_bn else copy.deepcopy(model).eval()
    dev = model_device(qmodel)
    cfg = copy.deepcopy(mtq.INT8_DEFAULT_CFG)

    def forward_loop(m: nn.Module) -> None:
        with torch.no_grad():
            for x, _ in _as_loader(data, "calib", batch_size=256):
                m(x.to(dev))

    if method == "max":
        return mtq.quantize(qmodel, cfg, forward_loop).eval()
    # Histogram calibrators: collect with mtq.quantize's hooks disabled, then compute amax per quantizer.
    from modelopt.torch.quantization.nn import TensorQuantizer

    cfg["algorithm"] = None
    qmodel = mtq.quantize(qmodel, cfg)
    quants = [m for m in qmodel.modules() if isinstance(m, TensorQuantizer) and m.is_enabled]
    for q in quants:
        if q.axis is None:  # activations: swap in a histogram calibrator
            q._calibrator = mtq.calib.HistogramCalibrator(q.num_bits, q.axis, q.unsigned)
        q.disable_quant()
        q.enable_calib()
    forward_loop(qmodel)
    for q in quants:
        if type(q._calibrator).__name__ == "HistogramCalibrator":
            q.load_calib_amax(method, **({"percentile": 99.99} if method == "percentile" else {}))
        else:
            q.load_calib_amax()
        q.enable_quant()
        q.disable_calib()
    return qmodel.eval()


def side_by_side(model: nn.Module, data: Any, pq_accuracies: dict[str, float],
                 methods: tuple[str, ...] = ("max", "percentile")) -> list[dict[str, Any]]:
    """Rows {calibrator, pytorch-quantization %, modelopt %} for per-channel INT8 on the test split."""
    rows = []
    for method in methods:
        rows.append({"calibrator": method, "pytorch-quantization %": pq_accuracies.get(method),
                     "modelopt %": evaluate(ptq(model, data, method=method), data, "test")})
    return rows
