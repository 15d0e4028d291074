"""What this machine is: the GPU, its attributes, the CUDA simulator switch and the device label.

Which software stacks really work here is ``helpers.plugins.stacks`` (the environment report); the
versions a record is stamped with are ``helpers.environment.versions()``.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
import warnings
from dataclasses import dataclass
SIM_VAR = "NUMBA_ENABLE_CUDASIM"


@functools.cache
def cuda_device_count() -> int:
    """Number of CUDA devices the driver reports (0 without a driver), without importing numba or torch."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if lib.cuInit(0) != 0:
            return 0
        count = ctypes.c_int(0)
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return 0
        return count.value
    return 0


def has_gpu() -> bool:
    """True when a CUDA driver and at least one NVIDIA GPU are present."""
    return cuda_device_count() > 0


def configure_numba_simulator() -> bool:
    """Turn on numba's CUDA simulator when there is no GPU; return True if the simulator is on.

    It must run before ``numba.cuda`` is first imported, so ``import helpers`` calls it.
    An explicit ``NUMBA_ENABLE_CUDASIM`` in the environment always wins.
    """
    if SIM_VAR not in os.environ and not has_gpu():
        if "numba.cuda" in sys.modules:
            warnings.warn(
                "numba.cuda was imported before helpers, so the CUDA simulator could not be "
                "switched on. Restart the kernel and run `import helpers` first.",
                stacklevel=2,
            )
        else:
            os.environ[SIM_VAR] = "1"
    return os.environ.get(SIM_VAR) == "1"


def simulator_enabled() -> bool:
    """True when numba kernels run in the CUDA simulator instead of on a GPU."""
    return os.environ.get(SIM_VAR) == "1"


@dataclass(frozen=True)
class GPUInfo:
    """The attributes of one GPU that the course talks about."""

    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    memory_bytes: int
    l2_bytes: int
    shared_memory_per_sm: int
    registers_per_sm: int
    max_threads_per_sm: int
    warp_size: int = 32
    clock_mhz: float | None = None
    memory_clock_mhz: float | None = None
    memory_bus_bits: int | None = None

    @property
    def cc(self) -> float:
        """Compute capability as a number, e.g. 9.0."""
        return self.compute_capability[0] + self.compute_capability[1] / 10

    @property
    def peak_memory_bandwidth_gbs(self) -> float | None:
        """Theoretical DRAM bandwidth from memory clock and bus width (DDR: two transfers a clock)."""
        if not (self.memory_clock_mhz and self.memory_bus_bits):
            return None
        return 2 * self.memory_clock_mhz * 1e6 * self.memory_bus_bits / 8 / 1e9


def _cupy_props() -> dict:
    """cudaDeviceProp of device 0 through cupy, or {} when cupy is unusable."""
    try:
        import cupy

        return dict(cupy.cuda.runtime.getDeviceProperties(0))
    except Exception:
        return {}


@functools.cache
def gpu_info() -> GPUInfo | None:
    """Describe GPU 0 (through torch, with cupy filling gaps), or None without a GPU."""
    if not has_gpu():
        return None
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        p = torch.cuda.get_device_properties(0)
    except Exception:
        return None
    cp = _cupy_props()

    def pick(*vals):
        return next((v for v in vals if v), None)

    clock = pick(cp.get("clockRate"), getattr(p, "clock_rate", None))
    mem_clock = pick(cp.get("memoryClockRate"), getattr(p, "memory_clock_rate", None))
    name = p.name.decode() if isinstance(p.name, bytes) else p.name
    return GPUInfo(
        name=name,
        compute_capability=(p.major, p.minor),
        sm_count=p.multi_processor_count,
        memory_bytes=p.total_memory,
        l2_bytes=pick(getattr(p, "L2_cache_size", None), cp.get("l2CacheSize")) or 0,
        shared_memory_per_sm=pick(
            getattr(p, "shared_memory_per_multiprocessor", None), cp.get("sharedMemPerMultiprocessor")
        )
        or 0,
        registers_per_sm=pick(getattr(p, "regs_per_multiprocessor", None), cp.get("regsPerMultiprocessor"))
        or 0,
        max_threads_per_sm=pick(
            getattr(p, "max_threads_per_multi_processor", None), cp.get("maxThreadsPerMultiProcessor")
        )
        or 0,
        warp_size=getattr(p, "warp_size", 32) or 32,
        clock_mhz=clock / 1000 if clock else None,
        memory_clock_mhz=mem_clock / 1000 if mem_clock else None,
        memory_bus_bits=pick(cp.get("memoryBusWidth"), getattr(p, "memory_bus_width", None)),
    )


def device_label() -> str:
    """A short label for figures and records: the GPU's name, or the CPU's."""
    info = gpu_info()
    if info is not None:
        return info.name
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def torch_device() -> str:
    """'cuda' when torch can use a GPU, else 'cpu' (d2l's try_gpu)."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        return "cpu"


def require_gpu(what: str) -> None:
    """Raise NoGPUError naming `what` when no GPU is present."""
    from helpers.errors import NoGPUError

    if not has_gpu():
        raise NoGPUError(what)


GPU_EXTRAS = ".venv/bin/pip install -r requirements-gpu.txt"
