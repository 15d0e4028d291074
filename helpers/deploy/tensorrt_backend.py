"""TensorRT-family backend: one code path for full TensorRT (10/11) and TensorRT-RTX.

Parse an ONNX file, build a strongly typed engine with a dynamic-batch optimization profile,
serialize it, deserialize it and run it with explicit I/O tensors. INT8 comes only from the
Q/DQ nodes of the ONNX graph and FP16 only from FP16 types in the model: no precision flags,
no calibrators (TensorRT 11 and TensorRT-RTX have neither). Which module is used, and the few
places where the two differ, live in ``helpers.plugins.trt_family``; the API both share is the
typed Protocol ``helpers.plugins.trt_protocol.TrtModule`` (mypy-checked against both).

TensorRT-RTX builds engines on any machine (even without a GPU) but its runtime runs them only
on the GPUs its runtime lists (TensorRT-RTX 1.7 says: compute capability 8.0, 8.6, 8.9, 12.x), not on Hopper.

Serves: core — used by chapter 9.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from helpers.plugins import trt_family, trt_layers
from helpers.deploy.base import Backend, require_export, require_input
from helpers.plugins.trt_family import Family, LogBook
from helpers.plugins.trt_protocol import TrtDims, TrtEngine
from helpers.errors import InputError

INSTALL = trt_family.INSTALL


def load_tensorrt() -> Any:
    """The TensorRT-family module to use (tensorrt, else TensorRT-RTX), or MissingPackageError."""
    return trt_family.require().module


def _dims(d: TrtDims) -> list[int]:
    """A TensorRT Dims as a list of ints (-1 for a dynamic axis)."""
    return [int(d[i]) for i in range(len(d))]


@dataclass
class BuildReport:
    """What parsing and building one ONNX file gave: success, time, size, layers, and what the tools said."""

    onnx: Path
    family: str
    parsed: bool = False
    built: bool = False
    build_s: float = float("nan")
    engine: Path | None = None
    engine_mb: float = float("nan")
    network_layers: int = 0
    network_types: dict[str, int] = field(default_factory=dict)
    engine_layers: list[dict[str, str]] = field(default_factory=list)
    parser_messages: list[str] = field(default_factory=list)
    build_messages: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def int8_layers(self) -> int:
        """Engine layers that read INT8."""
        return trt_layers.int8_layers(self.engine_layers)


def _parse(
    fam: Family, builder: Any, logger: Any, book: LogBook, onnx_file: Path
) -> tuple[Any, Any, list[str]]:
    """(network, parser, messages): parse one ONNX file; messages are the parser's warnings and errors."""
    start = len(book.messages)
    network = builder.create_network(trt_family.network_flags(fam))
    parser = fam.module.OnnxParser(network, logger)
    ok = parser.parse_from_file(str(onnx_file))
    errors = [parser.get_error(i) for i in range(parser.num_errors)]
    messages = book.problems(start) + [
        f"ERROR: node {e.node_name() or '?'}: {e.desc()}" for e in errors
    ]
    return (network if ok else None), parser, messages


def parser_report(onnx_path: str | os.PathLike) -> list[str] | None:
    """What a TensorRT-family ONNX parser says about a file (a summary line, then its warnings and errors).

    None when neither TensorRT nor TensorRT-RTX is importable here.
    """
    fam = trt_family.find()
    if fam is None:
        return None
    onnx_file = require_export(onnx_path)
    book = LogBook()
    logger = trt_family.capturing_logger(fam, book)
    try:
        network, _parser, messages = _parse(
            fam, fam.module.Builder(logger), logger, book, onnx_file
        )
    except Exception as exc:  # noqa: BLE001 - e.g. full TensorRT's Builder needs a GPU
        return [f"{fam.label} could not start its parser here: {type(exc).__name__}: {exc}"]
    n_err = sum(m.startswith(("ERROR", "INTERNAL_ERROR")) for m in messages)
    head = (
        f"{fam.label} parser: {onnx_file.name} parsed ({network.num_layers} network layers)"
        if network is not None
        else f"{fam.label} parser: {onnx_file.name} REJECTED"
    )
    return [f"{head}, {n_err} error(s), {len(messages) - n_err} warning(s)", *messages]


