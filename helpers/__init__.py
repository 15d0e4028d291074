"""Helpers for the GPU inference and INT8 quantization workbook.

Importing this package decides, before anything imports ``numba.cuda``, whether
numba runs kernels on a real GPU or in its CUDA simulator (see ``helpers.device``).

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

from helpers.device import configure_numba_simulator

configure_numba_simulator()

from helpers.session import start  # noqa: E402  (must follow the simulator switch)

__all__ = ["start"]
