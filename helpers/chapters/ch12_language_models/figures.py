"""Chapter 12's figures, drawn from live rows or from the stored reference records (labelled as stored).

Serves: chapter 12.
"""

from __future__ import annotations

import math
from typing import Any

from helpers import plots
from helpers.chapters.ch02_gpu_architecture.roofs import compute_roofs
from helpers.chapters.ch12_language_models import batch_sweep
from helpers.perf import roofline


def loss_curve(losses: list[float]) -> Any:
    """Training loss per step, smoothed over 10 steps."""
    smooth = [sum(losses[max(0, i - 9):i + 1]) / len(losses[max(0, i - 9):i + 1]) for i in range(len(losses))]
    return plots.sweep(list(range(1, len(losses) + 1)), {"training loss (10-step mean)": smooth},
                       title="Tiny LM training on the stdlib text", xlabel="step", ylabel="cross-entropy (nats/byte)",
                       device="CPU (training always runs on the CPU)")


def channel_ranges(ranges: dict[str, Any], title: str) -> Any:
    """Per-channel max |x| of one layer input, one line per variant (log scale)."""
    fig, ax = plots.plt.subplots()
    for i, (label, v) in enumerate(ranges.items()):
        ax.plot(range(len(v)), [float(a) for a in v], color=plots.PALETTE[i], lw=1, label=label)
    ax.set(yscale="log", xlabel="input channel", ylabel="max |x| over calibration tokens", title=title)
    ax.legend()
    plots.label_device(ax, "CPU")
    fig.tight_layout()
    plots.save_figure(fig, title)
    return fig


def view(rows: list[dict], drop: tuple[str, ...] = ("key", "harness")) -> list[dict]:
    """Rows for display: the spread as 'min–max µs (n rounds)', internal fields dropped."""
    out = []
    for r in rows:
        v = {k: x for k, x in r.items() if k not in drop and k != "spread"}
        sp = r.get("spread")
        if sp:
            v["µs min–max"] = f"{sp['min_us']:.2f}–{sp['max_us']:.2f} ({sp['rounds']})"
        out.append(v)
    return out


def gemv_bars(rows: list[dict], device: str | None = None, note: str = "") -> Any:
    """Speed over the fastest FP16 GEMV per kernel: geometric mean over the shapes."""
    from helpers.chapters.ch12_language_models.gemv_bench import SHAPES_7B

    seven = {f"{n}×{k}" for n, k in SHAPES_7B}
    rows = [r for r in rows if r["N×K"] in seven]
    col = "× FP16 cuBLAS" if rows and "× FP16 cuBLAS" in rows[0] else "× fastest FP16"
    kernels = [k for k in dict.fromkeys(r["kernel"] for r in rows) if not k.startswith("fp16")]
    geo = {k: math.exp(sum(math.log(r[col]) for r in rows if r["kernel"] == k)
                       / sum(1 for r in rows if r["kernel"] == k)) for k in kernels}
    return plots.bar_ratios(geo, title=f"Batch-1 GEMV at LLaMA-7B shapes: speed {col.replace('× ', 'over ')}",
                            ylabel="× FP16 (geometric mean of 3 shapes)", device=device, note=note)


def decode_bars(rows: list[dict], device: str | None = None, note: str = "") -> Any:
    """Decode tokens/s per path."""
    return plots.bar_ratios({r["path"]: r["tokens/s"] for r in rows}, title="Decode tokens/s, 7B-shaped stack, batch 1",
                            ylabel="decode speed (tokens/s)", device=device, note=note)


def decode_batch_plot(rows: list[dict], device: str | None = None, note: str = "") -> Any:
    """Decode tokens/s of each path ÷ cuBLAS FP16's against the batch size, the break-even line at 1."""
    bs = sorted({r["batch"] for r in rows})
    ys = {p: [next((r["× FP16"] for r in rows if r["path"] == p and r["batch"] == b), float("nan")) for b in bs]
          for p in dict.fromkeys(r["path"] for r in rows)}
    fig = plots.sweep(bs, ys, title="Decode of a batch, 7B-shaped layers: each path ÷ cuBLAS FP16",
                      xlabel="batch (sequences decoded together)", ylabel="decode speed ÷ FP16's (×)", logx=True,
                      ymin=0, device=device, note=note, name="ch12_decode_batch")
    fig.axes[0].axhline(1.0, ls="--", color="0.3", lw=1)
    return fig


