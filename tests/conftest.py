"""Shared pytest set-up: hardware-aware skipping (gpu-marked tests skip without a GPU)."""

from __future__ import annotations

import helpers  # noqa: F401  - switches on the CUDA simulator before any test imports numba.cuda
import pytest

from helpers.device import has_gpu


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `gpu` on machines without an NVIDIA GPU."""
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (runs in the GPU reference run)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
