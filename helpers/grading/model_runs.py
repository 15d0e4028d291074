"""What the model labs' checks share: the course's data and trained model of chapter 7, loaded once, and a
student's numeric answer read as a float (or a clear message).

Serves: core of the labs' checks (labs 06, 07).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from helpers.grading.compare import BadAnswer


@functools.cache
def setup() -> tuple[Any, Any]:
    """The MNIST-1D data and the cached, trained ResNet of chapter 7."""
    from helpers.data import load_dataset
    from helpers.models.train import trained_model

    return load_dataset("mnist1d"), trained_model("resnet_small", progress=False)


def number(x: Any, what: str) -> float:
    """x as a float, or a BadAnswer naming what was expected."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)) and not hasattr(x, "item"):
        raise BadAnswer(f"return {what} as a float, got {type(x).__name__}.")
    return float(x)
