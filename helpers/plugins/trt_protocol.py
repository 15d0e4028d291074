"""The part of TensorRT's Python API the course uses: typed Protocols that TensorRT and TensorRT-RTX share.

``TrtModule`` is satisfied by the ``tensorrt`` module (10 and 11) and by TensorRT-RTX's
``tensorrt_rtx`` / ``tensorrt_rtx_bindings``: mypy checks both against their stubs
(``make typecheck``), and ``tests/deploy/test_tensorrt.py`` checks every member by name on
whichever real module is importable. Enums and data types stay opaque (``Any``).

Serves: core — used by chapters 9–12 and labs 08, 09.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol


class TrtDims(Protocol):
    """A shape: ``len(d)`` and ``d[i]`` (-1 for a dynamic axis)."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int, /) -> int: ...


class TrtTensor(Protocol):
    """A network tensor: name, shape and data type."""

    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> TrtDims: ...
    @property
    def dtype(self) -> Any: ...


class TrtLayer(Protocol):
    """A network layer: name, type and outputs."""

    @property
    def name(self) -> str: ...
    @property
    def type(self) -> Any: ...
    @property
    def num_outputs(self) -> int: ...
    def get_output(self, index: int, /) -> TrtTensor: ...


class TrtNetwork(Protocol):
    """The network a parser fills."""

    @property
    def num_inputs(self) -> int: ...
    @property
    def num_layers(self) -> int: ...
    def get_input(self, index: int, /) -> TrtTensor: ...
    def get_layer(self, index: int, /) -> TrtLayer: ...


class TrtParserError(Protocol):
    """One error of the ONNX parser."""

    def desc(self) -> str: ...
    def node_name(self) -> str: ...


class TrtParser(Protocol):
    """TensorRT's ONNX parser."""

    @property
    def num_errors(self) -> int: ...
    def parse_from_file(self, model: str, /) -> bool: ...
    def get_error(self, index: int, /) -> TrtParserError: ...


class TrtProfile(Protocol):
    """An optimization profile: min/opt/max shape of each dynamic input."""

    def set_shape(self, input: str, min: Any, opt: Any, max: Any, /) -> None: ...


class TrtConfig(Protocol):
    """A builder configuration."""

    profiling_verbosity: Any

    def add_optimization_profile(self, profile: Any, /) -> int: ...
    def set_memory_pool_limit(self, pool: Any, pool_size: int, /) -> None: ...
    def create_timing_cache(self, serialized_timing_cache: bytes, /) -> Any: ...
    def set_timing_cache(self, cache: Any, ignore_mismatch: bool, /) -> bool: ...
    def get_timing_cache(self) -> Any: ...


