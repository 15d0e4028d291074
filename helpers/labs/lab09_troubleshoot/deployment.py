"""Lab 9's broken deployment: an INT8 ONNX model that is both slow and inaccurate on ONNX Runtime's CPU,
made on purpose, with the tools to measure a fix (accuracy and an ORT speed ratio in the same run).

What is broken (the students find it with helpers.model_quant.diagnose-style checks and perf_diagnose):
- the calibration batches went through a preprocessing bug (raw signals x 30 instead of standardized),
  so every activation scale is ~30x too large and the INT8 grid is nearly empty;
- it is a TensorRT-style Q/DQ graph (int8 activations, no QuantizeLinear after each layer): ORT's CPU
  cannot fuse DQ -> Conv without the Q after it, so every layer dequantizes, runs the float kernel and
  pays the Q/DQ on top (chapter 9 measures it: slower than FP32).

Serves: lab 09.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import numpy as np

from helpers.chapters.ch11_troubleshooting.int8_exports import onnx_accuracy, ort_quantize, speed_ratio, trt_style_qdq

# what the lab's notebook calls: its own broken and fixed deployments, and chapter 11's tools to judge them
__all__ = ["PREPROCESSING_BUG", "broken_deploy", "fixed_deploy", "onnx_accuracy", "ort_quantize", "prepare",
           "speed_ratio", "trt_style_qdq"]

PREPROCESSING_BUG = 30.0  # the broken pipeline calibrated on x * 30


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
