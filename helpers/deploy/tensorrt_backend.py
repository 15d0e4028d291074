"""TensorRT backend, written only to the API that TensorRT 10 and 11 share.

INT8 comes from the Q/DQ nodes of the ONNX graph (explicit quantization) and FP16 from an
FP16 ONNX: every network is strongly typed, so no precision flags and no calibrators
(TensorRT 11 removed both). TensorRT cannot be installed on the machines of this course, so
this module is type-checked with mypy against tensorrt-stubs 10.13 (``make typecheck``) and
never run here. Everything around it is verified: the Q/DQ ONNX it consumes
(``helpers.deploy.qdq_check``), its scales, and parity through ONNX Runtime and PyTorch.

Serves: core — chapter 9 (TensorRT engines where TensorRT is installed).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from helpers.deploy.base import Backend, require_input
from helpers.errors import InputError, MissingPackageError

INSTALL = "pip install tensorrt (needs an NVIDIA GPU and driver; TensorRT 10 or 11)"


def load_tensorrt() -> Any:
    """The tensorrt module, or MissingPackageError (the type stubs alone do not count)."""
    try:
        import tensorrt as trt
    except ImportError as exc:
        raise MissingPackageError("tensorrt", INSTALL, "the TensorRT backend") from exc
    if not hasattr(trt, "Builder"):
        raise MissingPackageError("tensorrt", INSTALL, "only the type stubs are installed")
    return trt


def _dims(d: Any) -> list[int]:
    """A TensorRT Dims as a list of ints (-1 for a dynamic axis)."""
    return [int(d[i]) for i in range(len(d))]


def build_engine(
    onnx_path: str | os.PathLike,
    engine_path: str | os.PathLike,
    *,
    min_batch: int = 1,
    opt_batch: int = 32,
    max_batch: int = 64,
    workspace_mb: int = 4096,
    timing_cache: str | os.PathLike | None = None,
) -> Path:
    """Parse an ONNX file (Q/DQ INT8 or FP16/FP32), build a strongly typed engine, save it."""
    import tensorrt as trt

    onnx_file = Path(onnx_path)
    if not onnx_file.is_file():
        raise InputError(
            f"{onnx_file} does not exist. Export it first: python -m helpers.deploy export ..."
        )
    if not 1 <= min_batch <= opt_batch <= max_batch:
        raise InputError(
            f"need 1 <= min_batch <= opt_batch <= max_batch, got {min_batch}, {opt_batch}, {max_batch}."
        )
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    flags = 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_file)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise InputError(
            f"TensorRT's ONNX parser rejected {onnx_file}: {'; '.join(errors)}. "
            "Run helpers.deploy.qdq_check.check_qdq on it to see why."
        )
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mb << 20)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        sample = _dims(tensor.shape)[1:]
        profile.set_shape(
            tensor.name,
            trt.Dims([min_batch, *sample]),
            trt.Dims([opt_batch, *sample]),
            trt.Dims([max_batch, *sample]),
        )
    config.add_optimization_profile(profile)
    cache_file = Path(timing_cache) if timing_cache else None
    cache = config.create_timing_cache(
        cache_file.read_bytes() if cache_file and cache_file.exists() else b""
    )
    config.set_timing_cache(cache, False)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise InputError(
            f"TensorRT could not build an engine from {onnx_file} (see its log above)."
        )
    if cache_file is not None:
        cache_file.write_bytes(bytes(memoryview(config.get_timing_cache().serialize())))
    out = Path(engine_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(bytes(memoryview(serialized)))
    return out


def _version_tuple(version: str) -> tuple[int, ...]:
    """'10.13.0.35' -> (10, 13)."""
    return tuple(int(p) for p in version.split(".")[:2] if p.isdigit())


def implicit_calibration_available(trt_module: Any) -> bool:
    """History only: TensorRT <= 10 still had (deprecated) IInt8 calibrators; 11 removed them."""
    return _version_tuple(str(trt_module.__version__)) < (11,) and hasattr(
        trt_module, "IInt8EntropyCalibrator2"
    )


class TensorRTBackend(Backend):
    """A serialized TensorRT engine, run through execute_async_v3 on torch CUDA tensors."""

    name = "tensorrt"
    provider = "TensorRT"
    timer = "torch"

    def __init__(self, engine_path: str | os.PathLike, precision: str = "int8"):
        import tensorrt as trt
        import torch

        path = Path(engine_path)
        if not path.is_file():
            raise InputError(
                f"{path} does not exist. Build it first: python -m helpers.deploy build ..."
            )
        self.precision = precision
        self.runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        engine = self.runtime.deserialize_cuda_engine(path.read_bytes())
        if engine is None:
            raise InputError(
                f"{path} is not an engine for this TensorRT version and GPU. Rebuild it here."
            )
        self.engine = engine
        self.context = engine.create_execution_context()
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self.inputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT]
        self.outputs = [n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT]
        self.sample_shape: list[int | None] = [
            d if d >= 0 else None for d in _dims(engine.get_tensor_shape(self.inputs[0]))[1:]
        ]
        self.stream = torch.cuda.Stream()

    def run_torch(self, x: Any) -> Any:
        """Run one batch (a CUDA tensor) and return the first output as a CUDA tensor."""
        import tensorrt as trt
        import torch

        self.context.set_input_shape(self.inputs[0], tuple(x.shape))
        self.context.set_tensor_address(self.inputs[0], int(x.data_ptr()))
        out_shape = _dims(self.context.get_tensor_shape(self.outputs[0]))
        out_dtype = torch.from_numpy(
            np.empty(0, dtype=trt.nptype(self.engine.get_tensor_dtype(self.outputs[0])))
        ).dtype
        out = torch.empty(out_shape, dtype=out_dtype, device=x.device)
        self.context.set_tensor_address(self.outputs[0], int(out.data_ptr()))
        if not self.context.execute_async_v3(self.stream.cuda_stream):
            raise RuntimeError("TensorRT execute_async_v3 failed (see its log above).")
        self.stream.synchronize()
        return out

    def run(self, x: np.ndarray) -> np.ndarray:
        """Logits for a numpy batch."""
        import torch

        require_input(x, self.sample_shape, self.inputs[0])
        return self.run_torch(torch.as_tensor(np.ascontiguousarray(x)).cuda()).float().cpu().numpy()

    def layers(self) -> list[dict[str, Any]]:
        """The engine's layers (engine inspector JSON): which fused, which run in INT8."""
        import tensorrt as trt

        inspector = self.engine.create_engine_inspector()
        info = json.loads(inspector.get_engine_information(trt.LayerInformationFormat.JSON))
        return [
            layer if isinstance(layer, dict) else {"Name": str(layer)}
            for layer in info.get("Layers", [])
        ]


def save_engine_bytes(data: bytes, path: str | os.PathLike) -> Path:
    """Write serialized engine bytes to disk."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out