class TrtHostMemory(Protocol):
    """Serialized engine bytes (``bytes(memoryview(m))``)."""

    @property
    def nbytes(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...


class TrtBuilder(Protocol):
    """The engine builder."""

    def create_network(self, flags: int = ..., /) -> TrtNetwork: ...
    def create_builder_config(self) -> TrtConfig: ...
    def create_optimization_profile(self) -> TrtProfile: ...
    def build_serialized_network(self, network: Any, config: Any, /) -> TrtHostMemory | None: ...


class TrtInspector(Protocol):
    """The engine inspector: per-layer information of a deserialized engine."""

    def get_engine_information(self, format: Any, /) -> str: ...


class TrtContext(Protocol):
    """An execution context with explicit I/O tensors."""

    def set_input_shape(self, name: str, shape: Any, /) -> bool: ...
    def set_tensor_address(self, name: str, memory: int, /) -> bool: ...
    def get_tensor_shape(self, name: str, /) -> TrtDims: ...
    def execute_async_v3(self, stream_handle: int, /) -> bool: ...


class TrtEngine(Protocol):
    """A deserialized engine."""

    @property
    def num_io_tensors(self) -> int: ...
    def get_tensor_name(self, index: int, /) -> str: ...
    def get_tensor_mode(self, name: str, /) -> Any: ...
    def get_tensor_shape(self, name: str, /) -> TrtDims: ...
    def get_tensor_dtype(self, name: str, /) -> Any: ...
    def get_tensor_profile_shape(self, name: str, profile_index: int, /) -> Sequence[TrtDims]: ...
    def create_execution_context(self) -> TrtContext: ...
    def create_engine_inspector(self) -> TrtInspector: ...


class TrtRuntime(Protocol):
    """The runtime that deserializes engines."""

    def deserialize_cuda_engine(self, serialized_engine: bytes, /) -> TrtEngine | None: ...


class TrtModule(Protocol):
    """The module itself: ``tensorrt``, ``tensorrt_rtx`` or ``tensorrt_rtx_bindings``."""

    @property
    def ILogger(self) -> type: ...
    @property
    def Logger(self) -> Callable[..., Any]: ...
    @property
    def Builder(self) -> Callable[[Any], TrtBuilder]: ...
    @property
    def OnnxParser(self) -> Callable[[Any, Any], TrtParser]: ...
    @property
    def Runtime(self) -> Callable[[Any], TrtRuntime]: ...
    @property
    def Dims(self) -> Callable[[list[int]], TrtDims]: ...
    @property
    def NetworkDefinitionCreationFlag(self) -> Any: ...
    @property
    def MemoryPoolType(self) -> Any: ...
    @property
    def ProfilingVerbosity(self) -> Any: ...
    @property
    def TensorIOMode(self) -> Any: ...
    @property
    def LayerInformationFormat(self) -> Any: ...
    def nptype(self, trt_type: Any, /) -> type: ...


# Names a real module must have, read by the conformance test (and by nothing at run time).
MEMBERS: dict[str, tuple[str, ...]] = {
    "module": (
        "ILogger",
        "Logger",
        "Builder",
        "OnnxParser",
        "Runtime",
        "Dims",
        "NetworkDefinitionCreationFlag",
        "MemoryPoolType",
        "ProfilingVerbosity",
        "TensorIOMode",
        "LayerInformationFormat",
        "nptype",
    ),
    "Builder": (
        "create_network",
        "create_builder_config",
        "create_optimization_profile",
        "build_serialized_network",
    ),
    "OnnxParser": ("num_errors", "parse_from_file", "get_error"),
    "ParserError": ("desc", "node_name"),
    "INetworkDefinition": ("num_inputs", "num_layers", "get_input", "get_layer"),
    "ILayer": ("name", "type", "num_outputs", "get_output"),
    "ITensor": ("name", "shape", "dtype"),
    "IOptimizationProfile": ("set_shape",),
    "IBuilderConfig": (
        "profiling_verbosity",
        "add_optimization_profile",
        "set_memory_pool_limit",
        "create_timing_cache",
        "set_timing_cache",
        "get_timing_cache",
    ),
    "IHostMemory": ("nbytes",),
    "Runtime": ("deserialize_cuda_engine",),
    "ICudaEngine": (
        "num_io_tensors",
        "get_tensor_name",
        "get_tensor_mode",
        "get_tensor_shape",
        "get_tensor_dtype",
        "get_tensor_profile_shape",
        "create_execution_context",
        "create_engine_inspector",
    ),
    "IExecutionContext": (
        "set_input_shape",
        "set_tensor_address",
        "get_tensor_shape",
        "execute_async_v3",
    ),
    "EngineInspector": ("get_engine_information",),
}


if (
    TYPE_CHECKING
):  # mypy checks that both real modules satisfy TrtModule (their stubs live in typings/)
    import tensorrt as _tensorrt
    import tensorrt_rtx_bindings as _tensorrt_rtx

    _TENSORRT: TrtModule = _tensorrt
    _TENSORRT_RTX: TrtModule = _tensorrt_rtx
