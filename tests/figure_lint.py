"""What a course figure must have, checked on a matplotlib Figure: labelled axes with units,
the device label in the corner (helpers.plots.label_device), and colour-blind-safe colours."""

from __future__ import annotations

import re

from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure

from helpers import plots

UNITLESS = re.compile(r"ratio|count|×|fraction|share|index|channel|bits|\(|%", re.I)


def _is_grey(colour: object) -> bool:
    """Greys, black and white are always allowed (reference lines, annotations)."""
    r, g, b = to_rgb(colour)
    return max(r, g, b) - min(r, g, b) < 0.05


def _device_labelled(fig: Figure) -> bool:
    """True when label_device has written the device in the figure's corner."""
    return getattr(fig, "_workbook_device_label", None) is not None


def _categorical_x(ax) -> bool:
    """True when the x ticks are names (a bar chart of named items needs no x label)."""
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    return bool(labels) and not all(re.fullmatch(r"[−\-\d.,e+ ]+", s) for s in labels)


def figure_problems(fig: Figure) -> list[str]:
    """Problems a reader would notice: unlabelled axes, labels without units, no device, colours."""
    problems = []
    for i, ax in enumerate(fig.axes):
        if not ax.has_data() or hasattr(ax, "_colorbar"):
            continue
        name = f"axes {i} ({ax.get_title() or 'untitled'})"
        if not ax.get_xlabel() and not _categorical_x(ax):
            problems.append(f"{name}: no x-axis label")
        ylabel = ax.get_ylabel()
        if not ylabel:
            problems.append(f"{name}: no y-axis label")
        elif not UNITLESS.search(ylabel):
            problems.append(f"{name}: y label {ylabel!r} gives no unit")
        colours = [ln.get_color() for ln in ax.lines] + [p.get_facecolor() for p in ax.patches]
        allowed = {c.lower() for c in plots.PALETTE}
        odd = sorted({to_hex(c) for c in colours if not _is_grey(c) and to_hex(c) not in allowed})
        if odd:
            problems.append(f"{name}: colours outside the colour-blind-safe palette: {odd}")
    if not _device_labelled(fig):
        problems.append("no device label (helpers.plots.label_device)")
    return problems
