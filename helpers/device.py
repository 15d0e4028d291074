"""What this machine can do: the GPU, its attributes, and which software stacks really work.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from helpers.deploy.registry import Entry

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


@dataclass
class StackStatus:
    """Whether one software stack works here: 'real', 'simulated', 'cpu', 'missing' or 'broken'."""

    name: str
    status: str
    detail: str
    fix: str = ""
    extra: dict = field(default_factory=dict)


GPU_EXTRAS = ".venv/bin/pip install -r requirements-gpu.txt"


def _probe_numba() -> StackStatus:
    """Run a one-element kernel with numba.cuda, on the GPU or in the simulator."""
    try:
        from helpers._numba_probe import add_one_works

        ok = add_one_works()
    except Exception as exc:  # noqa: BLE001 - the probe reports any failure
        return StackStatus("numba CUDA", "broken", f"{type(exc).__name__}: {exc}", "make setup")
    if not ok:
        return StackStatus("numba CUDA", "broken", "kernel ran but gave a wrong answer")
    if simulator_enabled():
        return StackStatus(
            "numba CUDA", "simulated", "CUDA simulator (pure Python, tiny sizes only)",
            "needs an NVIDIA GPU and driver",
        )
    return StackStatus("numba CUDA", "real", f"numba {_version('numba')} on the GPU")


def _probe_cupy() -> StackStatus:
    """Allocate and reduce on the GPU with cupy."""
    try:
        import cupy
    except ImportError:
        fix = GPU_EXTRAS if has_gpu() else "needs an NVIDIA GPU; then " + GPU_EXTRAS
        return StackStatus("cupy", "missing", "not installed", fix)
    try:
        total = int(cupy.arange(10).sum())
        assert total == 45
    except Exception as exc:  # noqa: BLE001
        return StackStatus("cupy", "broken", f"{type(exc).__name__}: {exc}", GPU_EXTRAS)
    return StackStatus("cupy", "real", f"cupy {cupy.__version__}")


def probe_torch() -> StackStatus:
    """Multiply on the GPU with torch, or report the CPU build."""
    try:
        import torch
    except ImportError:
        return StackStatus("torch", "missing", "not installed", "make setup")
    if not torch.cuda.is_available():
        fix = "" if not has_gpu() else f"CPU-only torch build: {GPU_EXTRAS}"
        return StackStatus("torch CUDA", "cpu", f"torch {torch.__version__} runs on the CPU", fix)
    try:
        x = torch.ones(8, 8, device="cuda")
        assert float((x @ x).sum()) == 512.0
    except Exception as exc:  # noqa: BLE001
        return StackStatus("torch CUDA", "broken", f"{type(exc).__name__}: {exc}", GPU_EXTRAS)
    return StackStatus("torch CUDA", "real", f"torch {torch.__version__}, CUDA {torch.version.cuda}")


def _probe_pytorch_quantization() -> StackStatus:
    """Fake-quantize a tensor with pytorch-quantization's TensorQuantizer."""
    try:
        import torch
        from pytorch_quantization import nn as quant_nn
        from pytorch_quantization.tensor_quant import QuantDescriptor
    except ImportError:
        return StackStatus("pytorch-quantization", "missing", "not installed", "make setup")
    try:
        q = quant_nn.TensorQuantizer(QuantDescriptor(num_bits=8, amax=1.0))
        y = q(torch.tensor([0.5, 2.0]))
        assert abs(float(y[1]) - 1.0) < 1e-6
    except Exception as exc:  # noqa: BLE001
        return StackStatus("pytorch-quantization", "broken", f"{type(exc).__name__}: {exc}")
    where = "GPU" if torch_device() == "cuda" else "CPU"
    return StackStatus("pytorch-quantization", "real", f"2.1.3 fake-quant on the {where}")


CORE_PROBES = (_probe_numba, _probe_cupy)  # then one probe per deploy backend, then LATE_PROBES
LATE_PROBES = (_probe_pytorch_quantization,)
CORE_PACKAGES = ("torch", "numpy", "numba", "cupy")  # versions() adds every deploy backend's packages


