"""The quantization explorer: sliders for bits and clipping, toggles for scheme and granularity,
a histogram with the quantization grid and clipping lines, and an error readout (MSE, SQNR).

The logic is plain functions (``explore``, ``grid_values``, ``readout``, ``draw``), tested by
pytest.
``quantization_explorer(weights)`` wires them to ipywidgets in JupyterLab. Where widgets cannot
render (under nbval/pytest, in a plain Python shell, without ipywidgets) it shows a static figure
of the default settings instead; ``WORKBOOK_WIDGETS=0`` or ``=1`` forces either mode.

Serves: chapter 5 (and notebook 05b, the quantization explorer).
"""

from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from helpers import figure_check, plots
from helpers.errors import InputError
from helpers.quant.core import dequantize, min_max, quant_range, quantize, scale_zero_point
from helpers.quant.metrics import mse, sqnr_db
from helpers.validation import (
    normalize_axis,
    require_finite,
    require_float,
    require_int_range,
    require_ndim,
    require_nonempty,
)

WIDGETS_VAR = "WORKBOOK_WIDGETS"
BITS_RANGE = (2, 8)
CLIP_RANGE = (0.05, 1.0)
MAX_GRID_LINES = 64


@dataclass(frozen=True)
class Settings:
    """One state of the explorer's controls."""

    bits: int = 8
    clip: float = 1.0  # fraction of the observed range kept (1.0 = min/max calibration)
    symmetric: bool = True
    per_channel: bool = False

    def describe(self) -> str:
        """'8-bit symmetric per-tensor, clip 100%'."""
        scheme = "symmetric" if self.symmetric else "asymmetric"
        gran = "per-channel" if self.per_channel else "per-tensor"
        return f"{self.bits}-bit {scheme} {gran}, clip {self.clip:.0%}"


@dataclass
class Result:
    """What one setting does to the data: parameters, reconstruction and error."""

    settings: Settings
    axis: int | None  # the channel axis when per-channel, else None
    scale: np.ndarray
    zero_point: np.ndarray
    qmin: int
    qmax: int
    x_hat: np.ndarray
    mse: float
    sqnr_db: float
    clipped_fraction: float
    channel_sqnr_db: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def low(self) -> np.ndarray:
        """Smallest representable value (per tensor or per channel): the lower clipping line."""
        return (self.qmin - self.zero_point) * self.scale

    @property
    def high(self) -> np.ndarray:
        """Largest representable value: the upper clipping line."""
        return (self.qmax - self.zero_point) * self.scale


def _as_numpy(x: Any, name: str = "weights") -> np.ndarray:
    """A validated float numpy copy of an array or tensor."""
    require_float(x, name)
    require_nonempty(x, name)
    require_finite(x, name)
    arr = x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)
    return arr.astype(np.float32, copy=False)


def _check_settings(s: Settings, ndim: int) -> None:
    """Bits in 2..16, clip in (0, 1], per-channel only for 2-D or larger inputs."""
    require_int_range(s.bits, 2, 16, "bits")
    if not isinstance(s.clip, (int, float)) or not 0 < s.clip <= 1:
        raise InputError(f"clip must be a fraction in (0, 1] of the observed range, "
                         f"got {s.clip!r}.")
    if s.per_channel and ndim < 2:
        raise InputError("per-channel quantization needs a weight with at least 2 dimensions "
                         "(channels × values); this input is 1-D. Use per_channel=False.")


def _per_channel_sqnr(x: np.ndarray, x_hat: np.ndarray, axis: int) -> np.ndarray:
    """SQNR in dB of each slice along `axis`."""
    xs, hs = np.moveaxis(x, axis, 0), np.moveaxis(x_hat, axis, 0)
    return np.array([sqnr_db(a, b) for a, b in zip(xs, hs)], dtype=np.float64)


