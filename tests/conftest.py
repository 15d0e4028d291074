"""Shared pytest set-up: hardware-aware skipping (gpu-marked tests skip without a GPU); `-m browser` collects only
the files that hold browser tests."""

from __future__ import annotations

from pathlib import Path

import helpers  # noqa: F401  - switches on the CUDA simulator before any test imports numba.cuda
import pytest

from helpers.device import has_gpu


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With `-m browser` (make browser), leave out the test files that mark no test `browser`: importing the whole
    suite to pick the few browser tests took 15 s."""
    if config.option.markexpr.strip() != "browser" or not collection_path.name.startswith("test_") \
            or collection_path.suffix != ".py":
        return None
    return None if "mark.browser" in collection_path.read_text(encoding="utf-8") else True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip tests marked `gpu` on machines without an NVIDIA GPU."""
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (runs in the GPU reference run)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
