"""Chapter 7's tables, each declared once: how its rows become records and come back from a stored run.

The record names are the ones chapter 7 recorded before these declarations ('ch07.int8_acc.resnet.per-tensor.max',
'ch07.w4a8_per_channel_gain_pts.mobilenet', 'ch07.mixed_precision.quantized_layers_3'); each table's `legacy` hook
reads such a stored record's columns from its name.

Serves: chapter 7.
"""

from __future__ import annotations

from typing import Any

from helpers.experiment import Table
from helpers.records import Record

MODELS = {"resnet": "ResNet", "mobilenet": "MobileNet"}  # a record name's model -> the table's model column


def _int8_legacy(r: Record) -> dict[str, Any] | None:
    parts = r.name.split(".")
    if len(parts) != 5 or parts[2] not in MODELS:
        return None
    return {"model": MODELS[parts[2]], "weights": parts[3], "calibrator": parts[4]}


INT8 = Table("ch07.int8_acc", keys=("model", "weights", "calibrator"), value="accuracy %", unit="%",
             fields={"delta pts": "delta_pts", "FP32 %": "fp32_pct"}, spread="spread",
             name=lambda row: f"{row['model'].lower()}.{row['weights']}.{row['calibrator']}", legacy=_int8_legacy)


def _w4_legacy(r: Record) -> dict[str, Any] | None:
    model = MODELS.get(r.name.rsplit(".", 1)[1])
    return None if model is None else {"model": model}


W4 = Table("ch07.w4a8_per_channel_gain_pts", keys=("model",), value="gain pts", unit="pts",
           fields={"per-tensor": "per_tensor_pct", "per-channel": "per_channel_pct"}, spread="spread",
           name=lambda row: row["model"].lower(), legacy=_w4_legacy)


def _mixed_legacy(r: Record) -> dict[str, Any] | None:
    tail = r.name.rsplit(".", 1)[1]
    return {"quantized layers": int(tail.rsplit("_", 1)[1])} if tail.startswith("quantized_layers_") else None


MIXED = Table("ch07.mixed_precision", keys={"quantized layers": "quantized_layers"}, value="accuracy %", unit="%",
              fields={"kept in FP": "kept_in_fp", "fp layers": "fp_layers"},
              name=lambda row: f"quantized_layers_{row['quantized layers']}", legacy=_mixed_legacy)