def build(
    onnx_path: str | os.PathLike,
    engine_path: str | os.PathLike | None = None,
    *,
    family: Family | None = None,
    min_batch: int = 1,
    opt_batch: int = 32,
    max_batch: int = 64,
    workspace_mb: int = 4096,
    timing_cache: str | os.PathLike | None = None,
) -> BuildReport:
    """Parse and build one ONNX file (Q/DQ INT8, FP16, FP32); a refusal is reported, not raised."""
    onnx_file = require_export(onnx_path)
    if not 1 <= min_batch <= opt_batch <= max_batch:
        raise InputError(
            f"need 1 <= min_batch <= opt_batch <= max_batch, got {min_batch}, {opt_batch}, {max_batch}."
        )
    fam = family or trt_family.require()
    trt = fam.module
    book = LogBook()
    logger = trt_family.capturing_logger(fam, book)
    rep = BuildReport(onnx_file, fam.label)
    builder = trt.Builder(logger)
    network, _parser, rep.parser_messages = _parse(fam, builder, logger, book, onnx_file)
    if network is None:
        rep.error = "the ONNX parser rejected the file"
        return rep
    rep.parsed = True
    rep.network_layers = network.num_layers
    rep.network_types = trt_layers.network_layer_types(network)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_mb << 20)
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        sample = _dims(tensor.shape)[1:]
        if any(d < 0 for d in sample):
            raise InputError(
                f"input {tensor.name!r} of {onnx_file} has dynamic axes besides the batch: "
                f"{_dims(tensor.shape)}. Export it with a fixed sample shape."
            )
        profile.set_shape(
            tensor.name,
            trt.Dims([min_batch, *sample]),
            trt.Dims([opt_batch, *sample]),
            trt.Dims([max_batch, *sample]),
        )
    config.add_optimization_profile(profile)
    cache_file = Path(timing_cache) if timing_cache and trt_family.uses_timing_cache(fam) else None
    if cache_file is not None:
        cache = config.create_timing_cache(cache_file.read_bytes() if cache_file.exists() else b"")
        config.set_timing_cache(cache, False)
    start, t0 = len(book.messages), time.perf_counter()
    try:
        serialized = builder.build_serialized_network(network, config)
    except Exception as exc:  # noqa: BLE001 - some versions raise instead of returning None
        serialized, rep.error = None, f"{type(exc).__name__}: {exc}"
    rep.build_s = time.perf_counter() - t0
    rep.build_messages = book.problems(start)
    rep.engine_layers = trt_layers.layers_from_log([m for _, m in book.messages[start:]])
    if serialized is None:
        rep.error = (
            rep.error or "; ".join(rep.build_messages[-3:]) or "the builder returned no engine"
        )
        return rep
    data = bytes(memoryview(serialized))
    if cache_file is not None:
        cache_file.write_bytes(bytes(memoryview(config.get_timing_cache().serialize())))
    out = Path(engine_path) if engine_path else onnx_file.with_suffix(".engine")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    rep.built, rep.engine, rep.engine_mb = True, out, len(data) / 1e6
    return rep


def build_engine(
    onnx_path: str | os.PathLike,
    engine_path: str | os.PathLike,
    *,
    min_batch: int = 1,
    opt_batch: int = 32,
    max_batch: int = 64,
    workspace_mb: int = 4096,
    timing_cache: str | os.PathLike | None = None,
    family: Family | None = None,
) -> Path:
    """Parse and build an ONNX file (Q/DQ INT8, FP16, FP32) into an engine file; InputError if refused."""
    rep = build(
        onnx_path,
        engine_path,
        family=family,
        min_batch=min_batch,
        opt_batch=opt_batch,
        max_batch=max_batch,
        workspace_mb=workspace_mb,
        timing_cache=timing_cache,
    )
    if not rep.parsed:
        raise InputError(
            f"{rep.family}'s ONNX parser rejected {rep.onnx}: {'; '.join(rep.parser_messages)}. "
            "Run python -m helpers.deploy check on it to see why."
        )
    if rep.engine is None:
        raise InputError(f"{rep.family} could not build an engine from {rep.onnx}: {rep.error}")
    return rep.engine


def deserialize(fam: Family, data: bytes, logger: Any, book: LogBook) -> tuple[Any, TrtEngine]:
    """(runtime, engine), or InputError in the runtime's own words (plus TensorRT-RTX's verdict)."""
    start = len(book.messages)
    runtime = fam.module.Runtime(logger)
    try:
        engine = runtime.deserialize_cuda_engine(data)
    except Exception as exc:  # noqa: BLE001 - the caught text is what the student needs to see
        engine, book.messages = None, [*book.messages, ("ERROR", f"{type(exc).__name__}: {exc}")]
    if engine is None:
        said = book.since(start, "INTERNAL_ERROR", "ERROR")[:1] or ["ERROR: no message"]
        verdict = trt_family.engine_validity(fam, runtime, data)
        fix = (
            "TensorRT-RTX runs engines only on the compute capabilities its runtime lists "
            "(the message above): RTX-class GPUs such as GeForce RTX 30xx or newer"
            if fam.is_rtx
            else "rebuild it on this machine with this TensorRT version"
        )
        raise InputError(
            f"{fam.label} cannot run this engine here: {said[0]}"
            + (f" (engine validity: {verdict})" if verdict else "")
            + f". {fix}."
        )
    return runtime, engine


