"""Chapter 6's measurements as Experiments; both run on any machine (calibration runs offline on the CPU).

    ERRORS  each calibrator's activation error per layer on the test inputs, and the accuracy with every layer's
            input quantized; the 99 % rule of thumb against the best calibrator on layer 4 (ch06.sqnr_db.*,
            ch06.clipped_pct.*)
    COST    how long each calibrator takes on one layer's histogram (ch06.calib_ms.<method>)

Serves: chapter 6.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from helpers import bench
from helpers.chapters.ch05_quantization_fundamentals import experiments as ch05_rows
from helpers.chapters.ch06_calibration import readings
from helpers.experiment import Experiment, Rows, Table
from helpers.quant import calibrators

RULE = "percentile 99"  # the lecture notes' rule of thumb: cover 99 % of the values


def _errors(model: Any, data: Any, amaxes: Mapping[str, Mapping[str, float]], fp32_acc: float) -> Rows:
    """Error rows per layer and calibrator (test inputs), and the accuracy with every input quantized per method."""
    from helpers.model_quant.activations import layer_inputs, with_quantized_inputs
    from helpers.models.digits_mlp import accuracy

    rows = ch05_rows.calibrator_error_rows(layer_inputs(model, data.x_test), amaxes)
    acc = []
    for method in next(iter(amaxes.values())):
        a = accuracy(with_quantized_inputs(model, {k: v[method] for k, v in amaxes.items()}), data.x_test, data.y_test)
        acc.append({"calibrator": method, "accuracy %": a, "drop (points)": fp32_acc - a})
    return {"_errors": rows, "_accuracy": acc}


def _errors_derive(rows: Rows) -> dict[str, Any]:
    p99, best, clipped = readings.layer_sqnr(rows["_errors"], "4", RULE)
    return {"ch06.sqnr_db.layer4.percentile_99": p99, "ch06.sqnr_db.layer4.best": best,
            "ch06.clipped_pct.layer4.percentile_99": clipped}


ERRORS = Experiment("ch06.errors", _errors, {}, derive=_errors_derive, needs="cpu",
                    others={"ch06.sqnr_db.layer4.percentile_99": "dB", "ch06.sqnr_db.layer4.best": "dB",
                            "ch06.clipped_pct.layer4.percentile_99": "%"})

COST_TABLE = Table("ch06.calib_ms", keys=("method",), value="ms", unit="ms", fields=("bins",),
                   legacy=lambda r: {"method": r.name.rsplit(".", 1)[1]})


def _cost(hist: calibrators.Histogram, warmup: int = 1, repeats: int = 3) -> Rows:
    """Median milliseconds of each calibrator (percentile 99.99, MSE, entropy) on one histogram."""
    runs = {"percentile": lambda: calibrators.amax_percentile(hist, 99.99), "mse": lambda: calibrators.amax_mse(hist),
            "entropy": lambda: calibrators.amax_entropy(hist)}
    return {"cost": [{"method": name, "ms": bench.timeit(fn, backend="cpu", warmup=warmup, repeats=repeats).median_ms,
                      "bins": len(hist.counts)} for name, fn in runs.items()]}


COST = Experiment("ch06.calib_ms", _cost, {"cost": COST_TABLE}, needs="cpu")
