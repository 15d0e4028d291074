"""One plotting style and the course's common figures, each labelled with the device it shows.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib


def _outside_ipython() -> bool:
    """True in plain scripts and tests (where figures should go to files, not windows)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return True
    return get_ipython() is None


if _outside_ipython() and not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

FIGURES_VAR = "WORKBOOK_FIGURES"

# Okabe-Ito: distinguishable for the common kinds of colour blindness.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def use_style() -> None:
    """Apply the course's plot style (colour-blind-safe colours, readable sizes)."""
    plt.rcParams.update({
        "figure.figsize": (6.4, 3.8),
        "figure.dpi": 100,
        "axes.prop_cycle": matplotlib.cycler(color=PALETTE),
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "font.size": 10,
        "legend.frameon": False,
    })


def label_device(ax: plt.Axes, device: str | None = None, note: str = "") -> None:
    """Write the device (and a note such as 'stored reference, 2026-11-29') under the figure's bottom-right corner.

    The label sits just below the figure's edge, so it never covers an axis label; figures are shown
    and saved with a tight bounding box, which includes it.
    """
    if device is None:
        from helpers.device import device_label

        device = device_label()
    text = device + (f" · {note}" if note and note.lower() not in device.lower() else "")
    fig = ax.figure
    existing = getattr(fig, "_workbook_device_label", None)
    if existing is not None:  # one label per figure, however many axes it has
        if text not in existing.get_text():
            existing.set_text(existing.get_text() + "\n" + text)
        return
    fig._workbook_device_label = fig.text(0.995, -0.01, text, ha="right", va="top", fontsize=7, color="0.35")


def zoomed(ax: plt.Axes, why: str) -> None:
    """Say why a linear y axis does not start at zero (the figure check accepts it then); the reason joins the y label."""
    ax._workbook_zoom_reason = why
    ax.set_ylabel(f"{ax.get_ylabel()}\n(axis zoomed: {why})")


def save_figure(fig: plt.Figure, name: str) -> Path | None:
    """Save `fig` as PNG under $WORKBOOK_FIGURES (when set); return the path."""
    folder = os.environ.get(FIGURES_VAR)
    if not folder:
        return None
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)
    path = Path(folder) / f"{safe}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def bar_ratios(
    values: Mapping[str, float],
    *,
    title: str,
    ylabel: str = "ratio",
    target: float | None = None,
    device: str | None = None,
    note: str = "",
    name: str | None = None,
) -> plt.Figure:
    """Bar chart of named ratios, with an optional dashed target line and the values printed."""
    fig, ax = plt.subplots()
    labels = list(values)
    heights = [values[k] for k in labels]
    bars = ax.bar(labels, heights, color=[PALETTE[i % len(PALETTE)] for i in range(len(labels))])
    ax.bar_label(bars, fmt="%.2f", fontsize=8)
    if target is not None:
        ax.axhline(target, ls="--", color="0.3", lw=1, label=f"target {target:g}")
        ax.legend()
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    crowded = len(labels) > 5 or max(map(len, labels), default=0) > 10
    ax.tick_params(axis="x", labelrotation=40 if crowded else 0)
    if crowded:  # slanted labels end under their bar
        plt.setp(ax.get_xticklabels(), ha="right", rotation_mode="anchor")
    label_device(ax, device, note)
    fig.tight_layout()
    save_figure(fig, name or title)
    return fig


def sweep(
    x: Sequence[float],
    ys: Mapping[str, Sequence[float]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    logx: bool = False,
    logy: bool = False,
    device: str | None = None,
    note: str = "",
    name: str | None = None,
    ax: plt.Axes | None = None,
    ymin: float | None = None,
) -> plt.Figure:
    """Lines of one or more measured series against a swept parameter (`ymin=0` starts a linear y axis at zero)."""
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure
    for i, (label, y) in enumerate(ys.items()):
        ax.plot(x, y, marker=MARKERS[i % len(MARKERS)], color=PALETTE[i % len(PALETTE)], label=label)
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    if ymin is not None:
        ax.set_ylim(bottom=ymin)
    if len(ys) > 3:  # many lines leave no empty corner: the legend goes beside the axes
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    elif len(ys) > 1:
        ax.legend()
    label_device(ax, device, note)
    fig.tight_layout()
    save_figure(fig, name or title)
    return fig


use_style()
