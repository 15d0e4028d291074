"""Lab 9's broken deployment: an INT8 ONNX model that is both slow and inaccurate on ONNX Runtime's CPU,
made on purpose, with the tools to measure a fix (accuracy and an ORT speed ratio in the same run).

What is broken (the students find it with helpers.model_quant.diagnose-style checks and perf_diagnose):
- the calibration batches went through a preprocessing bug (raw signals x 30 instead of standardized),
  so every activation scale is ~30x too large and the INT8 grid is nearly empty;
- it is a TensorRT-style Q/DQ graph (int8 activations, no QuantizeLinear after each layer): ORT's CPU
  cannot fuse DQ -> Conv without the Q after it, so every layer dequantizes, runs the float kernel and
  pays the Q/DQ on top (chapter 9 measures it: slower than FP32).

Serves: chapter 11 (also lab 09).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import numpy as np

from helpers.bench import timeit
from helpers.errors import InputError

PREPROCESSING_BUG = 30.0  # the broken pipeline calibrated on x * 30


def ort_quantize(fp32_path: str | os.PathLike, out_path: str | os.PathLike, calib_batches: list[np.ndarray], *,
                 uint8_activations: bool, per_channel: bool) -> Path:
    """ORT quantize_static in Q/DQ format (helpers.deploy.ort_backend) with the chosen activation type and weights."""
    from helpers.deploy.ort_backend import quantize_static_qdq

    return quantize_static_qdq(fp32_path, out_path, [np.asarray(b, dtype=np.float32) for b in calib_batches],
                               per_channel=per_channel, uint8_activations=uint8_activations)


def trt_style_qdq(model: Any, calib_batches: list[np.ndarray], out_path: str | os.PathLike) -> Path:
    """A TensorRT-style Q/DQ export (int8 activations, per-channel weights, no Q after each layer) of a torch model."""
    import torch

    from helpers.deploy.export import export_qdq
    from helpers.deploy.qdq_model import fake_quant_copy

    batches = [torch.as_tensor(np.asarray(b, dtype=np.float32)) for b in calib_batches]
    if not batches:
        raise InputError("calibration needs at least one batch of inputs.")
    return export_qdq(fake_quant_copy(model, batches), batches[0][:2], out_path)


def broken_deploy(model: Any, calib_batches: list[np.ndarray], out_path: str | os.PathLike) -> Path:
    """The deployment as it was shipped: TensorRT-style Q/DQ for ORT's CPU, calibrated on mis-preprocessed data."""
    return trt_style_qdq(model, [np.asarray(b, dtype=np.float32) * PREPROCESSING_BUG for b in calib_batches], out_path)


def fixed_deploy(fp32_path: str | os.PathLike, calib_batches: list[np.ndarray], out_path: str | os.PathLike) -> Path:
    """The reference fix: real (standardized) calibration data, uint8 activations, per-channel weights."""
    return ort_quantize(fp32_path, out_path, calib_batches, uint8_activations=True, per_channel=True)


@functools.cache
def prepare(workdir: str | None = None) -> dict[str, Any]:
    """Export the chapter 7-8 CNN (MNIST-1D) to FP32 ONNX, build the broken INT8 model; return paths and data.

    Without `workdir` the files go to a scratch folder removed when this Python process exits; a
    folder you pass is yours and is never deleted.
    """
    from helpers.data import load_dataset
    from helpers.deploy.export import export_onnx
    from helpers.models.train import trained_model

    if workdir is None:
        from helpers.session import scratch_dir

        folder = scratch_dir("lab09")
    else:
        folder = Path(workdir)
    folder.mkdir(parents=True, exist_ok=True)
    data = load_dataset("mnist1d")
    model = trained_model("resnet_small", progress=False)
    x_calib = data.calib.tensors[0].numpy()
    calib = [x_calib[i:i + 64] for i in range(0, 256, 64)]
    fp32 = export_onnx(model, data.calib.tensors[0][:2], folder / "fp32.onnx")
    broken = broken_deploy(model, calib, folder / "broken_int8.onnx")
    return {"folder": folder, "fp32": fp32, "broken": broken, "calib": calib,
            "x_test": data.test.tensors[0].numpy(), "y_test": data.test.tensors[1].numpy()}


def _session(path: str | os.PathLike) -> Any:
    """An ORT CPU session at optimization level ALL."""
    from helpers.chapters.ch11_troubleshooting.perf_diagnose import _session as session

    return session(path, None)


def onnx_accuracy(path: str | os.PathLike, x: np.ndarray, y: np.ndarray, batch: int = 250) -> float:
    """Top-1 accuracy (%) of an ONNX classifier on (x, y) through ORT's CPU provider."""
    if not Path(path).is_file():
        raise InputError(f"{path} is not a file. Your function must write the ONNX model and return its path.")
    sess = _session(path)
    name = sess.get_inputs()[0].name
    pred = np.concatenate([sess.run(None, {name: x[i:i + batch]})[0].argmax(1) for i in range(0, len(x), batch)])
    return float((pred == y).mean() * 100)


def speed_ratio(fast: str | os.PathLike, slow: str | os.PathLike, x: np.ndarray, repeats: int = 15) -> float:
    """Median time of `slow` ÷ median time of `fast` on the same batch, measured interleaved in this run."""
    a, b = _session(fast), _session(slow)
    na, nb = a.get_inputs()[0].name, b.get_inputs()[0].name
    ta, tb = [], []
    for _ in range(3):  # interleave so that a busy machine slows both alike
        ta.append(timeit(lambda: a.run(None, {na: x}), backend="cpu", warmup=1, repeats=repeats // 3).median_s)
        tb.append(timeit(lambda: b.run(None, {nb: x}), backend="cpu", warmup=1, repeats=repeats // 3).median_s)
    return float(np.median(tb) / np.median(ta))