class TensorRTBackend(Backend):
    """A serialized TensorRT or TensorRT-RTX engine, run by execute_async_v3 on torch tensors."""

    name = "tensorrt"
    timer = "torch"

    def __init__(
        self, engine_path: str | os.PathLike, precision: str = "int8", family: Family | None = None
    ):
        import torch

        path = Path(engine_path)
        if not path.is_file():
            raise InputError(
                f"{path} does not exist. Build it first: "
                "python -m helpers.deploy build ... --backend tensorrt"
            )
        self.timer = "torch" if torch.cuda.is_available() else "cpu"  # CUDA events on the GPU
        self.family = family or trt_family.require()
        self.precision, self.provider = precision, self.family.label
        self.book = LogBook()
        self.logger = trt_family.capturing_logger(self.family, self.book)
        self.runtime, self.engine = deserialize(
            self.family, path.read_bytes(), self.logger, self.book
        )
        engine = self.engine
        self.context = engine.create_execution_context()
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        io = self.family.module.TensorIOMode
        self.inputs = [n for n in names if engine.get_tensor_mode(n) == io.INPUT]
        self.outputs = [n for n in names if engine.get_tensor_mode(n) == io.OUTPUT]
        self.input_dtype = np.dtype(
            self.family.module.nptype(engine.get_tensor_dtype(self.inputs[0]))
        )
        self.sample_shape: list[int | None] = [
            d if d >= 0 else None for d in _dims(engine.get_tensor_shape(self.inputs[0]))[1:]
        ]
        self.max_batch = _dims(engine.get_tensor_profile_shape(self.inputs[0], 0)[2])[0]

    def _tensor(self, x: np.ndarray) -> Any:
        """The batch as a contiguous tensor of the engine's input type (on the GPU when there is one)."""
        import torch

        t = torch.from_numpy(np.ascontiguousarray(x, dtype=self.input_dtype))
        return t.cuda() if torch.cuda.is_available() else t

    def run_torch(self, x: Any) -> Any:
        """Run one batch (a tensor of the input type) on torch's current stream; return output 0."""
        import torch

        if not self.context.set_input_shape(self.inputs[0], tuple(x.shape)):
            raise InputError(
                f"the engine does not accept a batch of shape {tuple(x.shape)} "
                f"(its profile allows batches of 1 to {self.max_batch})."
            )
        self.context.set_tensor_address(self.inputs[0], int(x.data_ptr()))
        outs = []
        for name in self.outputs:  # every output needs an address, even those we do not return
            dtype = torch.from_numpy(
                np.empty(0, self.family.module.nptype(self.engine.get_tensor_dtype(name)))
            ).dtype
            outs.append(
                torch.empty(
                    _dims(self.context.get_tensor_shape(name)), dtype=dtype, device=x.device
                )
            )
            self.context.set_tensor_address(name, int(outs[-1].data_ptr()))
        stream = torch.cuda.current_stream().cuda_stream if x.is_cuda else 0
        if not self.context.execute_async_v3(stream):
            raise RuntimeError(
                f"{self.family.label} execute_async_v3 failed: {self.book.problems()[-3:]}"
            )
        return outs[0]

    def call(self, x: np.ndarray) -> Any:
        """A zero-argument function running one batch already on the GPU."""
        t = self._tensor(x)
        return lambda: self.run_torch(t)

    def run(self, x: np.ndarray) -> np.ndarray:
        """Logits for a numpy batch."""
        require_input(x, self.sample_shape, self.inputs[0])
        chunks = [
            x[i : i + self.max_batch] for i in range(0, len(x), self.max_batch)
        ]  # the profile's largest batch
        return np.concatenate(
            [self.run_torch(self._tensor(c)).float().cpu().numpy() for c in chunks]
        )

    def layers(self) -> list[dict[str, str]]:
        """The engine's layers from the engine inspector: type and the precision each runs in."""
        inspector = self.engine.create_engine_inspector()
        return trt_layers.layers_from_inspector(
            inspector.get_engine_information(self.family.module.LayerInformationFormat.JSON)
        )

    def describe(self) -> dict:
        """Name, precision and provider (which TensorRT) as a table row."""
        return {"backend": self.name, "precision": self.precision, "provider": self.provider}


def save_engine_bytes(data: bytes, path: str | os.PathLike) -> Path:
    """Write serialized engine bytes to disk."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out
