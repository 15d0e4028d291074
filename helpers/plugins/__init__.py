"""Every third-party library's quirks in one folder, each library reached through one optional import.

- ``pq_compat``: pytorch-quantization 2.1.3 on torch 2.13 and on machines without CUDA.
- ``modelopt_compat``: NVIDIA Model Optimizer's INT8 configs and its hand-loaded histogram calibrators.
- ``ort_compat``: ONNX Runtime's providers, its quantizer's root-logger noise, its exceptions, its probe.
- ``trt_family``, ``trt_protocol``, ``trt_layers``: TensorRT 10/11 or TensorRT-RTX, whichever is installed
  (finding the module, the typed API both satisfy, the per-layer precisions their logs report).

The idiom every module here uses for its library: ``optional(name, install=...)`` returns the module or
raises ``helpers.errors.MissingPackageError`` with the install line; ``present(name)`` returns the module
or None. A plugin imports only foundation modules (``helpers.errors`` ...) and third-party packages.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

from helpers.errors import MissingPackageError


class _Stubs(ImportError):
    """A module imported but lacks the API (e.g. only tensorrt-stubs is installed)."""


def _load(module: str, needs: Sequence[str]) -> tuple[ModuleType | None, BaseException | None]:
    """(module, None), or (None, why): absent, broken, or lacking an attribute in `needs` (e.g. stubs only)."""
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - ImportError, or OSError for missing shared libraries: absent
        return None, exc
    missing = [n for n in needs if not hasattr(mod, n)]
    if missing:
        return None, _Stubs(f"what is installed has no {', '.join(missing)}: only type stubs?")
    return mod, None


def present(module: str, needs: Sequence[str] = ()) -> ModuleType | None:
    """`module` imported, or None when it is absent, broken, or lacks an attribute in `needs`."""
    return _load(module, needs)[0]


def optional(module: str, *, install: str, why: str = "", needs: Sequence[str] = ()) -> ModuleType:
    """`module` imported, or MissingPackageError naming the install line (and `why` it is needed)."""
    mod, exc = _load(module, needs)
    if mod is None:
        said = "; ".join(w for w in (why, str(exc) if isinstance(exc, _Stubs) else "") if w)
        raise MissingPackageError(module, install, said) from exc
    return mod
