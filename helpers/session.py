"""The first call of every notebook: name it, seed it, style its plots, say where it runs.

Also where a notebook keeps files: ``cache_dir()`` (trained models, compile caches; kept) and
``scratch_dir(prefix)`` (temporary files; removed by ``remove_scratch()``, at a clean exit, or by the
next ``start()`` when the kernel that made them was killed).

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import os
import random
import re
import shutil
import sys
import tempfile
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

from helpers import bench, device
from helpers.errors import InputError

CACHE_VAR = "WORKBOOK_CACHE"
DEFAULT_CACHE = Path("~/.cache/gpu-int8-course")
SCRATCH_PREFIX = "course-"
_SCRATCH_NAME = re.compile(rf"{SCRATCH_PREFIX}.+-(\d+)-[^-]+$")  # course-<prefix>-<pid>-<random>
_scratch: list[Path] = []


def cache_dir() -> Path:
    """The course's cache folder: $WORKBOOK_CACHE, else ~/.cache/gpu-int8-course (created on demand)."""
    path = Path(os.environ.get(CACHE_VAR) or DEFAULT_CACHE).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError, PermissionError) as exc:
        what = "no permission there" if isinstance(exc, PermissionError) else "a file is in the way"
        raise InputError(f"the model cache {path} cannot be a folder ({what}). Point ${CACHE_VAR} at a folder "
                         f"you can write, or unset it to use {DEFAULT_CACHE}.") from None
    return path


class _SeedOnImport(importlib.abc.MetaPathFinder):
    """Seeds a module (``module.manual_seed(seed)``) the moment its import finishes, once."""

    def __init__(self, name: str, seed: int):
        self.name, self.seed = name, seed

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        """Let the other finders find the module; make its loader seed it after running it."""
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_then_seed(module: ModuleType) -> None:
            run(module)
            module.manual_seed(self.seed)

        loader.exec_module = exec_then_seed  # type: ignore[method-assign]  # this spec's own loader object
        return spec


def seed_on_import(name: str, seed: int) -> None:
    """Seed module `name` now when it is imported, else right after its import (what seeding it now would give:
    nothing can draw from its generator before it exists)."""
    for hook in [h for h in sys.meta_path if isinstance(h, _SeedOnImport) and h.name == name]:
        sys.meta_path.remove(hook)
    if name in sys.modules:
        sys.modules[name].manual_seed(seed)
    else:
        sys.meta_path.insert(0, _SeedOnImport(name, seed))


def seed_everything(seed: int = 0) -> None:
    """Seed Python, numpy and torch (when installed) for repeatable runs.

    torch is seeded when the notebook imports it, not imported here: importing it costs about 2 s, which a
    notebook that never uses torch (the numpy and numba labs and chapters) would pay at its first cell.
    """
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    seed_on_import("torch", seed)


def start(notebook: str, seed: int = 0, quiet: bool = False) -> bool:
    """Set up a notebook: records are tagged `notebook`, seeds fixed, plot style on.

    Prints one line saying whether GPU cells run for real or show stored results,
    and returns True when a GPU is present.
    """
    from helpers import figure_check, plots

    bench.set_notebook(notebook)
    seed_everything(seed)
    remove_stale_scratch()
    _inductor_cache_beside_ours()
    plots.use_style()
    figure_check.enable(notebook)  # only under `make notebooks` ($WORKBOOK_FIGURE_LINT)
    gpu = device.gpu_info() is not None
    if not quiet:
        if gpu:
            print(f"[{notebook}] running on {device.device_label()}: GPU cells measure this GPU.")
        else:
            sim = " numba kernels run in the CUDA simulator;" if device.simulator_enabled() else ""
            print(f"[{notebook}] no GPU here ({device.device_label()}):{sim} "
                  "GPU results are shown from the stored reference run.")
    return gpu


def _inductor_cache_beside_ours() -> None:
    """torch.compile keeps its kernel cache with the course's caches, not in $TMPDIR (when that folder is
    writable: the grader's sandbox mounts it read-only, and then torch keeps its default)."""
    try:
        cache = cache_dir()
    except InputError:
        return
    if os.access(cache, os.W_OK):
        os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "torchinductor"))


def scratch_dir(prefix: str) -> Path:
    """A fresh temporary folder for a notebook's files (removed by ``remove_scratch()`` or at exit)."""
    if not _scratch:
        atexit.register(remove_scratch)
    path = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{prefix.strip('_-')}-{os.getpid()}-"))
    _scratch.append(path)
    return path


def remove_scratch() -> None:
    """Remove this process's scratch folders now (a notebook that made one calls this in its last cell)."""
    while _scratch:
        shutil.rmtree(_scratch.pop(), ignore_errors=True)


def _alive(pid: int) -> bool:
    """True while a process with this id exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_scratch() -> list[Path]:
    """Remove the scratch folders of course processes that are gone (a kernel killed before it could)."""
    stale = [p for p in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*")
             if p.is_dir() and (m := _SCRATCH_NAME.match(p.name)) and not _alive(int(m.group(1)))]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return stale
