"""Mixed precision: keep the most sensitive layers in floating point (FP16 on a GPU), run the rest in
INT8, and put speed and accuracy on one plot.

Accuracy comes from the calibrated fake-quant model of chapters 7-8 (helpers.model_quant.ptq / helpers.model_quant.sensitivity);
speed from the same model with its INT8 layers as real integer GEMMs (helpers.deploy.torch_int8) and
the kept layers in FP16 (GPU) or FP32 (CPU), timed in the same run as the all-float model.

Serves: chapter 10.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from helpers.bench import interleaved
from helpers.chapters.ch10_beyond_int8 import ROUNDS
from helpers.errors import InputError
from helpers.spread import Spread


def speed_curve(model: Any, order: Sequence[str], x: Any, *, ks: Sequence[int], device: str = "cpu",
                calib: Any = None, repeats: int = 10) -> list[dict]:
    """Latency (ms) of `model` with the first k layers of `order` kept in float and the rest INT8, per k.

    `order` lists Conv/Linear layer names, most sensitive first (helpers.model_quant.sensitivity.ranking);
    `calib` is a calibration batch for the activation scales (default: x). The all-float model is
    timed in the same interleaved rounds: 'speed vs float' = float ms / this ms, the median of the rounds,
    with their spread as 'speed vs float spread'.
    """
    import torch

    from helpers.deploy.qdq_model import calibrate, quantizable_layers
    from helpers.deploy.torch_int8 import to_int8
    from helpers.validation import require_choice

    require_choice(device, ("cpu", "cuda"), "device")
    if device == "cuda":
        from helpers.device import require_gpu

        require_gpu("Timing mixed INT8/FP16 models")
    float_model = copy.deepcopy(model).eval()
    layers = quantizable_layers(float_model)
    unknown = [n for n in order if n not in layers]
    if unknown:
        raise InputError(f"order names layers that are not Conv/Linear layers of the model: {unknown[:3]}.")
    amax = calibrate(float_model, [x if calib is None else calib])
    dtype = torch.float16 if device == "cuda" else torch.float32
    backend = "torch" if device == "cuda" else "cpu"
    xd = x.to(device, dtype)
    base = float_model.to(device, dtype)
    rows = []
    with torch.inference_mode():
        for k in ks:
            if not 0 <= k <= len(order):
                raise InputError(f"k={k} is outside 0..{len(order)}.")
            int8_layers = {n: a for n, a in amax.items() if n in order[k:] and _int8_ok(layers[n])}
            m = to_int8(base, int8_layers)
            r = interleaved({"float": lambda: base(xd), "mixed": lambda m=m: m(xd)}, rounds=ROUNDS, clock=backend,
                            warmup=2, settle=1, per_round=max(1, repeats // ROUNDS))
            ratio, spread = r.ratio("float", "mixed")
            rows.append({"kept in FP": k, "ms": r.median_s("mixed") * 1e3, "float ms": r.median_s("float") * 1e3,
                         "batch": len(xd), "speed vs float": ratio, "speed vs float spread": spread})
    return rows


def _int8_ok(layer: Any) -> bool:
    """True when helpers.deploy.torch_int8 can run this layer as an integer GEMM (numeric padding, groups 1)."""
    return not isinstance(getattr(layer, "padding", 0), str) and getattr(layer, "groups", 1) == 1


def plot_tradeoff(acc_rows: Sequence[dict], speed_rows: Sequence[dict] | None, *, fp32_acc: float,
                  device: str | None = None, note: str = "") -> Any:
    """Accuracy (left axis) and speed vs float (right axis) against the number of layers kept in FP."""
    import matplotlib.pyplot as plt

    from helpers import plots

    if not acc_rows:
        raise InputError("plot_tradeoff needs the accuracy rows of helpers.model_quant.sensitivity.mixed_precision_curve.")
    fig, ax = plt.subplots()
    ks = [r["kept in FP"] for r in acc_rows]
    ax.plot(ks, [r["accuracy %"] for r in acc_rows], marker="o", color=plots.PALETTE[0], label="accuracy")
    ax.axhline(fp32_acc, ls="--", color="0.4", lw=1, label=f"FP32 {fp32_acc:.1f}%")
    ax.set(xlabel="most sensitive layers kept in floating point (count)", ylabel="test accuracy (%)",
           title="Mixed precision: accuracy and speed", ylim=(0, 100))
    if speed_rows:
        ax2 = ax.twinx()
        ax2.plot([r["kept in FP"] for r in speed_rows], [r["speed vs float"] for r in speed_rows],
                 marker="s", color=plots.PALETTE[1], label="speed vs float")
        ax2.set_ylabel("speed (× the all-float model)")
        ax2.set_ylim(0, max(1.1, 1.1 * max(r["speed vs float"] for r in speed_rows)))
        ax2.grid(False)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, loc="lower right")
    else:
        ax.legend(loc="lower right")
    plots.label_device(ax, device, note)
    fig.tight_layout()
    plots.save_figure(fig, "ch10_mixed_precision")
    return fig


def tradeoff_rows(acc_rows: Sequence[dict], speed_rows: Sequence[dict]) -> list[dict]:
    """One row per k: layers kept in floating point, the accuracy of this run and the GPU speed vs FP16 (None
    where the speed table has no row for that k)."""
    speed = {r["kept in FP"]: r["speed vs float"] for r in speed_rows}
    return [{"kept in FP": a["kept in FP"], "accuracy %": a["accuracy %"], "fp layers": a["fp layers"],
             "speed vs FP16": speed.get(a["kept in FP"])} for a in acc_rows]


def speed_spreads(rows: Sequence[dict]) -> dict[int, Spread]:
    """{k: spread of 'speed vs float'} for the rows that carry one (a row stored before spreads were has none)."""
    return {r["kept in FP"]: s for r in rows if isinstance(s := r.get("speed vs float spread"), Spread)}