def sweep_plot(rows: list[dict], device: str | None = None, note: str = "") -> Any:
    """TFLOP/s of each scheme against the batch M, for N=11008, K=4096."""
    ms = sorted({r["M"] for r in rows})
    ys = {s: [next((r["TFLOP/s"] for r in rows if r["scheme"] == s and r["M"] == m), float("nan")) for m in ms]
          for s in dict.fromkeys(r["scheme"] for r in rows)}
    return plots.sweep(ms, ys, title=f"One {batch_sweep.N}×{batch_sweep.K} layer at batch M", xlabel="batch M (tokens)",
                       ylabel="throughput (TFLOP/s)", logx=True, logy=True, device=device, note=note)


def sweep_roofline(rows: list[dict], d2d_gbs: float, device: str | None = None, note: str = "",
                   source: str | None = None) -> Any:
    """The sweep's points on the roofline, one roof per math precision (FP16 for the FP16 and weight-only
    schemes, INT8 and FP8 for W8A8), each from measurements independent of the points: the D2D copy rate of the
    same run, and chapter 2's fastest GEMM of that precision from `source` (the run the rows come from: 'here' or
    a stored card), else the card's dense datasheet peak (``ch02_gpu_architecture.roofs.compute_roofs``). Checked by
    ``helpers.figure_check.roof_problems`` first: a point above its roof is printed as a problem (and fails the
    figure check of ``make notebooks``)."""
    import numpy as np

    from helpers import figure_check
    from helpers.errors import InputError

    pts = batch_sweep.roof_points(rows)
    if not pts:
        raise InputError("sweep_roofline needs sweep rows (experiments.SWEEP.run()['sweep']).")
    precs = list(dict.fromkeys(batch_sweep.math_precision(p.kind) for p in pts))
    peaks = compute_roofs(precs, source, device)
    missing = [m for m in precs if m not in peaks]
    if missing:
        print(f"No independent compute roof for {', '.join(m.upper() for m in missing)} on this card (no chapter-2 "
              "GEMM of it stored, no datasheet entry): those points are drawn without a roof.")
    roofs = {m: (peaks[m][0], d2d_gbs) for m in precs if m in peaks}
    problems = figure_check.roof_problems(
        [(p.name, batch_sweep.math_precision(p.kind), p.intensity, p.tflops) for p in pts
         if batch_sweep.math_precision(p.kind) in roofs], roofs)
    for problem in problems:
        print(f"Roofline check: {problem}: its bytes or its FLOPs are miscounted.")
    w, h = plots.plt.rcParams["figure.figsize"]
    fig, ax = plots.plt.subplots(figsize=(w * 1.4, h))
    ais = [p.intensity for p in pts]
    xs = np.logspace(np.log10(min(ais) / 4), np.log10(max(ais) * 4), 200)
    for m, (peak, bw) in roofs.items():
        i = precs.index(m)
        ax.plot(xs, [roofline.attainable_tflops(x, peak, bw) for x in xs], color=plots.PALETTE[i], lw=2, alpha=0.6,
                ls=("-", "--", ":")[i % 3], label=f"roof {m.upper()}: {bw:,.0f} GB/s (D2D copy), {peak:.3g} TFLOP/s ({peaks[m][1]})")
    for j, kind in enumerate(dict.fromkeys(p.kind for p in pts)):
        sel = [p for p in pts if p.kind == kind]
        ax.scatter([p.intensity for p in sel], [p.tflops for p in sel], marker=plots.MARKERS[j % len(plots.MARKERS)],
                   color=plots.PALETTE[precs.index(batch_sweep.math_precision(kind))], label=kind, zorder=3)
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)", ylabel="throughput (TFLOP/s)",
           title="Batch sweep on the roofline, one roof per math precision")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    plots.label_device(ax, device, note)
    fig.tight_layout()
    plots.save_figure(fig, "Batch sweep on the roofline")
    return fig
