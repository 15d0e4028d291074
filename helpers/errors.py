"""Errors that speak to a student: what went wrong, why, and the one thing to do.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class WorkbookError(Exception):
    """Base class of the course's own errors."""


class InputError(WorkbookError, ValueError):
    """An argument has the wrong type, dtype, shape, axis or value."""


class NoGPUError(WorkbookError, RuntimeError):
    """A GPU-only call was made on a machine without a GPU."""

    def __init__(self, what: str):
        super().__init__(
            f"{what} needs an NVIDIA GPU, and none was found on this machine. "
            "Run the CPU version of this cell (it uses the CUDA simulator or ONNX Runtime on the CPU), "
            "or look at the stored GPU reference results with helpers.reference.show(...)."
        )


class MissingPackageError(WorkbookError, ImportError):
    """An optional package is not installed."""

    def __init__(self, package: str, install: str, why: str = ""):
        self.package, self.install = package, install
        because = f" ({why})" if why else ""
        super().__init__(f"{package} is not installed{because}. Install it with: {install}")


def require_package(module: str, install: str, why: str = "") -> ModuleType:
    """Import `module` or raise MissingPackageError with the install line."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingPackageError(module, install, why) from exc


def optional_package(module: str) -> ModuleType | None:
    """Import `module`, or return None when it is not installed (or broken)."""
    try:
        return importlib.import_module(module)
    except Exception:  # noqa: BLE001 - a broken optional package is as good as absent
        return None


def skipped(what: str, why: str, fix: str = "") -> str:
    """Print and return a one-line note that a cell skipped `what`, and why."""
    msg = f"Skipped: {what} ({why})." + (f" To run it: {fix}" if fix else "")
    print(msg)
    return msg
