"""NVIDIA Model Optimizer (nvidia-modelopt 0.47), pytorch-quantization's successor: its quirks, in one place.

Install (CPU, keeps the pinned torch): ``pip install torch==2.13.0 nvidia-modelopt==0.47.0 requests huggingface_hub``
(``requests`` and ``huggingface_hub`` are undeclared needs; without the torch pin pip pulls a CUDA torch;
avoid the ``[onnx]`` extra, it pulls onnxruntime-gpu and cupy). Not installed by default.

1. Configs are ordered lists of quantizer patterns now, shared module-level objects: ``int8_config()``
   hands out a deep copy, so one run's changes never leak into the next.
2. ``mtq.quantize(model, cfg, forward_loop)`` calibrates with max only; a histogram calibrator has to be
   swapped in, fed and loaded by hand, per quantizer (``load_calib_amax(method)``): ``histogram_calibrate``.

Serves: core — used by chapter 7.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from types import ModuleType
from typing import Any

from torch import nn

from helpers.plugins import optional, present

INSTALL = "pip install torch==2.13.0 nvidia-modelopt==0.47.0 requests huggingface_hub"
MODULE = "modelopt.torch.quantization"


def available() -> bool:
    """True when modelopt.torch.quantization imports."""
    return present(MODULE) is not None


def mtq() -> ModuleType:
    """modelopt.torch.quantization, or MissingPackageError with the install line."""
    return optional(MODULE, install=INSTALL, why="the optional Model Optimizer comparison")


def int8_config() -> dict[str, Any]:
    """A private copy of modelopt's INT8 default config (per-channel weights, per-tensor activations)."""
    return copy.deepcopy(mtq().INT8_DEFAULT_CFG)


def histogram_calibrate(qmodel: nn.Module, forward_loop: Callable[[nn.Module], None], method: str) -> nn.Module:
    """Calibrate a model quantized with ``algorithm=None``: histograms for activations, amax by `method`."""
    from modelopt.torch.quantization.nn import TensorQuantizer

    lib = mtq()
    quants = [m for m in qmodel.modules() if isinstance(m, TensorQuantizer) and m.is_enabled]
    for q in quants:
        if q.axis is None:  # activations: swap in a histogram calibrator
            q._calibrator = lib.calib.HistogramCalibrator(q.num_bits, q.axis, q.unsigned)
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
    return qmodel
