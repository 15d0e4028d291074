"""The software a measurement ran with (``versions()``), and the row type of the environment report.

``helpers.records.record`` stamps every record with ``versions()``: the course's core packages, every deploy
backend's packages (``helpers.backends``), CUDA, the driver and Python. ``StackStatus`` is one row of the
environment report that ``helpers.plugins.stacks`` builds by trying each stack.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass, field

from helpers.device import has_gpu

CORE_PACKAGES = ("torch", "numpy", "numba", "cupy")  # versions() adds every deploy backend's packages


@dataclass
class StackStatus:
    """Whether one software stack works here: 'real', 'simulated', 'cpu', 'missing' or 'broken'."""

    name: str
    status: str
    detail: str
    fix: str = ""
    extra: dict = field(default_factory=dict)


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
    from helpers import backends

    out = {m: _version(m) for m in dict.fromkeys((*CORE_PACKAGES, *backends.packages()))}
    try:
        import torch

        out["cuda"] = str(torch.version.cuda or "-")
    except ImportError:
        pass
    out["driver"] = _driver_version() if has_gpu() else "-"
    out["python"] = platform.python_version()
    return {k: v for k, v in out.items() if v != "-"}
