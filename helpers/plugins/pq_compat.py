"""Every fix that pytorch-quantization 2.1.3 needs with torch 2.13 (and on machines without CUDA), in one place.

pytorch-quantization is NVIDIA's older quantization toolkit (now deprecated in favour of
nvidia-modelopt). Version 2.1.3 predates torch 2.x and assumes a CUDA device in a few places:

1. ``TensorQuantizer.load_calib_amax(method="mse")`` calls ``calib.histogram._compute_amax_mse``,
   which moves the histogram to ``.cuda()``. ``load_calib_amax`` below computes MSE amax with a CPU
   copy of that function (same maths, on the device of the histogram) and calls the upstream
   method for every other method.
2. Loading a calibrated ``state_dict`` into a fresh quantized model whose quantizers have no
   ``_amax`` buffer yet makes ``TensorQuantizer._load_from_state_dict`` call ``.cuda()``.
   ``load_quantized_state`` creates the buffers first (with the right shapes), then loads.
3. ONNX export: without ``TensorQuantizer.use_fb_fake_quant = True`` the exporter silently writes
   Round/Clip nodes instead of QuantizeLinear/DequantizeLinear, and torch 2.13's default dynamo
   exporter fails on ``amax.item()``. ``export_mode()`` switches the flag on for a ``with`` block
   only; ``EXPORT_KWARGS`` holds ``dynamo=False`` for ``torch.onnx.export``.
4. The library logs a warning per quantizer on every calibration; ``quiet()`` turns that down.

No other module patches pytorch-quantization (``helpers.model_quant.ptq`` and ``qat`` build on this one).
Nothing here replaces library functions globally.

Serves: core — used by chapters 7–12 and labs 06–09.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import torch
from torch import nn

from helpers.errors import InputError
from helpers.plugins import optional

INSTALL = "pip install pytorch-quantization==2.1.3"
EXPORT_KWARGS = {"dynamo": False}


def pq() -> ModuleType:
    """Import pytorch_quantization (with its nn and calib submodules) or raise MissingPackageError."""
    mod = optional("pytorch_quantization", install=INSTALL, why="chapters 7-8 use NVIDIA's pytorch-quantization")
    import pytorch_quantization.calib  # noqa: F401
    import pytorch_quantization.nn  # noqa: F401

    quiet()
    return mod


def quiet() -> None:
    """Silence pytorch-quantization's per-quantizer warnings (it logs through absl or logging)."""
    try:
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.ERROR)
    except ImportError:
        pass
    logging.getLogger("pytorch_quantization").setLevel(logging.ERROR)


def compute_amax_mse(calib_hist: np.ndarray, calib_bin_edges: np.ndarray, num_bits: int, unsigned: bool,
                     stride: int = 1, start_bin: int = 128) -> torch.Tensor | None:
    """The amax minimising the histogram's quantization MSE (upstream's function without `.cuda()`)."""
    from pytorch_quantization.tensor_quant import fake_tensor_quant

    if calib_bin_edges is None and calib_hist is None:
        return None
    counts = torch.from_numpy(np.asarray(calib_hist)).float()
    edges = torch.from_numpy(np.asarray(calib_bin_edges)).float()
    centers = (edges[1:] + edges[:-1]) / 2
    mses, arguments = [], []
    for i in range(start_bin, len(centers), stride):
        quant_centers = fake_tensor_quant(centers, centers[i], num_bits, unsigned)
        mses.append(float(((quant_centers - centers) ** 2 * counts).mean()))
        arguments.append(i)
    if not mses:
        raise InputError(f"the histogram has {len(centers)} bins, fewer than start_bin={start_bin}; "
                         "collect more data or lower start_bin.")
    return centers[arguments[int(np.argmin(mses))]]


def load_calib_amax(quantizer: nn.Module, method: str = "max", **kwargs: float) -> None:
    """Load a calibrated amax into a TensorQuantizer; method 'max' or a histogram method (mse works on CPU)."""
    calib = getattr(quantizer, "_calibrator", None)
    if calib is None:
        raise InputError("this quantizer has no calibrator; create it with a QuantDescriptor(calib_method=...).")
    is_hist = type(calib).__name__ == "HistogramCalibrator"
    if method == "max" and is_hist:
        raise InputError("a histogram calibrator needs method 'entropy', 'percentile' or 'mse'; "
                         "for 'max' build the quantizer with QuantDescriptor(calib_method='max').")
    if method == "max" or not is_hist:
        if method != "max":
            raise InputError(f"method={method!r} needs calib_method='histogram' in the QuantDescriptor; "
                             "a max calibrator only knows method='max'.")
        quantizer.load_calib_amax(strict=False)
        return
    if method != "mse":
        quantizer.load_calib_amax(method, **kwargs)
        return
    hist, edges = calib._calib_hist, calib._calib_bin_edges
    if isinstance(hist, torch.Tensor):
        hist, edges = hist.int().cpu().numpy(), edges.cpu().numpy()
    amax = compute_amax_mse(hist, edges, calib._num_bits, calib._unsigned,
                            int(kwargs.get("stride", 1)), int(kwargs.get("start_bin", 128)))
    if amax is None:
        amax = torch.tensor(float("nan"))
    dev = next((b.device for b in quantizer.buffers()), torch.device("cpu"))
    amax = amax.detach().to(dev)
    if hasattr(quantizer, "_amax"):
        quantizer._amax.copy_(amax)
    else:
        quantizer.register_buffer("_amax", amax)


def quantizers(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """(name, TensorQuantizer) pairs of a model."""
    from pytorch_quantization.nn import TensorQuantizer

    for name, mod in model.named_modules():
        if isinstance(mod, TensorQuantizer):
            yield name, mod


def load_quantized_state(model: nn.Module, state: dict[str, torch.Tensor]) -> nn.Module:
    """Load a calibrated state_dict into a fresh quantized model without the upstream `.cuda()` call."""
    dev = next((p.device for p in model.parameters()), torch.device("cpu"))
    for name, q in quantizers(model):
        key = f"{name}._amax"
        if key in state and not hasattr(q, "_amax"):
            q.register_buffer("_amax", torch.zeros_like(state[key], device=dev))
    model.load_state_dict(state)
    return model


@contextlib.contextmanager
def export_mode() -> Iterator[None]:
    """Inside this block TensorQuantizers emit QuantizeLinear/DequantizeLinear for ONNX export."""
    from pytorch_quantization.nn import TensorQuantizer

    before = TensorQuantizer.use_fb_fake_quant
    TensorQuantizer.use_fb_fake_quant = True
    try:
        yield
    finally:
        TensorQuantizer.use_fb_fake_quant = before