def explore(x: Any, settings: Settings | None = None, axis: int = 0, **kw: Any) -> Result:
    """Quantize `x` with one setting (keywords override `settings`) and measure the error."""
    s = Settings(**{**(settings.__dict__ if settings else {}), **kw})
    arr = _as_numpy(x)
    _check_settings(s, arr.ndim)
    ax = normalize_axis(axis, arr.ndim) if arr.ndim >= 2 else None
    chan = ax if s.per_channel else None
    lo, hi = min_max(arr, axis=chan)
    lo, hi = np.asarray(lo, np.float64) * s.clip, np.asarray(hi, np.float64) * s.clip
    signed = s.symmetric  # symmetric: int grid around 0; asymmetric: uint grid with a zero point
    scale, zp = scale_zero_point(lo, hi, bits=s.bits, symmetric=s.symmetric, signed=signed)
    scale, zp = np.asarray(scale, np.float64), np.asarray(zp)
    q = quantize(arr, scale.astype(np.float32), zp, bits=s.bits, signed=signed, axis=chan)
    x_hat = dequantize(q, scale.astype(np.float32), zp, axis=chan)
    qmin, qmax = quant_range(s.bits, signed)
    clipped = float(np.mean((q == qmin) | (q == qmax)) if s.clip < 1 else 0.0)
    if s.clip < 1:  # only values beyond the range count, not those that round onto its edge
        shape = [1] * arr.ndim
        if chan is not None:
            shape[chan] = -1
        low = ((qmin - zp) * scale).reshape(shape) if chan is not None else (qmin - zp) * scale
        high = ((qmax - zp) * scale).reshape(shape) if chan is not None else (qmax - zp) * scale
        clipped = float(np.mean((arr < low) | (arr > high)))
    per_chan = _per_channel_sqnr(arr, x_hat, ax) if ax is not None else np.zeros(0)
    return Result(s, chan, scale, zp, qmin, qmax, x_hat, float(mse(arr, x_hat)),
                  float(sqnr_db(arr, x_hat)), clipped, per_chan)


