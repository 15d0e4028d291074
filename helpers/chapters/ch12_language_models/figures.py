"""Chapter 12's figures, drawn from live rows or from the stored reference records (labelled as stored).

Serves: chapter 12.
"""

from __future__ import annotations

import math
from typing import Any

from helpers import plots, reference
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


def stored_gemv_rows() -> list[dict]:
    """GEMV rows rebuilt from stored ch12.gemv.<kernel>.<NxK> records."""
    rows = []
    for r in reference.lookup_all("ch12.gemv."):
        parts = r.name.split(".")
        if len(parts) == 4 and "speedup" in r.extra:
            rows.append({"N×K": parts[3].replace("x", "×"), "kernel": parts[2].replace("_", " "), "µs": r.value,
                         "weight GB/s": r.extra["gbs"], "× fastest FP16": r.extra["speedup"]})
    return rows


def stored_decode_rows() -> list[dict]:
    """Decode rows rebuilt from stored ch12.decode.tokens_s.* records."""
    recs = reference.lookup_all("ch12.decode.tokens_s.")
    if not recs:
        return []
    fp16 = max(r.value for r in recs if ".fp16_" in r.name)
    return [{"path": r.name.rsplit(".", 1)[1].replace("_", " "), "tokens/s": r.value, "ms/token": 1e3 / r.value,
             "weight GB/s": r.extra.get("weight_gbs"), "× fastest FP16": r.value / fp16} for r in recs]


def gemv_bars(rows: list[dict], device: str | None = None, note: str = "") -> Any:
    """Speed over the fastest FP16 GEMV per kernel: geometric mean over the shapes."""
    kernels = [k for k in dict.fromkeys(r["kernel"] for r in rows) if not k.startswith("fp16")]
    geo = {k: math.exp(sum(math.log(r["× fastest FP16"]) for r in rows if r["kernel"] == k)
                       / sum(1 for r in rows if r["kernel"] == k)) for k in kernels}
    return plots.bar_ratios(geo, title="Batch-1 GEMV at LLaMA-7B shapes: speed over the fastest FP16",
                            ylabel="× FP16 (geometric mean of 3 shapes)", device=device, note=note)


def decode_bars(rows: list[dict], device: str | None = None, note: str = "") -> Any:
    """Decode tokens/s per path."""
    return plots.bar_ratios({r["path"]: r["tokens/s"] for r in rows}, title="Decode tokens/s, 7B-shaped stack, batch 1",
                            ylabel="decode speed (tokens/s)", device=device, note=note)


def sweep_plot(rows: list[dict], device: str | None = None, note: str = "") -> Any:
    """TFLOP/s of each scheme against the batch M, for N=11008, K=4096."""
    ms = sorted({r["M"] for r in rows})
    ys = {s: [next((r["TFLOP/s"] for r in rows if r["scheme"] == s and r["M"] == m), float("nan")) for m in ms]
          for s in dict.fromkeys(r["scheme"] for r in rows)}
    return plots.sweep(ms, ys, title=f"One {batch_sweep.N}×{batch_sweep.K} layer at batch M", xlabel="batch M (tokens)",
                       ylabel="throughput (TFLOP/s)", logx=True, logy=True, device=device, note=note)


def sweep_roofline(rows: list[dict], d2d_gbs: float, device: str | None = None, note: str = "") -> Any:
    """The sweep's points on the roofline (roof: the D2D copy rate and the fastest point measured)."""
    pts = batch_sweep.roof_points(rows)
    return roofline.plot(pts, roofline.measured_peak(pts) if any(p.kind == "gemm" for p in pts)
                         else max(p.tflops for p in pts), d2d_gbs, title="Batch sweep on the roofline",
                         device=device, note=note)


def stored_sweep() -> tuple[list[dict], float | None]:
    """Sweep rows and the D2D rate from the stored reference (empty when none is stored)."""
    rows = batch_sweep.rows_from_records(reference.lookup_all("ch12.sweep."))
    d2d = reference.lookup("ch12.gemv.d2d_gbs")
    return rows, (d2d.value if d2d else None)


def stored_math_rows() -> list[dict]:
    """The code-math comparison from the stored reference (empty when none is stored)."""
    from helpers.chapters.ch12_language_models.gemv_bench import stored_math_modes

    return stored_math_modes()
