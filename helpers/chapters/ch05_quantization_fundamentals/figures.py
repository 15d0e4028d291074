"""Chapter 5-6 figures: the quantization grid, histograms with clipping points, per-channel ranges.

Serves: chapter 5 (also chapter 6).
"""

from __future__ import annotations

from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np

from helpers import plots
from helpers.quant.calibrators import Histogram, entropy_curve, mse_curve
from helpers.quant.core import dequantize, quantize, scale_zero_point


def grid_figure(bits: int = 3, amax: float = 1.0, symmetric: bool = True, name: str = "ch05_grid") -> plt.Figure:
    """Real line vs its quantized value: a staircase with the grid points and the clipping range."""
    fig, ax = plt.subplots()
    x = np.linspace(-1.4 * amax, 1.4 * amax, 2001).astype(np.float32)
    lo = -amax if symmetric else -0.3 * amax
    s, z = scale_zero_point(lo, amax, bits=bits, symmetric=symmetric)
    xq = dequantize(quantize(x, s, z, bits=bits), s, z)
    ax.plot(x, x, color="0.6", lw=1, ls="--", label="x (no quantization)")
    ax.plot(x, xq, color=plots.PALETTE[0], lw=1.8, label=f"INT{bits} {'symmetric' if symmetric else 'asymmetric'}")
    grid = np.unique(xq)
    ax.plot(grid, grid, "o", color=plots.PALETTE[3], ms=4, label=f"{grid.size} grid points")
    ax.set(xlabel="x", ylabel="dequantize(quantize(x))", title=f"{bits}-bit grid, scale {s:.3g}")
    ax.legend()
    plots.label_device(ax, "any device (math only)")
    fig.tight_layout()
    plots.save_figure(fig, name)
    return fig


def histogram_with_clips(values: np.ndarray, amaxes: Mapping[str, float], title: str,
                         name: str | None = None, ax: plt.Axes | None = None) -> plt.Figure:
    """Log-scale histogram of |values| with one vertical line per calibrator's amax."""
    if ax is None:
        fig, ax = plt.subplots()
    else:
        fig = ax.figure  # type: ignore[assignment]  # an Axes' figure (never a SubFigure here)
    a = np.abs(np.asarray(values, dtype=np.float64).ravel())
    ax.hist(a, bins=200, color="0.75", log=True)
    for i, (method, amax) in enumerate(amaxes.items()):
        ax.axvline(amax, color=plots.PALETTE[i % len(plots.PALETTE)], lw=1.5,
                   ls=("-", "--", ":", "-.")[i % 4], label=f"{method}: {amax:.3g}")
    ax.set(xlabel="|activation|", ylabel="count (log)", title=title)
    ax.legend(fontsize=7)
    plots.label_device(ax, "any device (math only)")
    fig.tight_layout()
    plots.save_figure(fig, name or title)
    return fig


def channel_range_figure(ranges: np.ndarray, title: str, name: str | None = None) -> plt.Figure:
    """Bars of each output channel's max |w|, with the per-tensor maximum as a line."""
    fig, ax = plt.subplots()
    order = np.argsort(ranges)[::-1]
    ax.bar(np.arange(ranges.size), ranges[order], color=plots.PALETTE[0])
    ax.axhline(ranges.max(), color=plots.PALETTE[3], ls="--", lw=1, label="per-tensor amax")
    ax.set(xlabel="output channel (sorted)", ylabel="max |w| (weight units)", title=title)
    ax.legend()
    plots.label_device(ax, "any device (math only)")
    fig.tight_layout()
    plots.save_figure(fig, name or title)
    return fig


def calibration_curves_figure(hist: Histogram, name: str = "ch06_curves") -> plt.Figure:
    """The objectives the MSE and entropy calibrators minimise, against the candidate amax."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.5))
    for ax, (cand, y), label, title in (
            (a1, mse_curve(hist), "histogram MSE (value²)", "MSE method"),
            (a2, entropy_curve(hist), "KL divergence (nats)", "entropy method")):
        ax.plot(cand, y, color=plots.PALETTE[0])
        best = cand[int(np.nanargmin(y))]
        ax.axvline(best, color=plots.PALETTE[3], ls="--", lw=1, label=f"minimum at {best:.3g}")
        ax.set(xlabel="candidate amax", ylabel=label, title=title, yscale="log")
        ax.legend()
        plots.label_device(ax, "any device (math only)")
    fig.tight_layout()
    plots.save_figure(fig, name)
    return fig
