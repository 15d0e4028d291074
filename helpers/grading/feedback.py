"""Pictures for feedback: yours, expected, and their difference side by side.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

from typing import Any

import numpy as np

PICTURES = True  # the grader's own process switches pictures off: nobody sees them there
PANELS = ("yours", "expected", "yours − expected")


def _panel_1d(ax: Any, data: np.ndarray, name: str, diff: np.ndarray) -> None:
    """One 1-D panel: the values by element index, a zero line, and circles where yours differs."""
    from helpers.plots import PALETTE

    ax.axhline(0, color="0.6", lw=0.6)
    ax.plot(np.asarray(data, dtype=np.float64), marker=".", lw=0.8, color=PALETTE[0])
    if name == PANELS[2]:
        bad = np.flatnonzero(diff)
        ax.plot(bad, diff[bad], "o", mfc="none", color=PALETTE[3], label="differs")
    ax.set_xlabel("element index")
    ax.set_ylabel("difference (array units)" if name == PANELS[2] else "value (array units)")


def _panel_2d(fig: Any, ax: Any, data: np.ndarray, name: str) -> None:
    """One 2-D panel: the array as an image with its colour bar."""
    im = ax.imshow(np.asarray(data, dtype=np.float64), cmap="coolwarm" if name == PANELS[2] else "viridis")
    fig.colorbar(im, ax=ax, fraction=0.046)
    ax.set_xlabel("column (index)")
    ax.set_ylabel("row (index)")


def plot_difference(got: np.ndarray, expected: np.ndarray, title: str = "") -> Any:
    """Three panels (yours / expected / yours − expected) for 1-D or 2-D arrays; returns the figure."""
    import matplotlib.pyplot as plt

    from helpers.plots import label_device

    if not PICTURES:
        return None
    diff = got.astype(np.float64) - expected.astype(np.float64)
    fig, axes = plt.subplots(1, 3, figsize=(10, 2.8))
    for ax, data, name in zip(axes, (got, expected, diff), PANELS):
        if data.ndim == 1:
            _panel_1d(ax, data, name, diff)
        else:
            _panel_2d(fig, ax, data, name)
        ax.set_title(name, fontsize=9)
    fig.suptitle(title, fontsize=10)
    label_device(axes[-1], note="your check")
    fig.tight_layout()
    plt.show()
    return fig
