"""Chapter 7's measurements as Experiments. Each runs on any machine (on the GPU when the models sit there), so a
cell always measures and records here; every accuracy keeps its right/wrong per test sample (private columns
'_right', '_fp32_right') for the paired intervals of ``readings``.

    NOTES          the lecture notes' standalone-calibrator recipe, run (ch07.notes_calibrator_has_amax)
    PTQ_RESNET     INT8 PTQ of the ResNet, four calibrators × per-tensor / per-channel weights; ptq.best_int8_delta_pts
    PTQ_MOBILENET  the same on the MobileNet; ptq.per_tensor_minus_per_channel_pts (the gain of per-channel weights)
    W4A8           4-bit weights, 8-bit activations: the gain of per-channel weights on each model
    SIZE           parameter bytes, FP32 against INT8 (ch07.size_ratio.resnet)
    DIGITS         three calibrators on scikit-learn digits (ch07.digits_entropy_acc: entropy's collapse)
    MIXED_PRECISION  layer sensitivity and the mixed-precision curve of the MobileNet at per-tensor W4A8
    FRAGILE        the checklist on a ResNet with a 64× channel made on purpose (ch07.fragile_drop_pts)

A cell is ``result = experiments.W4A8.run(models=..., data=data); result.show("w4", caption=..., view=...)``; rows a
cell shows but the course does not record ride under keys that start with '_' (``result["_digits"]``).

Serves: chapter 7.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tqdm.auto import tqdm

from helpers.chapters.ch07_ptq import notes, readings
from helpers.chapters.ch07_ptq.tables import INT8, MIXED, W4
from helpers.experiment import Experiment, Rows
from helpers.model_quant import diagnose, ptq, sensitivity


def shown(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Rows without their private columns (those that start with '_': right/wrong per sample, models, reports)."""
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


NOTES = Experiment("ch07.notes", lambda: {"_recipe": [{"has amax": notes.standalone_calibrator_amax() is not None}]},
                   {}, derive=lambda rows: {"ch07.notes_calibrator_has_amax": float(rows["_recipe"][0]["has amax"])},
                   others={"ch07.notes_calibrator_has_amax": "bool"}, needs="cpu")


def _ptq(model: Any, data: Any, name: str) -> Rows:
    """``ptq.accuracy_table`` of one model as INT8 rows: the FP32 accuracy rides in each, with both right/wrong lists."""
    correct: dict = {}
    table = ptq.accuracy_table(model, data, correct=correct)
    return {"int8": [{"model": name, "weights": r["weights"], "calibrator": r["calibrator"],
                      "accuracy %": r["accuracy %"], "delta pts": r["delta pts"], "FP32 %": table[0]["accuracy %"],
                      "spread": readings.accuracy_interval(correct[r["weights"], r["calibrator"]]),
                      "_right": correct[r["weights"], r["calibrator"]], "_fp32_right": correct[readings.FP32]}
                     for r in table[1:]]}


def accuracy_table(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """INT8 rows as ``ptq.accuracy_table`` gives them: the FP32 row first, then weights, calibrator, accuracy %,
    delta pts (what ``ptq.plot_accuracy_table`` and ``readings.ptq_cost`` read)."""
    if not rows:
        return []
    head = {"weights": "FP32", "calibrator": "-", "accuracy %": rows[0]["FP32 %"], "delta pts": 0.0}
    return [head] + [{k: r[k] for k in ("weights", "calibrator", "accuracy %", "delta pts")} for r in rows]


def correct(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], Any]:
    """Right/wrong per test sample of FP32 and of every INT8 row, keyed (weights, calibrator) as ``readings`` reads."""
    return {readings.FP32: rows[0]["_fp32_right"], **{(r["weights"], r["calibrator"]): r["_right"] for r in rows}}


def _best_delta(rows: Rows) -> dict[str, Any]:
    """FP32 − the best per-channel INT8 accuracy, with its paired interval over the test samples."""
    best = max((r for r in rows["int8"] if r["weights"] == "per-channel"), key=lambda r: r["accuracy %"])
    return {"ptq.best_int8_delta_pts": (best["FP32 %"] - best["accuracy %"],
                                        readings.gap(best["_fp32_right"], best["_right"]))}


PTQ_RESNET = Experiment("ch07.ptq_resnet", lambda model, data: _ptq(model, data, "ResNet"), {"int8": INT8},
                        headlines=("ptq.best_int8_delta_pts",), derive=_best_delta, needs="cpu")
PTQ_MOBILENET = Experiment("ch07.ptq_mobilenet", lambda model, data: _ptq(model, data, "MobileNet"), {"int8": INT8},
                           headlines=(readings.PER_CHANNEL_GAIN,), needs="cpu",
                           derive=lambda rows: {readings.PER_CHANNEL_GAIN:
                                                readings.per_channel_gain_pts(correct(rows["int8"]), "max")})


