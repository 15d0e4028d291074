"""Two INT8 ONNX exports of one torch model, the tools to judge them on ONNX Runtime's CPU: ORT's own
quantize_static (u8 activations, per-channel weights) against a TensorRT-style Q/DQ graph (int8 activations,
no QuantizeLinear after each layer, which ORT's CPU cannot fuse), with accuracy and a same-run speed ratio.

Serves: chapter 11 (also lab 09's broken deployment).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from helpers.bench import timeit
from helpers.errors import InputError


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
