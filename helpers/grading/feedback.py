"""Pictures for feedback: yours, expected, and their difference side by side.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.plots import PALETTE


def plot_difference(got: np.ndarray, expected: np.ndarray, title: str = "") -> Any:
    """Three panels (yours / expected / yours − expected) for 1-D or 2-D arrays; returns the figure."""
    import matplotlib.pyplot as plt

    diff = got.astype(np.float64) - expected.astype(np.float64)
    fig, axes = plt.subplots(1, 3, figsize=(9, 2.6))
    for ax, data, name in zip(axes, (got, expected, diff), ("yours", "expected", "yours − expected")):
        if data.ndim == 1:
            ax.plot(np.asarray(data, dtype=np.float64), marker=".", lw=0.8)
            if name.startswith("yours −"):
                bad = np.flatnonzero(diff)
                ax.plot(bad, diff[bad], "o", mfc="none", color=PALETTE[3], label="differs")
        else:
            im = ax.imshow(np.asarray(data, dtype=np.float64), cmap="coolwarm" if name.startswith("yours −") else "viridis")
            fig.colorbar(im, ax=ax, fraction=0.046)
        ax.set_title(name, fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    plt.show()
    return fig
