"""Chapter 6's Experiments record under the names the stored runs hold: the layer-4 numbers of the 99 % rule, derived
from the error rows, and each calibrator's cost as a table that the stored CPU run reads back."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import records, reference
from helpers.chapters.ch06_calibration import experiments
from helpers.quant import calibrators


@pytest.fixture
def session(monkeypatch):
    """A clean records session that writes no file."""
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)


def test_the_layer4_numbers_come_from_the_error_rows():
    rows = {"_errors": [{"layer": "4", "method": "percentile 99", "SQNR dB": 30.0, "clipped %": 1.0},
                        {"layer": "4", "method": "mse", "SQNR dB": 44.0, "clipped %": 0.1},
                        {"layer": "2", "method": "mse", "SQNR dB": 50.0, "clipped %": 0.0}]}
    assert experiments._errors_derive(rows) == {"ch06.sqnr_db.layer4.percentile_99": 30.0,
                                                "ch06.sqnr_db.layer4.best": 44.0,
                                                "ch06.clipped_pct.layer4.percentile_99": 1.0}


def test_the_cost_table_records_each_method_under_its_stored_name(monkeypatch, session):
    ms = {"percentile": 0.02, "mse": 40.0, "entropy": 200.0}
    calls = []

    def timeit(fn, **kw):
        calls.append(kw)
        return type("T", (), {"median_ms": ms[["percentile", "mse", "entropy"][len(calls) - 1]]})()

    monkeypatch.setattr(experiments.bench, "timeit", timeit)
    hist = calibrators.Histogram().collect(np.linspace(0, 1, 1000, dtype=np.float32))
    res = experiments.COST.run(hist=hist, warmup=1, repeats=3)
    assert [r.name for r in records.session_records()] == [f"ch06.calib_ms.{m}" for m in ms]
    assert res["cost"][2] == {"method": "entropy", "ms": 200.0, "bins": len(hist.counts)}
    assert calls[0] == {"backend": "cpu", "warmup": 1, "repeats": 3}
    stored = experiments.COST_TABLE.stored_rows(reference.load("cpu"))
    assert [r["method"] for r in stored] == list(ms) and stored[0]["bins"] == 2048
