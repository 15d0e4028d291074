"""The one table of deploy backends: what each is called, where it lives, what it needs, how it is probed.

Every place that enumerates backends reads ``BACKENDS``: the ``--backend`` choices of
``python -m helpers.deploy build|bench`` (entries with an ``output``), chapter 9's ``deploy_all`` (entries
with a ``deploy`` function), the environment report (``helpers.plugins.stacks.stacks()`` and
``helpers.environment.versions()``, from ``probe`` and ``packages``) and the tests. A new backend is one
``Entry`` here plus its module.

The table is plain data, a foundation module below ``device`` and ``environment``: it names its modules and
functions as dotted strings and imports them only when asked (``load``), so the environment probe can read
it without importing any backend.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from helpers.errors import InputError

OUTPUTS = ("onnx", "engine")  # what `python -m helpers.deploy build` writes for a backend


@dataclass(frozen=True)
class Entry:
    """One deploy backend."""

    name: str  # the CLI's --backend value and the key of this table: 'ort'
    title: str  # how reports name it: 'ONNX Runtime'
    module: str  # its implementation, imported only when used: 'helpers.deploy.ort_backend'
    packages: tuple[str, ...]  # the import names it needs, any one of which is enough, preferred first
    install: str  # the line that installs them
    gpu: bool = False  # runs only on an NVIDIA GPU
    probe: str = ""  # 'module:function' returning a helpers.environment.StackStatus ('' = an import check)
    output: str = ""  # the CLI path it takes: 'onnx' (build: ONNX Runtime's INT8 ONNX file; bench: in ONNX
    # Runtime) or 'engine' (build and bench a TensorRT-family engine); '' = not in the CLI
    deploy: str = ""  # a function of `module` (job -> {label: Backend}) that deploy_all calls; '' = none

    def __post_init__(self) -> None:
        if self.output not in ("", *OUTPUTS):
            raise InputError(f"backend {self.name!r}: output must be one of {OUTPUTS} or '', got {self.output!r}.")
        if not self.packages:
            raise InputError(f"backend {self.name!r} names no package; list the import names it needs.")


BACKENDS: tuple[Entry, ...] = (
    Entry("torch", "PyTorch", "helpers.deploy.torch_int8", ("torch",), "make setup",
          probe="helpers.plugins.stacks:probe_torch", deploy="deploy_variants"),
    Entry("ort", "ONNX Runtime", "helpers.deploy.ort_backend", ("onnxruntime",), "pip install onnxruntime",
          probe="helpers.plugins.ort_compat:probe", output="onnx", deploy="deploy_variants"),
    Entry("tensorrt", "TensorRT", "helpers.deploy.tensorrt_backend", ("tensorrt", "tensorrt_rtx"),
          "pip install -r requirements-gpu.txt (or pip install tensorrt-rtx)", gpu=True,
          probe="helpers.plugins.trt_family:probe", output="engine"),
    Entry("triton", "Triton", "helpers.deploy.triton_int8", ("triton",),
          "pip install -r requirements-gpu.txt (PyTorch's CUDA wheels bring triton)", gpu=True),
)


def names(backends: tuple[Entry, ...] | None = None) -> tuple[str, ...]:
    """Every backend's name, in table order."""
    return tuple(e.name for e in (BACKENDS if backends is None else backends))


def cli_names() -> tuple[str, ...]:
    """The backends `python -m helpers.deploy build|bench` accepts (those with an output)."""
    return tuple(e.name for e in BACKENDS if e.output)


def get(name: str) -> Entry:
    """The entry called `name`, or InputError listing the names there are."""
    for e in BACKENDS:
        if e.name == name:
            return e
    raise InputError(f"no deploy backend {name!r}; the backends are {', '.join(names())}.")


def packages() -> tuple[str, ...]:
    """Every import name some backend needs, once each, in table order (for versions())."""
    return tuple(dict.fromkeys(p for e in BACKENDS for p in e.packages))


def load(ref: str) -> Callable[..., Any]:
    """The function a 'module:function' string names."""
    module, _, attr = ref.partition(":")
    fn = getattr(importlib.import_module(module), attr, None)
    if not callable(fn):
        raise InputError(f"{ref!r} names no function (expected 'package.module:function').")
    return fn


def deploy_function(entry: Entry) -> Callable[..., Any] | None:
    """The function deploy_all calls for this backend, or None when it has none."""
    return load(f"{entry.module}:{entry.deploy}") if entry.deploy else None
