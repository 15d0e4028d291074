"""How chapter 9 shows its 8-bit engine: GEMM and throughput tables, the split of a forward's GPU time, a kernel
timeline, and the sentences printed from the measured rows (never typed by hand).

Serves: chapter 9.
"""

from __future__ import annotations

from typing import Any

from helpers import plots
from helpers.spread import Spread

PART_ORDER = ("gemm", "convolution", "attention", "layernorm", "quantize", "fused elementwise", "other", "gaps")


def _fmt(v: float, s: Spread | None, digits: int = 2) -> str:
    """'1.23 (1.20..1.26)' or '1.23' without a spread."""
    return f"{v:.{digits}f}" + ("" if s is None else f" ({s.lo:.{digits}f}..{s.hi:.{digits}f})")


def gemm_view(rows: list[dict]) -> list[dict]:
    """The GEMM table's readable columns: shape, GEMM, µs, TFLOP/s, × FP16 cuBLAS with its spread."""
    return [{"shape (M×N×K)": r["shape"].replace("x", "×"), "GEMM": r["GEMM"], "µs": round(r["µs"], 1),
             "TFLOP/s": round(r["TFLOP/s"]), "× FP16 cuBLAS": _fmt(r["× FP16 cuBLAS"], r["spread"])} for r in rows]


def rate_view(rows: list[dict], value: str) -> list[dict]:
    """Throughput rows as path, items/s with the spread of the rounds, and × the best FP16 path."""
    fp16 = [r[value] for r in rows if str(r["path"]).startswith("fp16")]
    best = max(fp16) if fp16 else None
    return [{"path": r["path"], value: _fmt(r[value], r["spread"], 0),
             "× best FP16": "–" if best is None else f"{r[value] / best:.2f}"} for r in rows]


def throughput_bars(result: Any, table: str, value: str, title: str, target: float | None = None) -> Any:
    """Bars of each path's throughput ÷ the best FP16 path, with the target line, labelled with the device."""
    rows = result[table]
    fp16 = [r[value] for r in rows if str(r["path"]).startswith("fp16")]
    if not rows or not fp16:
        print(f"{title}: no rows ({result.where()}).")
        return None
    return plots.bar_ratios({str(r["path"]).replace(" + CUDA graph", ""): r[value] / max(fp16) for r in rows},
                            title=title, ylabel="throughput (× best FP16 path)", target=target,
                            device=result.device, note=result.note)


def parts_figure(result: Any, model: str, name: str) -> Any:
    """Stacked bars: one forward's GPU milliseconds per kind of kernel, and the gaps between kernels, per path."""
    import matplotlib.pyplot as plt

    rows = [r for r in result["parts"] if r["model"] == model]
    if not rows:
        print(f"{model}: no time split stored ({result.where()}).")
        return None
    paths = list(dict.fromkeys(r["path"] for r in rows))
    ms = {(r["path"], r["part"]): r["ms"] for r in rows}
    plots.use_style()
    fig, ax = plt.subplots(figsize=(7.2, 0.55 * len(paths) + 1.6))
    left = [0.0] * len(paths)
    for i, part in enumerate(p for p in PART_ORDER if any((q, p) in ms for q in paths)):
        vals = [ms.get((q, part), 0.0) for q in paths]
        ax.barh(range(len(paths)), vals, left=left, color=plots.PALETTE[i % len(plots.PALETTE)], label=part,
                hatch="//" if part == "gaps" else None, edgecolor="white")
        left = [a + b for a, b in zip(left, vals)]
    ax.set_yticks(range(len(paths)), [p.replace(" + CUDA graph", "") for p in paths])
    ax.invert_yaxis()
    ax.set_xlabel("GPU time of one forward (ms)")
    ax.set_title(f"{model}: where one forward's time goes")
    ax.legend(ncol=4, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.12))
    plots.label_device(ax, result.device, result.note)
    plots.save_figure(fig, name)
    return fig


def timeline_figure(traces: dict[str, list], title: str, name: str, device: str | None = None) -> Any:
    """Kernels of one forward in time order (one row per path), coloured by kind: where the gaps are."""
    import matplotlib.pyplot as plt

    if not traces:
        return None
    plots.use_style()
    kinds = [k for k in PART_ORDER if k != "gaps"]
    fig, ax = plt.subplots(figsize=(8.0, 0.7 * len(traces) + 1.6))
    for row, (path, events) in enumerate(traces.items()):
        for start, dur, kind, _ in events:
            ax.barh(row, dur, left=start, height=0.6, color=plots.PALETTE[kinds.index(kind) % len(plots.PALETTE)]
                    if kind in kinds else "grey", linewidth=0)
    ax.set_yticks(range(len(traces)), [p.replace(" + CUDA graph", "") for p in traces])
    ax.invert_yaxis()
    ax.set_xlabel("time since the forward's first kernel (ms)")
    ax.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=plots.PALETTE[i % len(plots.PALETTE)]) for i, _ in enumerate(kinds)]
    ax.legend(handles, kinds, ncol=4, fontsize=8, loc="lower center", bbox_to_anchor=(0.5, 1.12))
    plots.label_device(ax, device)
    plots.save_figure(fig, name)
    return fig


def split_sentence(result: Any, model: str, fast: str, slow: str) -> str:
    """What the 8-bit forward saves and spends against the FP16 one, part by part, from the measured split."""
    ms = {(r["path"], r["part"]): r["ms"] for r in result["parts"] if r["model"] == model}
    if not any(p == fast for p, _ in ms) or not any(p == slow for p, _ in ms):
        return f"{model}: the time split of {fast} and {slow} is not stored ({result.where()})."
    parts = [p for p in PART_ORDER if (fast, p) in ms or (slow, p) in ms]
    diffs = sorted(((ms.get((slow, p), 0.0) - ms.get((fast, p), 0.0), p) for p in parts), reverse=True)
    tot = {k: sum(v for (q, _), v in ms.items() if q == k) for k in (fast, slow)}
    gained = ", ".join(f"{p} {d:+.3f} ms" for d, p in diffs if abs(d) >= 0.005)
    text = (f"{model}: one forward takes {tot[slow]:.3f} ms ({slow}) against {tot[fast]:.3f} ms ({fast}); "
            f"{slow} minus {fast}, part by part: {gained}.")
    print(text)
    return text


def accuracy_sentence(rows: list[dict], budget: float = 1.0) -> str:
    """Whether every engine stays within `budget` points of FP32, judged by each paired-bootstrap interval."""
    within = [r for r in rows if r["spread"] is not None and r["spread"].hi <= budget]
    unresolved = [r for r in rows if r["spread"] is not None and r["spread"].lo <= budget < r["spread"].hi]
    worst = max(rows, key=lambda r: r["drop (pts)"])
    text = (f"{len(within)} of {len(rows)} engine × model pairs lose at most {budget:g} point against FP32 with "
            f"95 % confidence (paired bootstrap over the test set); the largest measured drop is "
            f"{worst['drop (pts)']:.1f} points ({worst['format']} on {worst['model']})"
            + (f"; {len(unresolved)} cannot be told apart from the {budget:g}-point budget at this noise "
               "(在此噪声下无法分辨)" if unresolved else "") + ".")
    print(text)
    return text
