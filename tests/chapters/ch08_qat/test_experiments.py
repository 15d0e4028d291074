"""Chapter 8's Experiments record under the names the stored runs and the notes' claim read: the points PTQ and QAT
lose per bit width as two tables, and qat.delta_pts as the median of the seeds with their spread (planted runs:
nothing is trained here)."""

from __future__ import annotations

import pytest

from helpers import records, reference
from helpers.chapters.ch08_qat import experiments, readings


@pytest.fixture
def session(monkeypatch):
    """A clean records session that writes no file."""
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)


def test_the_qat_run_records_both_tables_and_the_headline(monkeypatch, session):
    from helpers.model_quant import ptq, qat
    from helpers.models import train

    ptq_acc = {8: 96.0, 4: 90.0}
    monkeypatch.setattr(ptq, "ptq", lambda model, data, method, weight_bits, act_bits: act_bits)
    monkeypatch.setattr(train, "evaluate", lambda calibrated, data: ptq_acc[calibrated])
    accs = {8: (98.5, 98.4, 98.9), 4: (94.3, 94.2, 94.0)}
    monkeypatch.setattr(qat, "qat_seeds", lambda make, data, seeds, epochs, lr: [
        {"test_acc": a, "history": [{"val_acc": 90.0}, {"val_acc": a}]} for a in accs[make()]])
    run = experiments.QAT.run(model=None, data=None, fp32=98.3, epochs=1, lr=1e-3, seeds=(0, 1, 2))
    assert [r.name for r in records.session_records()] == [
        "ch08.w4a8.ptq_delta_pts", "ch08.w4a4.ptq_delta_pts", "ch08.w4a8.qat_delta_pts", "ch08.w4a4.qat_delta_pts",
        "qat.delta_pts"]
    head = records.session_records()[-1]
    assert head.value == pytest.approx(98.3 - 98.5) and head.extra["lo"] == pytest.approx(98.3 - 98.9)
    assert run["qat"][0]["_curve"] == [90.0, 98.5] and "_curve" not in experiments.shown(run["qat"])[0]
    assert "W4A4: PTQ lost 8.3 points" in readings.qat_summary(run["qat"])


def test_the_stored_runs_come_back_as_rows_and_the_notes_check_records_its_name(monkeypatch, session):
    recs = reference.load("cpu")
    assert [r["bits"] for r in experiments.QAT_DELTA.stored_rows(recs)] == ["W4A8", "W4A4"]
    assert [r["bits"] for r in experiments.PTQ_DELTA.stored_rows(recs)] == ["W4A8", "W4A4"]
    monkeypatch.setattr(experiments.notes, "notes_api_exists", lambda: False)
    assert experiments.NOTES.run().value("ch08.notes_quantdesc_exists") == 0.0
