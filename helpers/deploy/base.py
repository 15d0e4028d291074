"""One small interface for every backend: load, run, benchmark, say its precision and provider.

Serves: core — used by chapters 9–12 and labs 08, 09.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from helpers import bench
from helpers.errors import InputError


@dataclass(frozen=True)
class Latency:
    """Latency percentiles and throughput of one backend at one batch size."""

    backend: str
    batch: int
    p50_ms: float
    p99_ms: float
    items_per_s: float

    def row(self) -> dict:
        """As a table row."""
        return {
            "backend": self.backend,
            "batch": self.batch,
            "p50 ms": self.p50_ms,
            "p99 ms": self.p99_ms,
            "items/s": self.items_per_s,
        }


class Backend(abc.ABC):
    """A deployed model: `run(x)` maps a numpy batch to numpy logits."""

    name: str = "backend"
    precision: str = "fp32"
    provider: str = "cpu"
    timer: str = "cpu"  # helpers.bench backend: 'cpu' or 'torch' (CUDA events)

    @abc.abstractmethod
    def run(self, x: np.ndarray) -> np.ndarray:
        """Logits for one input batch (numpy in, numpy out)."""

    def call(self, x: np.ndarray) -> Callable[[], object]:
        """A zero-argument function that runs one batch already placed where the backend needs it."""
        return lambda: self.run(x)

    @property
    def label(self) -> str:
        """'onnxruntime int8 (CPUExecutionProvider)'."""
        return f"{self.name} {self.precision} ({self.provider})"

    def describe(self) -> dict:
        """Name, precision and provider as a table row."""
        return {"backend": self.name, "precision": self.precision, "provider": self.provider}

    def benchmark(
        self,
        make_input: Callable[[int], np.ndarray],
        batch_sizes: Sequence[int] = (1, 32),
        *,
        repeats: int = 10,
        warmup: int = 2,
    ) -> list[Latency]:
        """p50/p99 latency and throughput at each batch size (inputs from `make_input(batch)`)."""
        if not batch_sizes or any(int(b) < 1 for b in batch_sizes):
            raise InputError(f"batch_sizes must be positive integers, got {list(batch_sizes)}.")
        out = []
        for b in batch_sizes:
            fn = self.call(make_input(int(b)))
            t = bench.timeit(fn, backend=self.timer, warmup=warmup, repeats=repeats)
            out.append(
                Latency(self.label, int(b), t.median_ms, t.percentile_s(99) * 1e3, b / t.median_s)
            )
        return out


@dataclass
class DeployJob:
    """What every backend of ``deploy_all`` starts from: the model, its fake-quant copy, the ONNX exports."""

    model: Any  # the trained FP32 torch model
    fake_quant: Any  # its calibrated Q/DQ fake-quant copy (helpers.deploy.qdq_model), the parity reference
    calib: list[Any]  # calibration batches (torch tensors)
    work: Path  # the folder to write into
    fp32_onnx: Path  # the FP32 export
    qdq_onnx: Path  # the TensorRT-style Q/DQ export
    paths: dict[str, Path] = field(default_factory=dict)  # the files each deployment runs, by its label


def require_export(path: str | os.PathLike) -> Path:
    """The path of an exported model, or InputError saying how to make it."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p} does not exist. Export it first: python -m helpers.deploy export ...")
    return p


def require_input(x: np.ndarray, sample_shape: Sequence[int | None], name: str) -> None:
    """Raise InputError unless x is (batch, *sample_shape) (None matches any size)."""
    if not hasattr(x, "shape"):
        raise InputError(f"input {name!r} must be a numpy array, got {type(x).__name__}.")
    want = tuple(sample_shape)
    got = tuple(x.shape[1:])
    if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
        pretty = ", ".join("?" if w is None else str(w) for w in want)
        raise InputError(
            f"input {name!r} must have shape (batch, {pretty}); got {tuple(x.shape)}. "
            "Reshape your batch, or export the model for this input shape."
        )


def _tensorrt_rows(cc: tuple[int, int] | None) -> list[dict]:
    """The TensorRT 10/11 and TensorRT-RTX rows of what_runs_here (cc: the GPU's compute capability, None without one)."""
    from helpers.plugins import trt_family

    full, rtx = trt_family.find(trt_family.TENSORRT), trt_family.find(trt_family.TENSORRT_RTX)
    rtx_runs = bool(rtx and cc and trt_family.runs_on(rtx, cc))
    if rtx is None:
        rtx_note = "not installed (pip install tensorrt-rtx: builds engines anywhere, runs them on RTX GPUs)"
    elif rtx_runs:
        rtx_note = f"{rtx.label}: builds and runs engines on this GPU"
    else:
        where = f"compute capability {cc[0]}.{cc[1]}" if cc else "a machine without a GPU"
        rtx_note = f"{rtx.label}: builds engines here; its runtime does not run them on {where}"
    return [
        {
            "backend": "TensorRT 10/11",
            "runs here": bool(full and cc),
            "note": f"{full.label}" if full else "NOT RUN here: not installable on these machines; "
            "helpers/deploy/tensorrt_backend.py is type-checked (mypy) and the Q/DQ ONNX it would consume is validated",
        },
        {"backend": "TensorRT-RTX", "runs here": rtx_runs, "note": rtx_note},
    ]


def what_runs_here() -> list[dict]:
    """Each backend of this chapter: does it run on this machine, and if not, what was checked instead."""
    from helpers.device import has_gpu
    from helpers.plugins import ort_compat, present

    ort = present("onnxruntime")
    providers = ort_compat.providers(ort) if ort else []
    torch = present("torch")
    cuda = bool(torch and torch.cuda.is_available())
    cc = torch.cuda.get_device_capability() if cuda else (0, 0)
    gpu = has_gpu()
    return [
        {
            "backend": "ONNX Runtime CPU",
            "runs here": bool(ort),
            "note": "FP32 and INT8 (quantize_static Q/DQ, default CPU path)",
        },
        {
            "backend": "ONNX Runtime CUDA / TensorRT EP",
            "runs here": any(
                p in providers for p in ("CUDAExecutionProvider", "TensorrtExecutionProvider")
            ),
            "note": "needs onnxruntime-gpu (not installed on the course machines)",
        },
        *_tensorrt_rows(cc if cuda else None),
        {
            "backend": "PyTorch INT8 (torch._int_mm)",
            "runs here": bool(torch),
            "note": "real INT8 tensor cores on the GPU"
            if cuda
            else "runs on the CPU here (correctness only, not speed)",
        },
        {
            "backend": "PyTorch FP8 (torch._scaled_mm)",
            "runs here": cuda and cc >= (8, 9),
            "note": "needs compute capability >= 8.9"
            if not cuda or cc < (8, 9)
            else f"compute capability {cc[0]}.{cc[1]}",
        },
        {
            "backend": "GPU timings (BERT-base, ResNet-50)",
            "runs here": gpu and cuda,
            "note": "measured now"
            if gpu and cuda
            else "not measured here: stored H200 reference shown instead",
        },
    ]