def _importable(entry: Entry) -> str | None:
    """The first of a backend's packages that imports here, or None."""
    from helpers.plugins import present

    return next((p for p in entry.packages if present(p) is not None), None)


def runs_here(entry: Entry) -> bool:
    """True when one of a backend's packages imports here, and there is a GPU if it needs one."""
    return _importable(entry) is not None and (has_gpu() or not entry.gpu)


def probe_import(entry: Entry) -> StackStatus:
    """Whether one of a backend's packages imports here (the probe of a backend that names none)."""
    found = _importable(entry)
    if found is None:
        fix = entry.install if has_gpu() or not entry.gpu else f"needs an NVIDIA GPU; then {entry.install}"
        return StackStatus(entry.title, "missing", "not installed", fix)
    if entry.gpu and not has_gpu():
        return StackStatus(entry.title, "missing", f"{found} {_version(found)} installed; no GPU to run it",
                           "needs an NVIDIA GPU and driver")
    return StackStatus(entry.title, "real", f"{found} {_version(found)}")


def backend_probes() -> tuple[StackStatus, ...]:
    """One status per deploy backend of helpers.deploy.registry, by its own probe or an import check."""
    from helpers.deploy import registry

    return tuple(registry.load(e.probe)() if e.probe else probe_import(e) for e in registry.BACKENDS)


@functools.cache
def stacks() -> tuple[StackStatus, ...]:
    """Try every stack the course uses and say how it runs here."""
    return (*(p() for p in CORE_PROBES), *backend_probes(), *(p() for p in LATE_PROBES))


def _version(module: str) -> str:
    """A module's __version__, or '-' when it is absent."""
    try:
        return str(__import__(module).__version__)
    except Exception:  # noqa: BLE001
        return "-"


def _driver_version() -> str:
    """The NVIDIA driver's version as nvidia-smi reports it, or '-' without one."""
    import subprocess

    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "-"
    lines = done.stdout.strip().splitlines()
    return lines[0].strip() if done.returncode == 0 and lines else "-"


def versions() -> dict[str, str]:
    """Versions of the software the measurements depend on: packages, CUDA, the driver, Python."""
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:
    """``versions()``, read once per process (importing the packages is the slow part)."""
    from helpers.deploy import registry

    out = {m: _version(m) for m in dict.fromkeys((*CORE_PACKAGES, *registry.packages()))}
    try:
        import torch

        out["cuda"] = str(torch.version.cuda or "-")
    except ImportError:
        pass
    out["driver"] = _driver_version() if has_gpu() else "-"
    out["python"] = platform.python_version()
    return {k: v for k, v in out.items() if v != "-"}


STATUS_WORDS = {
    "real": "runs for real",
    "simulated": "simulated",
    "cpu": "CPU only",
    "missing": "skipped (missing)",
    "broken": "BROKEN",
}


def report_lines() -> list[str]:
    """The environment report as text lines."""
    info = gpu_info()
    lines = []
    if info is None:
        lines.append(f"GPU: none found. Device: {device_label()}.")
        lines.append("GPU cells show stored reference results instead (labelled with device and date).")
    else:
        lines.append(
            f"GPU: {info.name}, compute capability {info.cc:.1f}, {info.sm_count} SMs, "
            f"{info.memory_bytes / 2**30:.0f} GiB, L2 {info.l2_bytes / 2**20:.0f} MiB"
        )
    width = max(len(s.name) for s in stacks())
    lines.append(f"{'stack':<{width}}  {'status':<18} detail")
    for s in stacks():
        lines.append(f"{s.name:<{width}}  {STATUS_WORDS[s.status]:<18} {s.detail}")
        if s.fix:
            lines.append(f"{'':<{width}}  {'':<18} fix: {s.fix}")
    return lines


def report() -> None:
    """Print what will run for real, what is simulated or skipped, and how to fix each gap."""
    print("\n".join(report_lines()))


if __name__ == "__main__":
    report()
