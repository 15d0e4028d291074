"""What a course figure must have, checked on a drawn matplotlib Figure.

``figure_problems(fig)`` lists what a reader would notice: unlabelled axes, labels without units,
no device label, colours outside the palette, text that overlaps other text (crowded tick
labels, a footer on the x label), a legend that covers data, and a y axis whose range hides zero
so that a small change looks large (unless the figure says why, see ``helpers.plots.zoomed``, or the
axis is in dB, a logarithmic unit with no natural zero), and a roofline with a point above its roof.

Physics, on the data before it is drawn: ``roof_problems`` fails a roofline whose measured point lies
above its roof or whose roof is of another math precision than the point (one roof per precision);
``sweep_jumps`` flags a sweep whose per-item time jumps several-fold between neighbours, and
``recheck`` re-measures those points before anything is concluded from the curve.

During ``make notebooks`` every figure a notebook draws is checked: with ``WORKBOOK_FIGURE_LINT``
naming a file, ``helpers.start`` calls ``enable()``, which hooks every new pyplot figure
(matplotlib's ``figure.hooks``) and appends the problems found when it is drawn to that file as JSON
lines; ``tests/support/nbval_guard.py`` reads them back (``read_problems``) and fails the run listing them.

Serves: core — used by every chapter and every lab.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.text import Text

LINT_VAR = "WORKBOOK_FIGURE_LINT"
UNITLESS = re.compile(r"ratio|count|×|fraction|share|index|channel|bits|\(|%", re.I)
ZOOM_LIMIT = 0.5      # a linear y axis must start at or below this fraction of its top (or say why)
OVERLAP_PX = 1.5      # text boxes may touch by this many pixels
ROOF_SLACK = 0.05     # a point may sit this fraction above its roof (timing noise), no more
JUMP = 3.0            # per-item time may not rise (nor total time fall) this many times between neighbours


def _is_grey(colour: object) -> bool:
    """Greys, black and white are always allowed (reference lines, annotations)."""
    r, g, b = to_rgb(colour)
    return max(r, g, b) - min(r, g, b) < 0.05


def _categorical_x(ax: Any) -> bool:
    """True when the x ticks are names (a bar chart of named items needs no x label)."""
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    return bool(labels) and not all(re.fullmatch(r"[−\-\d.,e+ $^{}\\mathdefault]+", s) for s in labels)


def _label_problems(fig: Figure) -> list[str]:
    """Unlabelled axes, unit-less y labels, colours outside the palette, no device label."""
    from helpers import plots

    problems = []
    for i, ax in enumerate(fig.axes):
        if not ax.has_data() or hasattr(ax, "_colorbar"):
            continue
        name = f"axes {i} ({_title(ax)})"
        shared_label = any(a.get_xlabel() for a in ax.get_shared_x_axes().get_siblings(ax) if a is not ax)
        if not ax.get_xlabel() and not _categorical_x(ax) and not shared_label:
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
    if getattr(fig, "_workbook_device_label", None) is None:
        problems.append("no device label (helpers.plots.label_device)")
    return problems


def _visible_tick_labels(ax: Any) -> list[Text]:
    """Tick labels that are drawn: visible, non-empty, and at a tick inside the view limits."""
    out = []
    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if not axis.get_visible():
            continue
        lo, hi = sorted(lim)
        span = (hi - lo) or 1.0
        for tick in axis.get_major_ticks() + axis.get_minor_ticks():
            loc = tick.get_loc()
            if loc is None or not (lo - 1e-9 * span <= loc <= hi + 1e-9 * span):
                continue
            out += [t for t in (tick.label1, tick.label2) if t.get_visible() and t.get_text().strip()]
    return out


def _texts(fig: Figure) -> list[Text]:
    """Every drawn text outside legends: titles, axis labels, tick labels, annotations, figure texts."""
    texts: list[Text] = [t for t in fig.texts if t.get_visible() and t.get_text().strip()]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        texts += [t for t in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label)
                  if t.get_visible() and t.get_text().strip()]
        texts += _visible_tick_labels(ax)
        texts += [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
    return texts


def _title(ax: Any) -> str:
    """An axes' title, whichever of its three slots holds it."""
    return ax.get_title() or ax.get_title("left") or ax.get_title("right") or "untitled"


