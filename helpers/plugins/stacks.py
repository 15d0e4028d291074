"""Which software stacks really work here: each is tried (a tiny kernel, a model, an import), not assumed.

    python -m helpers          prints this report (``report()``)

The rows are ``helpers.environment.StackStatus``: numba CUDA and cupy, then one per deploy backend of
``helpers.backends`` (its own probe, or an import check), then pytorch-quantization. The probes live with
the plugins because they exercise the third-party libraries whose quirks the plugins hold.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import functools

from helpers import backends
from helpers.backends import Entry
from helpers.device import GPU_EXTRAS, device_label, gpu_info, has_gpu, simulator_enabled, torch_device
from helpers.environment import StackStatus, _version
from helpers.plugins import present


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


def _importable(entry: Entry) -> str | None:
    """The first of a backend's packages that imports here, or None."""
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
    """One status per deploy backend of helpers.backends, by its own probe or an import check."""
    return tuple(backends.load(e.probe)() if e.probe else probe_import(e) for e in backends.BACKENDS)


@functools.cache
def stacks() -> tuple[StackStatus, ...]:
    """Try every stack the course uses and say how it runs here."""
    return (*(p() for p in CORE_PROBES), *backend_probes(), *(p() for p in LATE_PROBES))


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
