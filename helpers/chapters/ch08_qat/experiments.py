"""Chapter 8's measurements as Experiments; both run on any machine (on the GPU when the model sits there).

    QAT    4-bit PTQ, then QAT over a few seeds, at W4A8 and W4A4: the points lost by each (ch08.<bits>.ptq_delta_pts,
           ch08.<bits>.qat_delta_pts) and the headline qat.delta_pts (W4A8, median of the seeds, with their spread)
    NOTES  the lecture notes' QAT recipe against the library (ch08.notes_quantdesc_exists)

Serves: chapter 8.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from helpers.chapters.ch08_qat import notes
from helpers.experiment import Experiment, Rows, Table
from helpers.records import Record
from helpers.spread import Spread


def _delta_table(stage: str, fields: dict[str, str]) -> Table:
    """FP32 − `stage` accuracy per bit width, recorded as ch08.<bits>.<stage>_delta_pts."""
    def legacy(r: Record) -> dict[str, Any] | None:
        parts = r.name.split(".")
        return {"bits": parts[1].upper()} if len(parts) == 3 and parts[2] == f"{stage}_delta_pts" else None

    return Table("ch08", keys=("bits",), value=f"{stage} drop pts", unit="pts", fields=fields,
                 name=lambda row: f"{row['bits'].lower()}.{stage}_delta_pts", tag=f"ch08.{stage}_delta", legacy=legacy)


PTQ_DELTA = _delta_table("ptq", {"FP32 %": "fp32_pct", "PTQ %": "ptq_pct"})
QAT_DELTA = _delta_table("qat", {"QAT % (median)": "qat_median_pct", "QAT % per seed": "per_seed"})
BITS = ((4, 8), (4, 4))  # (weight bits, activation bits) of the two experiments


def _qat(model: Any, data: Any, fp32: float, epochs: int, lr: float, seeds: Sequence[int],
         bits: Sequence[tuple[int, int]] = BITS) -> Rows:
    """Per bit width: MSE-calibrated PTQ (per-channel weights), then QAT of copies of it over `seeds`; the
    accuracies, the points each lost, and seed 0's validation curve ('_curve')."""
    from helpers.model_quant import ptq, qat
    from helpers.models.train import evaluate

    rows = []
    for wb, ab in bits:
        calibrated = ptq.ptq(model, data, method="mse", weight_bits=wb, act_bits=ab)
        ptq_acc = evaluate(calibrated, data)
        runs = qat.qat_seeds(lambda: copy.deepcopy(calibrated), data, seeds, epochs=epochs, lr=lr)
        accs = [r["test_acc"] for r in runs]
        rows.append({"bits": f"W{wb}A{ab}", "FP32 %": fp32, "PTQ %": ptq_acc, "QAT % (median)": float(np.median(accs)),
                     "QAT % per seed": " / ".join(f"{a:.1f}" for a in accs),
                     **qat.recovery(fp32, ptq_acc, float(np.median(accs))),
                     "_curve": [h["val_acc"] for h in runs[0]["history"]], "_accs": accs})
    return {"ptq": rows, "qat": rows}


def _qat_derive(rows: Rows) -> dict[str, Any]:
    """qat.delta_pts: FP32 − the median QAT accuracy at W4A8, with the min..max over the seeds."""
    r = next((r for r in rows["qat"] if r["bits"] == "W4A8"), None)
    if r is None:
        return {}
    accs = r["_accs"]
    return {"qat.delta_pts": (r["qat drop pts"], Spread(r["FP32 %"] - max(accs), r["FP32 %"] - min(accs),
                                                        f"min..max of {len(accs)} seeds"))}


QAT = Experiment("ch08.qat", _qat, {"ptq": PTQ_DELTA, "qat": QAT_DELTA}, headlines=("qat.delta_pts",),
                 derive=_qat_derive, needs="cpu")

NOTES = Experiment("ch08.notes", lambda: {"_recipe": [{"exists": notes.notes_api_exists()}]}, {},
                   derive=lambda rows: {"ch08.notes_quantdesc_exists": float(rows["_recipe"][0]["exists"])},
                   others={"ch08.notes_quantdesc_exists": "bool"}, needs="cpu")


def shown(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The results table as shown: every column but the private ones (seed 0's curve, the seeds' accuracies)."""
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