def _short(t: Text) -> str:
    """A text's string, shortened for a message."""
    s = " ".join(t.get_text().split())
    return repr(s if len(s) <= 30 else s[:27] + "...")


def _corners(t: Text, renderer: Any) -> np.ndarray:
    """The four display-space corners of a text's (possibly rotated) box."""
    box = t.get_window_extent(renderer)
    angle = t.get_rotation() % 180
    if angle in (0, 90):
        return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
    t.set_rotation(0)  # the upright size of the same text
    upright = t.get_window_extent(renderer)
    t.set_rotation(angle)
    w, h, a = upright.width / 2, upright.height / 2, np.deg2rad(angle)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    centre = np.array([(box.x0 + box.x1) / 2, (box.y0 + box.y1) / 2])
    return centre + np.array([[-w, -h], [w, -h], [w, h], [-w, h]]) @ rot.T


def _overlap(p: np.ndarray, q: np.ndarray) -> bool:
    """True when two convex quadrilaterals overlap by more than OVERLAP_PX (separating-axis test)."""
    for poly in (p, q):
        for i in range(4):
            edge = poly[(i + 1) % 4] - poly[i]
            axis = np.array([-edge[1], edge[0]]) / (np.hypot(*edge) or 1.0)
            a, b = p @ axis, q @ axis
            if min(a.max(), b.max()) - max(a.min(), b.min()) <= OVERLAP_PX:
                return False
    return True


def _overlap_problems(fig: Figure, renderer: Any) -> list[str]:
    """Texts whose boxes overlap (crowded tick labels, a label on a label), as one line per figure."""
    boxes = [(t, _corners(t, renderer)) for t in _texts(fig)]
    pairs = [f"text {_short(a)} overlaps text {_short(b)}"
             for (a, pa), (b, pb) in itertools.combinations(boxes, 2) if _overlap(pa, pb)]
    if not pairs:
        return []
    more = f" (and {len(pairs) - 3} more overlapping pairs)" if len(pairs) > 3 else ""
    return ["; ".join(pairs[:3]) + more]


def _data_points(ax: Any) -> np.ndarray:
    """Display coordinates of the plotted data: line vertices (and points along segments), bars, markers."""
    pts = []
    for line in ax.lines:
        if line.get_transform() is not ax.transData or not line.get_visible():
            continue  # axhline/axvline and other reference lines span the axes by design
        xy = ax.transData.transform(np.column_stack(line.get_data()).astype(float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy) > 1:  # points along each segment, so a legend over a line between markers counts
            t = np.linspace(0, 1, 12)[:, None, None]
            xy = (xy[:-1] + t * (xy[1:] - xy[:-1])).reshape(-1, 2)
        pts.append(xy)
    for coll in ax.collections:
        offs = coll.get_offsets()
        if len(offs) and coll.get_visible():
            pts.append(coll.get_offset_transform().transform(np.asarray(offs, float)))
    for patch in ax.patches:
        if patch.get_visible() and patch.get_transform().contains_branch(ax.transData):
            bb = patch.get_window_extent()
            pts.append(np.array([[bb.x0, bb.y1], [bb.x1, bb.y1], [(bb.x0 + bb.x1) / 2, bb.y1],
                                 [(bb.x0 + bb.x1) / 2, (bb.y0 + bb.y1) / 2]]))
    return np.concatenate(pts) if pts else np.zeros((0, 2))


def _legend_problems(fig: Figure, renderer: Any) -> list[str]:
    """Legends whose box covers plotted data or annotation text."""
    problems = []
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None or not leg.get_visible():
            continue
        box = leg.get_window_extent(renderer)
        pts = _data_points(ax)
        inside = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1))
        texts = [t for t in _texts(fig) if t is not getattr(fig, "_workbook_device_label", None)]
        covered = [t for t in texts if t.get_window_extent(renderer).overlaps(box)]
        if inside.any() or covered:
            what = f"{int(inside.sum())} data points" if inside.any() else f"text {_short(covered[0])}"
            problems.append(f"axes ({_title(ax)}): the legend covers {what}")
    return problems


