"""Chapter 7's Experiments record under the names the stored runs hold, rebuild the tables the sentences read, and
derive their headlines from the per-sample right/wrong (planted accuracy tables: no model is quantized here)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import records, reference
from helpers.chapters.ch07_ptq import experiments, readings, tables
from helpers.records import Record
from helpers.spread import Spread


@pytest.fixture
def session(monkeypatch):
    """A clean records session that writes no file."""
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)


def right(n_right: int, n: int = 100) -> np.ndarray:
    out = np.zeros(n, bool)
    out[:n_right] = True
    return out


CORRECT = {readings.FP32: right(90), ("per-tensor", "max"): right(60), ("per-channel", "max"): right(88),
           ("per-tensor", "mse"): right(61), ("per-channel", "mse"): right(89)}


def planted_table(model, data, correct=None, **_):
    """What ptq.accuracy_table returns (and fills `correct` with), from CORRECT."""
    correct.update(CORRECT)
    return [{"weights": w, "calibrator": c, "accuracy %": 100 * v.mean(), "delta pts": 90.0 - 100 * v.mean()}
            for (w, c), v in CORRECT.items()]


def test_the_ptq_runs_record_the_stored_names_and_derive_their_headlines(monkeypatch, session):
    monkeypatch.setattr(experiments.ptq, "accuracy_table", planted_table)
    res = experiments.PTQ_RESNET.run(model=None, data=None)
    names = [r.name for r in records.session_records()]
    assert names[:2] == ["ch07.int8_acc.resnet.per-tensor.max", "ch07.int8_acc.resnet.per-channel.max"]
    assert names[-1] == "ptq.best_int8_delta_pts" and res.value("ptq.best_int8_delta_pts") == pytest.approx(1.0)
    assert experiments.accuracy_table(res["int8"]) == [{k: r[k] for k in ("weights", "calibrator", "accuracy %",
                                                                         "delta pts")}
                                                        for r in planted_table(None, None, {})]
    assert {k: v.sum() for k, v in experiments.correct(res["int8"]).items()} == {k: v.sum() for k, v in CORRECT.items()}
    mob = experiments.PTQ_MOBILENET.run(model=None, data=None)
    assert mob["int8"][0]["model"] == "MobileNet" and "ch07.int8_acc.mobilenet.per-channel.mse" in \
        [r.name for r in records.session_records()]
    assert mob.value(readings.PER_CHANNEL_GAIN) == pytest.approx(28.0)  # per-channel − per-tensor, max calibrator
    rec = next(r for r in records.session_records() if r.name == readings.PER_CHANNEL_GAIN)
    assert rec.extra["lo"] > 0


def test_single_numbers_come_from_side_rows_and_keep_their_names(monkeypatch, session):
    report = type("Report", (), {"drop": 21.0, "drop_spread": Spread(18.0, 24.0, "paired bootstrap")})()
    monkeypatch.setattr(experiments.diagnose, "make_fragile", lambda m, *a, **k: m)
    monkeypatch.setattr(experiments.ptq, "ptq", lambda m, *a, **k: m)
    monkeypatch.setattr(experiments.diagnose, "diagnose", lambda *a: report)
    frag = experiments.FRAGILE.run(model="m", data=None)
    assert frag["_fragile"][0]["report"] is report and frag.value("ch07.fragile_drop_pts") == 21.0
    monkeypatch.setattr(experiments.notes, "standalone_calibrator_amax", lambda: None)
    assert experiments.NOTES.run().value("ch07.notes_calibrator_has_amax") == 0.0
    sizes = {"ResNet": {None: 40.0, 8: 10.0}, "MobileNet": {None: 20.0, 8: 8.0}}
    monkeypatch.setattr(experiments.ptq, "quantize_model", lambda m: m)
    monkeypatch.setattr(experiments.ptq, "model_size", lambda m, bits=None: {"kib": sizes[m][bits]})
    size = experiments.SIZE.run(models={"ResNet": "ResNet", "MobileNet": "MobileNet"})
    assert [r["ratio"] for r in size["_size"]] == [4.0, 2.5] and size.value("ch07.size_ratio.resnet") == 4.0
    assert [r.name for r in records.session_records()] == ["ch07.fragile_drop_pts", "ch07.notes_calibrator_has_amax",
                                                           "ch07.size_ratio.resnet"]


def test_the_stored_runs_come_back_as_rows():
    recs = reference.load("cpu")
    int8 = tables.INT8.stored_rows(recs)
    assert len(int8) == 16 and {r["model"] for r in int8} == {"ResNet", "MobileNet"}
    assert {r["model"] for r in tables.W4.stored_rows(recs)} == {"ResNet", "MobileNet"}
    assert sorted(r["quantized layers"] for r in tables.MIXED.stored_rows(recs)) == list(range(11))
    other = Record("ch07.int8_acc.vgg.per-tensor.max", 1.0, "%", "d", "d")
    assert tables.INT8.stored_rows([other]) == []  # not a model of this chapter


def test_the_w4_view_writes_the_interval():
    rows = [{"model": "ResNet", "per-tensor": 90.0, "per-channel": 92.0, "gain pts": 2.0,
             "spread": Spread(0.5, 3.5, "paired bootstrap")},
            {"model": "MobileNet", "per-tensor": 70.0, "per-channel": 90.0, "gain pts": 20.0, "spread": None}]
    view = experiments.w4_view(rows)
    assert view[0]["gain 95% interval"] == "+0.5 to +3.5" and view[1]["gain 95% interval"] == ""
    assert experiments.shown([{"a": 1, "_right": [True]}]) == [{"a": 1}]
