"""Which layers hurt when quantized? One layer at a time, then keep the worst k in floating point.

Serves: core — used by chapters 7, 10 and lab 06.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from helpers.errors import InputError
from helpers.models.train import predict
from helpers.model_quant.ptq import quant_layers, score, set_quant_enabled
from helpers.quant.metrics import sqnr_db
from helpers.validation import require_choice


def layer_sensitivity(qmodel: nn.Module, data: Any, *, metric: str = "accuracy",
                      split: str = "val") -> list[dict[str, Any]]:
    """Quantize one layer at a time (all others FP); rows sorted most sensitive first.

    metric 'accuracy': drop in points vs the unquantized model; 'sqnr': SQNR (dB) of the logits.
    """
    require_choice(metric, ("accuracy", "sqnr"), "metric")
    layers = quant_layers(qmodel)
    if not layers:
        raise InputError("no quantized layers; build the model with helpers.model_quant.ptq.ptq or quantize_model first.")
    set_quant_enabled(qmodel, False)
    ref_logits, labels = predict(qmodel, data, split)
    ref_acc = float((ref_logits.argmax(1) == labels).float().mean() * 100)
    rows = []
    try:
        for name in tqdm(layers, desc="sensitivity: one layer quantized at a time", leave=False):
            set_quant_enabled(qmodel, True, [name])
            logits, _ = predict(qmodel, data, split)
            acc = float((logits.argmax(1) == labels).float().mean() * 100)
            rows.append({"layer": name, "accuracy %": acc, "drop pts": ref_acc - acc,
                         "sqnr dB": sqnr_db(ref_logits, logits)})
            set_quant_enabled(qmodel, False, [name])
    finally:
        set_quant_enabled(qmodel, True)
    key = (lambda r: -r["drop pts"]) if metric == "accuracy" else (lambda r: r["sqnr dB"])
    return sorted(rows, key=lambda r: (key(r), r["sqnr dB"]))


def ranking(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Layer names of layer_sensitivity() rows, most sensitive first."""
    return [r["layer"] for r in rows]


def keep_in_fp(qmodel: nn.Module, layers: Sequence[str]) -> None:
    """Leave the named layers unquantized (FP32 here; FP16 on a GPU deployment), quantize the rest."""
    set_quant_enabled(qmodel, True)
    if layers:
        set_quant_enabled(qmodel, False, layers)


def mixed_precision_curve(qmodel: nn.Module, data: Any, order: Sequence[str], *,
                          ks: Sequence[int] | None = None, split: str = "test") -> list[dict[str, Any]]:
    """Accuracy when the k most sensitive layers (per `order`) stay in FP, for each k; rows by k. Each row also
    holds 'vs FP32 pts', its paired bootstrap over the same samples 'vs FP32 spread', and 'right' (right/wrong per
    sample, for other paired comparisons)."""
    from helpers.model_quant.diagnose import accuracy_gap

    layers = quant_layers(qmodel)
    missing = set(order) - set(layers)
    if missing or len(order) != len(layers):
        raise InputError(f"order must list every quantized layer once; missing or unknown: {sorted(missing)}. "
                         "Pass ranking(layer_sensitivity(...)).")
    ks = list(range(len(layers) + 1)) if ks is None else list(ks)
    rows = []
    try:
        set_quant_enabled(qmodel, False)
        fp32_acc, fp32 = score(qmodel, data, split)
        for k in tqdm(ks, desc="mixed precision: k most sensitive layers kept in float", leave=False):
            if not 0 <= k <= len(layers):
                raise InputError(f"k={k} is outside 0..{len(layers)}.")
            keep_in_fp(qmodel, list(order[:k]))
            acc, right = score(qmodel, data, split)
            rows.append({"kept in FP": k, "quantized layers": len(layers) - k, "accuracy %": acc,
                         "fp layers": ", ".join(order[:k]), "vs FP32 pts": acc - fp32_acc,
                         "vs FP32 spread": accuracy_gap(right, fp32), "right": right})
    finally:
        set_quant_enabled(qmodel, True)
    return rows