def typical_channel(result: Result) -> int | None:
    """The channel with the median scale (the one the histogram shows), or None for per-tensor."""
    if result.axis is None:
        return None
    scales = result.scale.reshape(-1)
    return int(np.argsort(scales)[scales.size // 2])


def grid_values(result: Result, channel: int | None = None) -> np.ndarray:
    """The float values the integer grid can represent (for one channel when per-channel)."""
    scale, zp = result.scale, result.zero_point
    if result.axis is not None:
        c = typical_channel(result) if channel is None else channel
        if not 0 <= c < scale.size:
            raise InputError(f"channel must be in 0..{scale.size - 1}, got {c}.")
        scale, zp = scale.reshape(-1)[c], zp.reshape(-1)[c]
    codes = np.arange(result.qmin, result.qmax + 1, dtype=np.float64)
    return (codes - float(zp)) * float(scale)


def readout(result: Result) -> str:
    """One line: setting, scale and zero point, MSE, SQNR and the share of clipped values."""
    sc, zp = result.scale.reshape(-1), result.zero_point.reshape(-1)
    if sc.size == 1:
        params = f"scale {sc[0]:.3g}, zero point {int(zp[0])}"
    else:
        params = f"{sc.size} scales {sc.min():.3g}…{sc.max():.3g}"
    return (f"{result.settings.describe()} · {params} · MSE {result.mse:.3g} · "
            f"SQNR {result.sqnr_db:.1f} dB · clipped {result.clipped_fraction:.2%}")


def readout_html(result: Result) -> str:
    """The readout as HTML for the widget (SQNR in bold, the number students watch)."""
    text = readout(result).replace(f"SQNR {result.sqnr_db:.1f} dB",
                                   f"<b>SQNR {result.sqnr_db:.1f} dB</b>")
    return f'<div class="workbook-explorer-readout" style="font-family: monospace">{text}</div>'


def _draw_histogram(ax: Any, x: np.ndarray, result: Result) -> None:
    """Histogram with grid levels (thin) and clipping lines (dashed): all of x per-tensor,
    one typical channel per-channel (each channel has its own grid)."""
    c = typical_channel(result)
    values = x if c is None else np.take(x, c, axis=result.axis)
    flat = values.reshape(-1)
    which = "all values" if c is None else f"channel {c} (median range)"
    ax.hist(flat, bins=120, color=plots.PALETTE[0], alpha=0.8, log=True, label=which)
    grid = grid_values(result, c)
    step = max(1, int(np.ceil(grid.size / MAX_GRID_LINES)))
    shown = grid[::step]
    lo, hi = flat.min(), flat.max()
    visible = shown[(shown >= lo - (hi - lo)) & (shown <= hi + (hi - lo))]
    every = "" if step == 1 else f" (1 in {step} shown)"
    for i, g in enumerate(visible):
        ax.axvline(g, color=plots.PALETTE[2], lw=0.5, alpha=0.6,
                   label=f"grid levels{every}" if i == 0 else None)
    low = result.low.reshape(-1)[c or 0]
    high = result.high.reshape(-1)[c or 0]
    for i, v in enumerate((low, high)):
        ax.axvline(v, color=plots.PALETTE[3], ls="--", lw=1.5,
                   label="clipping range" if i == 0 else None)
    ax.set(xlabel="value (weight units)", ylabel="count (log scale)",
           title=f"{result.settings.describe()}: {result.sqnr_db:.1f} dB")
    ax.legend(loc="upper left", fontsize=7)


GRANULARITY_STYLE = {"per-tensor": (plots.PALETTE[0], "o", "-"), "per-channel": (plots.PALETTE[1], "s", "-")}


def _draw_channels(ax: Any, x: np.ndarray, result: Result, axis: int) -> None:
    """SQNR of each channel for both granularities; each keeps its colour, yours is drawn bold and solid."""
    other = explore(x, result.settings, axis=axis, per_channel=not result.settings.per_channel)
    by_name = {"per-channel": result if result.settings.per_channel else other,
               "per-tensor": other if result.settings.per_channel else result}
    idx = np.arange(result.channel_sqnr_db.size)
    for name, res in by_name.items():
        colour, marker, _ = GRANULARITY_STYLE[name]
        yours = res is result
        ax.plot(idx, res.channel_sqnr_db, color=colour, marker=marker, ms=3 if yours else 2,
                lw=1.4 if yours else 0.8, ls="-" if yours else ":",
                label=f"{name} (your setting)" if yours else name)
    ax.set(xlabel=f"channel (index along axis {axis})", ylabel="SQNR (dB, higher is better)")
    ax.set_title("SQNR per channel", loc="left")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)  # under the axes: covers nothing


def _draw_error(ax: Any, x: np.ndarray, result: Result) -> None:
    """Histogram of the reconstruction error x_hat - x (for 1-D inputs)."""
    ax.hist((result.x_hat - x).reshape(-1), bins=80, color=plots.PALETTE[1], log=True)
    ax.set(xlabel="error x̂ − x (weight units)", ylabel="count (log scale)")
    ax.set_title("rounding and clipping error", loc="left")


def draw(x: Any, result: Result, fig: Figure | None = None, axis: int = 0) -> Figure:
    """The explorer's figure: histogram with grid and clipping lines, and the error per channel."""
    arr = _as_numpy(x)
    if fig is None:
        fig = Figure(figsize=(10.5, 3.8))  # not pyplot: the caller decides when it is shown
    fig.clear()
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    _draw_histogram(left, arr, result)
    if arr.ndim >= 2:
        _draw_channels(right, arr, result, normalize_axis(axis, arr.ndim))
    else:
        _draw_error(right, arr, result)
    plots.label_device(right, device="numpy (any device)")
    # Fixed margins instead of tight_layout: the slider redraws this on every move.
    fig.subplots_adjust(left=0.07, right=0.985, bottom=0.24, top=0.9, wspace=0.22)
    figure_check.watch(fig)
    return fig


def widgets_can_render() -> bool:
    """True in a live Jupyter kernel with ipywidgets; False under pytest/nbval or plain Python."""
    forced = os.environ.get(WIDGETS_VAR)
    if forced in ("0", "1"):
        return forced == "1"
    if "PYTEST_CURRENT_TEST" in os.environ:  # nbval's kernels inherit pytest's environment
        return False
    try:
        import ipywidgets  # noqa: F401
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class Explorer:
    """The explorer in a notebook: live widgets in JupyterLab, a static figure elsewhere."""

    def __init__(self, weights: Any, axis: int = 0, settings: Settings | None = None,
                 interactive: bool | None = None):
        self._lock = threading.Lock()
        self.x = _as_numpy(weights)
        self.axis = normalize_axis(axis, self.x.ndim) if self.x.ndim >= 2 else 0
        self.result = explore(self.x, settings or Settings(), axis=self.axis)
        self.figure = draw(self.x, self.result, axis=self.axis)
        self.interactive = widgets_can_render() if interactive is None else bool(interactive)
        self.widget: Any = self._build() if self.interactive else None

    @property
    def settings(self) -> Settings:
        """The current setting."""
        return self.result.settings

    def update(self, **changes: Any) -> Result:
        """Apply new settings (bits, clip, symmetric, per_channel), redraw, and return the result.

        JupyterLab may deliver widget events on another thread (kernel subshells), so updates are
        serialized by a lock and each draws a fresh figure that replaces the old one whole.
        """
        with self._lock:
            result = explore(self.x, self.settings, axis=self.axis, **changes)
            figure = draw(self.x, result, axis=self.axis)
            self.result, self.figure = result, figure
            if self.widget is not None:  # figure first: when the readout changes, the figure has
                self._show_figure()      # changed too (the frontend applies updates in order)
                self._readout.value = readout_html(result)
            return result

    def _show_figure(self) -> None:
        """Put the current figure into the widget's image (PNG bytes)."""
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png", dpi=90)
        self._image.value = buf.getvalue()

    def _build(self) -> Any:
        """The widget: two sliders, two toggles, the readout and the figure."""
        import ipywidgets as w

        s = self.settings
        self.controls = {
            "bits": w.IntSlider(value=s.bits, min=BITS_RANGE[0], max=BITS_RANGE[1],
                                description="bits", continuous_update=False),
            "clip": w.FloatSlider(value=s.clip, min=CLIP_RANGE[0], max=CLIP_RANGE[1], step=0.01,
                                  description="clip", readout_format=".0%",
                                  continuous_update=False),
            "symmetric": w.ToggleButtons(options=[("symmetric", True), ("asymmetric", False)],
                                         value=s.symmetric, description="scheme"),
            "per_channel": w.ToggleButtons(options=[("per-tensor", False), ("per-channel", True)],
                                           value=s.per_channel, description="scale",
                                           disabled=self.x.ndim < 2),
        }
        for name, control in self.controls.items():
            control.observe(lambda change, n=name: self.update(**{n: change["new"]}), names="value")
        self._readout = w.HTML(readout_html(self.result))
        self._image = w.Image(format="png", layout=w.Layout(max_width="100%"))
        self._show_figure()
        c = self.controls
        return w.VBox([w.HBox([c["bits"], c["clip"]]), w.HBox([c["symmetric"], c["per_channel"]]),
                       self._readout, self._image])

    def _ipython_display_(self) -> None:
        """Show the widget, or the static figure with its readout and a note on why it is static."""
        from IPython.display import display

        if self.widget is not None:
            display(self.widget)
            return
        plots.save_figure(self.figure, f"explorer_{self.settings.describe()}")
        display(self.figure)
        print(readout(self.result))
        print("(Static view of one setting: the sliders need a live JupyterLab kernel. "
              "Call explore(weights, bits=4, ...) to try other settings here.)")


def quantization_explorer(weights: Any, axis: int = 0, *, interactive: bool | None = None,
                          **settings: Any) -> Explorer:
    """The explorer for a weight tensor (channels along `axis`); settings as in Settings()."""
    return Explorer(weights, axis=axis, settings=Settings(**settings), interactive=interactive)


def example_weights(channels: int = 32, fan_in: int = 256, seed: int = 0) -> np.ndarray:
    """A synthetic conv-like weight: Laplace values, channel ranges spread 10x, one 4x outlier."""
    require_int_range(channels, 2, 4096, "channels")
    require_int_range(fan_in, 2, 1 << 20, "fan_in")
    rng = np.random.default_rng(seed)
    spread = np.geomspace(0.02, 0.2, channels)[rng.permutation(channels)]
    w = rng.laplace(size=(channels, fan_in)) * spread[:, None]
    w[0, 0] = 4 * np.abs(w).max()  # one outlier: it stretches the per-tensor range
    return w.astype(np.float32)