def _zoom_problems(fig: Figure) -> list[str]:
    """Linear y axes of positive data that start far above zero without saying why."""
    problems = []
    for ax in fig.axes:
        if ax.get_yscale() != "linear" or not ax.has_data() or getattr(ax, "_workbook_zoom_reason", None):
            continue
        if re.search(r"\bdB\b", ax.get_ylabel()):  # decibels are already a log scale: zero is no baseline
            continue
        lo, hi = ax.get_ylim()
        if lo > 0 and hi > 0 and lo > ZOOM_LIMIT * hi:
            problems.append(f"axes ({_title(ax)}): the y axis runs from {lo:.4g} to {hi:.4g}, "
                            f"so a {100 * (hi - lo) / hi:.0f}% range fills the plot; start it at zero or "
                            "say why with helpers.plots.zoomed(ax, why)")
    return problems


def _drawn_roof_problems(fig: Figure) -> list[str]:
    """Scatter points drawn above the line labelled 'roof…' of their axes (the highest roof, if several)."""
    problems = []
    for ax in fig.axes:
        roofs = [ln for ln in ax.lines if str(ln.get_label()).lower().startswith("roof")]
        if not roofs:
            continue
        curves = [np.asarray(ln.get_data(), float) for ln in roofs]
        for coll in ax.collections:
            for x, y in np.asarray(coll.get_offsets(), float):
                tops = [np.exp(np.interp(np.log(x), np.log(c[0]), np.log(c[1]))) for c in curves]
                if np.isfinite(y) and y > max(tops) * (1 + ROOF_SLACK):
                    problems.append(f"axes ({_title(ax)}): a point at {y:.4g} lies above its roof "
                                    f"({max(tops):.4g} at intensity {x:.3g}): wrong roof or wrong count")
    return problems


def roof_problems(points: Sequence[tuple[str, str, float, float]],
                  roofs: Mapping[str, tuple[float, float]], slack: float = ROOF_SLACK) -> list[str]:
    """What is wrong with a roofline's data: points (name, precision, FLOP/byte, TFLOP/s) under roofs
    {precision: (peak TFLOP/s, GB/s)}. A point needs a roof of its own precision and must lie under it."""
    problems = []
    for name, prec, ai, tflops in points:
        if prec not in roofs:
            problems.append(f"{name} ({prec}) has no {prec} roof (roofs: {', '.join(sorted(roofs)) or 'none'}): "
                            "one roof per math precision")
            continue
        peak, gbs = roofs[prec]
        top = min(peak, ai * gbs / 1e3)
        if tflops > top * (1 + slack):
            problems.append(f"{name} ({prec}) at {tflops:.4g} TFLOP/s lies above its {prec} roof "
                            f"({top:.4g} at {ai:.3g} FLOP/byte)")
    return problems


def sweep_jumps(items: Sequence[float], per_item: Sequence[float], factor: float = JUMP) -> list[int]:
    """Indices of sweep points next to an implausible jump: per-item time rising `factor`-fold, or the
    total time (per-item × items) falling `factor`-fold, from one point to the next (both ends flagged)."""
    order = sorted(range(len(items)), key=lambda i: items[i])
    flagged: set[int] = set()
    for a, b in zip(order, order[1:]):
        up = per_item[b] / per_item[a]
        fall = (per_item[a] * items[a]) / (per_item[b] * items[b])
        if up >= factor or fall >= factor:
            flagged |= {a, b}
    return sorted(flagged)


@dataclass(frozen=True)
class SweepCheck:
    """A sweep after its flagged points were re-measured: what was flagged, and what still jumps."""

    items: tuple[float, ...]
    per_item: tuple[float, ...]        # re-measured values where flagged
    flagged: tuple[float, ...]         # items flagged at first
    persistent: tuple[float, ...]      # items still next to a jump after re-measuring
    remeasured: bool

    def note(self) -> str:
        """One sentence on what the check found (empty when nothing jumped)."""
        if not self.flagged:
            return ""
        f = ", ".join(f"{x:,.0f}" for x in self.flagged)
        if not self.remeasured:
            return f"points {f} jump several-fold against their neighbours and were not re-measured"
        if not self.persistent:
            return f"points {f} jumped several-fold; re-measured, the jumps went away (they were noise)"
        return (f"points {f} jumped several-fold; re-measured, {', '.join(f'{x:,.0f}' for x in self.persistent)} "
                "still do (a real effect, or a machine busy with something else)")


