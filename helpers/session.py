"""The first call of every notebook: name it, seed it, style its plots, say where it runs.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import atexit
import random
import shutil
import tempfile
from pathlib import Path

from helpers import bench, device


def seed_everything(seed: int = 0) -> None:
    """Seed Python, numpy and torch (when installed) for repeatable runs."""
    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch

        torch.manual_seed(seed)
    except ImportError:
        pass


def start(notebook: str, seed: int = 0, quiet: bool = False) -> bool:
    """Set up a notebook: records are tagged `notebook`, seeds fixed, plot style on.

    Prints one line saying whether GPU cells run for real or show stored results,
    and returns True when a GPU is present.
    """
    from helpers import plots

    bench.set_notebook(notebook)
    seed_everything(seed)
    plots.use_style()
    gpu = device.gpu_info() is not None
    if not quiet:
        if gpu:
            print(f"[{notebook}] running on {device.device_label()}: GPU cells measure this GPU.")
        else:
            sim = " numba kernels run in the CUDA simulator;" if device.simulator_enabled() else ""
            print(f"[{notebook}] no GPU here ({device.device_label()}):{sim} "
                  "GPU results are shown from the stored reference run.")
    return gpu


def scratch_dir(prefix: str) -> Path:
    """A fresh temporary folder for a notebook's files, removed when its Python process exits."""
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}_"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path