def _w4(models: Mapping[str, Any], data: Any) -> Rows:
    """Per-tensor and per-channel 4-bit weights (8-bit activations, max calibration) of each model: accuracies and
    the gain of per-channel, with its paired interval."""
    rows = []
    for name, model in tqdm(models.items(), desc="4-bit-weight PTQ, per-tensor and per-channel"):
        row: dict[str, Any] = {"model": name}
        right = {}
        for per_channel in (False, True):
            qw = ptq.ptq(model, data, method="max", per_channel=per_channel, weight_bits=4, act_bits=8)
            key = "per-channel" if per_channel else "per-tensor"
            row[key], right[key] = ptq.score(qw, data)
        row["gain pts"] = row["per-channel"] - row["per-tensor"]
        row["spread"] = readings.gap(right["per-channel"], right["per-tensor"])
        rows.append(row)
    return {"w4": rows}


def w4_view(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """W4 rows as shown: accuracies, the gain and its interval as text."""
    return [{"model": r["model"], "per-tensor": r["per-tensor"], "per-channel": r["per-channel"],
             "gain pts": r["gain pts"],
             "gain 95% interval": "" if r["spread"] is None else f"{r['spread'].lo:+.1f} to {r['spread'].hi:+.1f}"}
            for r in rows]


W4A8 = Experiment("ch07.w4a8", _w4, {"w4": W4}, needs="cpu")


def _size(models: Mapping[str, Any]) -> Rows:
    rows = []
    for name, model in models.items():
        fp = ptq.model_size(model)["kib"]
        i8 = ptq.model_size(ptq.quantize_model(model), 8)["kib"]
        rows.append({"model": name, "FP32 KiB": fp, "INT8 KiB": i8, "ratio": fp / i8})
    return {"_size": rows}


SIZE = Experiment("ch07.size", _size, {}, needs="cpu", others={"ch07.size_ratio.resnet": "ratio"},
                  derive=lambda rows: {"ch07.size_ratio.resnet": r["ratio"] for r in rows["_size"]
                                       if r["model"] == "ResNet"})


def _digits(model: Any, data: Any) -> Rows:
    """FP32 and PTQ with max, percentile and entropy calibration on the digits: accuracy and first-layer input amax."""
    acc, right = ptq.score(model, data)
    rows = [{"calibrator": "FP32", "first-layer input amax": None, "accuracy %": acc, "_right": right}]
    for method in tqdm(("max", "percentile", "entropy"), desc="digits ResNet: PTQ with three calibrators"):
        qd = ptq.ptq(model, data, method=method)
        first = qd.get_submodule(ptq.quant_layers(qd)[0])._input_quantizer
        acc, right = ptq.score(qd, data)
        rows.append({"calibrator": method, "first-layer input amax": float(first.amax), "accuracy %": acc,
                     "_right": right})
    return {"_digits": rows}


DIGITS = Experiment("ch07.digits", _digits, {}, needs="cpu", others={"ch07.digits_entropy_acc": "%"},
                    derive=lambda rows: {"ch07.digits_entropy_acc": (r["accuracy %"], readings.accuracy_interval(
                        r["_right"])) for r in rows["_digits"] if r["calibrator"] == "entropy"})


def _mixed(model: Any, data: Any) -> Rows:
    """Per-tensor W4A8 PTQ, one layer quantized at a time (validation split), then the k most sensitive kept in float."""
    qm = ptq.ptq(model, data, method="max", per_channel=False, weight_bits=4, act_bits=8)
    sens = sensitivity.layer_sensitivity(qm, data, metric="accuracy")
    order = sensitivity.ranking(sens)
    return {"curve": sensitivity.mixed_precision_curve(qm, data, order), "_sensitivity": sens}


MIXED_PRECISION = Experiment("ch07.mixed_precision", _mixed, {"curve": MIXED}, needs="cpu")


def _fragile(model: Any, data: Any, factor: float = 64.0) -> Rows:
    """The model with one channel of layer2.conv1 scaled `factor`× up (and conv2's input as much down), per-tensor
    INT8 with max calibration, and the checklist's report."""
    fragile = diagnose.make_fragile(model, "layer2.conv1", "layer2.conv2", factor=factor)
    naive = ptq.ptq(fragile, data, method="max", per_channel=False)
    return {"_fragile": [{"model": fragile, "report": diagnose.diagnose(fragile, naive, data)}]}


FRAGILE = Experiment("ch07.fragile", _fragile, {}, needs="cpu", others={"ch07.fragile_drop_pts": "pts"},
                     derive=lambda rows: {"ch07.fragile_drop_pts": (rows["_fragile"][0]["report"].drop,
                                                                    rows["_fragile"][0]["report"].drop_spread)})