def recheck(items: Sequence[float], per_item: Sequence[float], measure: Callable[[float], float] | None,
            *, rounds: int = 3, factor: float = JUMP,
            flag: Callable[[Sequence[float], Sequence[float]], list[int]] | None = None) -> SweepCheck:
    """Flag jumps, re-measure each flagged point `rounds` times with measure(item) -> per-item time
    (median kept), and flag again; measure=None (a stored sweep) re-measures nothing. `flag` (items,
    values) -> indices replaces the jump test, e.g. rounds beyond a physical bound (chapter 10)."""
    find = flag or (lambda xs, vs: sweep_jumps(xs, vs, factor))
    values = list(per_item)
    first = find(items, values)
    if measure is not None:
        for i in first:
            values[i] = float(np.median([measure(items[i]) for _ in range(rounds)]))
    last = find(items, values) if measure is not None else first
    return SweepCheck(tuple(items), tuple(values), tuple(items[i] for i in first),
                      tuple(items[i] for i in last), measure is not None)


def figure_problems(fig: Figure, renderer: Any = None) -> list[str]:
    """Every problem a reader would notice in `fig` (drawn first when no renderer is given)."""
    if renderer is None:
        fig.draw_without_rendering()
        get = getattr(fig.canvas, "get_renderer", None)
        renderer = get() if get else fig._get_renderer()  # a Figure() made without pyplot has a bare canvas
    return (_label_problems(fig) + _overlap_problems(fig, renderer) + _legend_problems(fig, renderer)
            + _zoom_problems(fig) + _drawn_roof_problems(fig))


# ---- make notebooks: check every figure a notebook draws ----------------------------------------

_uids = itertools.count()
_seen: set[tuple[str, tuple[str, ...]]] = set()
_state: dict[str, str] = {"notebook": ""}


def _on_draw(event: Any) -> None:
    """Check a figure when it is drawn; append what it finds (nothing, too) to $WORKBOOK_FIGURE_LINT.

    A figure is often drawn before its caller has finished it (``plots.save_figure`` draws while a helper
    builds it; the caller may then add a legend or ``plots.zoomed``), so each figure's record carries an
    id and ``read_problems`` keeps only its last draw: what the student sees.
    """
    fig = event.canvas.figure
    path = os.environ.get(LINT_VAR)
    if not path:
        return
    try:
        problems = figure_problems(fig, event.renderer)
    except Exception as exc:  # noqa: BLE001 - a checker crash is reported, never breaks the notebook
        problems = [f"the figure check itself failed: {type(exc).__name__}: {exc}"]
    uid = fig.__dict__.setdefault("_workbook_uid", f"{os.getpid()}-{next(_uids)}")
    key = (uid, tuple(problems))
    if key in _seen:
        return
    _seen.add(key)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"notebook": _state["notebook"], "figure": " / ".join(titles) or "untitled",
                            "uid": uid, "problems": problems}) + "\n")


def attach(fig: Figure) -> None:
    """Check `fig` whenever it is drawn (matplotlib calls this for every new pyplot figure)."""
    fig.canvas.mpl_connect("draw_event", _on_draw)


def watch(fig: Figure) -> None:
    """Check a figure made without pyplot (``Figure()``) too, when notebook checking is on."""
    if os.environ.get(LINT_VAR):
        attach(fig)


def enable(notebook: str) -> bool:
    """Hook every new pyplot figure of `notebook` when $WORKBOOK_FIGURE_LINT is set; True when on."""
    import matplotlib.pyplot as plt

    if not os.environ.get(LINT_VAR):
        return False
    _state["notebook"] = notebook
    hook = f"{__name__}:attach"
    if hook not in plt.rcParams["figure.hooks"]:
        plt.rcParams["figure.hooks"] = [*plt.rcParams["figure.hooks"], hook]
    return True


def read_problems(path: str | os.PathLike) -> list[dict]:
    """The figures with problems that a notebook run appended to `path`, each as last drawn (none when the
    file does not exist)."""
    p = Path(path)
    if not p.exists():
        return []
    last: dict[str, dict] = {}
    for i, line in enumerate(p.read_text(encoding="utf-8").splitlines()):
        if line.strip():
            rec = json.loads(line)
            last[rec.get("uid", f"line {i}")] = rec
    return [r for r in last.values() if r["problems"]]

