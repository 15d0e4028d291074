"""Python twins of numba CUDA kernels: the same source with some globals replaced.

A kernel reads module-level constants such as ``TILE`` when it is compiled (or, in the simulator,
when it runs). ``twin(kern, TILE=32)`` gives a copy of its Python function that sees TILE = 32, so one
student kernel can run in the simulator with a tiny tile and be compiled for a GPU with a large one.
In a simulator twin, device functions the kernel calls (``@cuda.jit(device=True)``) run as Python
too, which lets the simulator trace kernels that call device functions on a machine with a GPU.

Serves: core — used by labs 02, 03, 11–13.
"""

from __future__ import annotations

import types
from typing import Any

from helpers.errors import InputError


def python_function(kern: Any) -> types.FunctionType:
    """The Python function behind a numba @cuda.jit kernel or device function (real or simulated)."""
    py = getattr(kern, "py_func", None) or getattr(kern, "fn", None)
    if not isinstance(py, types.FunctionType):
        raise InputError(f"expected a numba @cuda.jit function, got {type(kern).__name__}. "
                         "Decorate your function with @cuda.jit and pass the function itself.")
    return py


def _is_simulated_device(obj: Any) -> bool:
    """True for a device function of numba's CUDA simulator (callable from Python as it is)."""
    return type(obj).__name__ == "FakeCUDAKernel" and bool(getattr(obj, "_device", False))


def _is_device_function(obj: Any) -> bool:
    """True for a compiled numba CUDA device function (a dispatcher that Python cannot call)."""
    if _is_simulated_device(obj) or not isinstance(getattr(obj, "py_func", None), types.FunctionType):
        return False
    options = getattr(obj, "targetoptions", None) or {}
    return bool(options.get("device", False)) or type(obj).__name__ == "CUDADispatcher"


def twin(kern: Any, *, python_devices: bool = False, strict: bool = True, **constants: Any) -> types.FunctionType:
    """A copy of the kernel's Python function whose globals `constants` are replaced.

    With python_devices=True every device function it calls is replaced by a simulator device
    function running that function's own Python twin (recursively). strict: a constant the
    kernel does not use is an error (else it is ignored).
    """
    py = python_function(kern)
    missing = [name for name in constants if name not in py.__code__.co_names]
    if missing and strict:
        raise InputError(f"{py.__name__} does not use the global(s) {', '.join(missing)}; "
                         f"write the kernel with {', '.join(missing)} (not a literal number).")
    env = dict(py.__globals__)
    env.update(constants)
    if python_devices:
        from numba.cuda.simulator.kernel import FakeCUDAKernel

        for name in py.__code__.co_names:
            obj = env.get(name)
            if _is_device_function(obj):
                env[name] = FakeCUDAKernel(twin(obj, python_devices=True), device=True)
    out = types.FunctionType(py.__code__, env, py.__name__, py.__defaults__, py.__closure__)
    out.__kwdefaults__ = py.__kwdefaults__
    return out


def simulator_kernel(kern: Any, **constants: Any) -> Any:
    """A simulator kernel of the same source (device functions as Python), for simtrace.run_traced."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return FakeCUDAKernel(twin(kern, python_devices=True, strict=False, **constants), device=False)


def simulator_device(fn: Any) -> Any:
    """A device function as plain Python (its own device-function calls too), callable on any machine."""
    return twin(fn, python_devices=True)


def gpu_kernel(kern: Any, **constants: Any) -> Any:
    """The kernel compiled by numba for this GPU with the given constants (e.g. TILE=32)."""
    from numba import cuda

    return cuda.jit(twin(kern, **constants))
