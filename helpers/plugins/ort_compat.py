"""ONNX Runtime's quirks, in one place: the provider list, its quantizer's logging, its own exceptions.

1. ``get_available_providers()`` lists ``AzureExecutionProvider`` on every CPU build: a remote-call
   provider that runs no model here. ``providers()`` leaves it out.
2. ``quantize_static`` logs a pre-processing hint on the *root* logger (not its own): ``quiet_root_logger()``
   raises the root level for a ``with`` block only.
3. A graph ORT cannot load or run raises pybind11 exception types from ``onnxruntime...`` modules, not
   Python's own: ``is_ort_error(exc)`` tells them apart.
4. ORT reads ONNX IR versions only up to the one its build knows: the probe's one-node model says
   ``IR_VERSION`` (8, ONNX 1.10's) instead of the newest one the installed onnx writes by default.

Serves: core — used by chapters 9–12 and labs 08, 09.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from types import ModuleType
from typing import Any

from helpers.plugins import optional

INSTALL = "pip install onnxruntime"
REMOTE_PROVIDERS = ("AzureExecutionProvider",)
IR_VERSION = 8


def onnxruntime(why: str = "") -> ModuleType:
    """The onnxruntime module, or MissingPackageError with the install line."""
    return optional("onnxruntime", install=INSTALL, why=why)


def quantization() -> ModuleType:
    """onnxruntime.quantization (quantize_static and its enums), or MissingPackageError."""
    return optional("onnxruntime.quantization", install=INSTALL, why="ONNX Runtime's own INT8 quantizer")


def providers(ort: ModuleType | None = None) -> list[str]:
    """The execution providers that can run a model here (ORT's list without remote-call providers)."""
    ort = ort or onnxruntime()
    return [p for p in ort.get_available_providers() if p not in REMOTE_PROVIDERS]


@contextlib.contextmanager
def quiet_root_logger(level: int = logging.ERROR) -> Iterator[None]:
    """Inside this block the root logger drops records below `level` (ORT's quantizer logs there)."""
    root = logging.getLogger()
    before = root.level
    root.setLevel(level)
    try:
        yield
    finally:
        root.setLevel(before)


def is_ort_error(exc: BaseException) -> bool:
    """True for an exception ONNX Runtime raised itself (a graph it cannot load or run)."""
    return type(exc).__module__.startswith("onnxruntime")


def run_relu_probe() -> tuple[list[float], list[str]]:
    """Run a one-node Relu model on [-1, 2] with the CPU provider: (its output, the providers here)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    ort = onnxruntime()
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph(
        [node], "probe",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    out = sess.run(None, {"x": np.array([-1.0, 2.0], dtype=np.float32)})[0]
    return [float(v) for v in out], providers(ort)


def probe() -> Any:
    """The environment report's line for ONNX Runtime (a helpers.environment.StackStatus): runs, CPU only, or why not."""
    from helpers.device import has_gpu
    from helpers.environment import StackStatus
    from helpers.plugins import present

    if present("onnxruntime") is None or present("onnx") is None:
        return StackStatus("ONNX Runtime", "missing", "not installed", "make setup")
    ort = onnxruntime()
    try:
        out, here = run_relu_probe()
        assert out == [0.0, 2.0]
    except Exception as exc:  # noqa: BLE001 - the probe reports any failure
        return StackStatus("ONNX Runtime", "broken", f"{type(exc).__name__}: {exc}", "make setup")
    gpu = any(p in here for p in ("CUDAExecutionProvider", "TensorrtExecutionProvider"))
    return StackStatus(
        "ONNX Runtime", "real" if gpu else "cpu", f"onnxruntime {ort.__version__}: {', '.join(here)}",
        "" if gpu or not has_gpu() else "for GPU providers: pip install onnxruntime-gpu", {"providers": here},
    )
