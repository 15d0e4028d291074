"""Chapter 11's Experiments record under the names the stored runs and the lecture-note claims read, and show the
stored GPU run where this machine cannot build and load kernels (planted steps and reports: nothing is quantized)."""

from __future__ import annotations

import pytest

from helpers import records, reference
from helpers.chapters.ch11_troubleshooting import experiments
from helpers.spread import Spread


@pytest.fixture
def session(monkeypatch):
    """A clean records session that writes no file."""
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)


def names() -> list[str]:
    return [r.name for r in records.session_records()]


def test_the_fix_loop_records_its_first_second_and_last_drop(monkeypatch, session):
    diag = lambda lo, hi: type("D", (), {"drop_spread": Spread(lo, hi, "paired bootstrap")})()
    steps = [{"step": "start", "drop pts": 45.0, "diagnosis": diag(42.0, 48.0)},
             {"step": "per-channel weights", "drop pts": 25.0, "diagnosis": diag(22.0, 28.0)},
             {"step": "keep layer1.conv2 in floating point", "drop pts": 0.2, "diagnosis": diag(-0.1, 0.5)}]
    monkeypatch.setattr(experiments.accuracy_fix, "fix_until_recovered", lambda m, d, target_pts: steps)
    fix = experiments.ACCURACY.run(model=None, data=None, target_pts=1.0)
    assert fix["_steps"] == steps
    assert names() == ["ch11.accuracy.initial_drop_pts", "ch11.accuracy.final_drop_pts",
                       "ch11.accuracy.after_first_fix_pts"]
    assert fix.value("ch11.accuracy.final_drop_pts") == 0.2 and records.session_records()[1].extra["hi"] == 0.5
    monkeypatch.setattr(experiments.accuracy_fix, "fix_until_recovered", lambda m, d, target_pts: steps[:1])
    assert set(experiments.ACCURACY.run(model=None, data=None).rows) == {"_steps"}
    assert names()[-2:] == ["ch11.accuracy.initial_drop_pts", "ch11.accuracy.final_drop_pts"]


def test_the_two_exports_record_their_speed_ratio_by_activation_type(monkeypatch, session):
    report = lambda r: type("R", (), {"measurements": {"int8 / fp32 speed": r}})()
    monkeypatch.setattr(experiments.perf_diagnose, "diagnose",
                        lambda path, make, **kw: report({"a.onnx": 0.9, "b.onnx": 6.0}[path]))
    perf = experiments.PERF_RUN.run(exports={"s8": ("TensorRT-style", "a.onnx"), "u8": ("ORT", "b.onnx")},
                                    fp32_path="f.onnx", make_input=lambda b: None)
    assert names() == ["ch11.perf.cpu_s8_over_fp32", "ch11.perf.cpu_u8_over_fp32"]
    assert [r["_report"].measurements["int8 / fp32 speed"] for r in perf["perf"]] == [0.9, 6.0]
    stored = experiments.PERF.stored_rows(reference.load("cpu"))
    assert [r["activations"] for r in stored] == ["s8", "u8"]


def test_the_build_test_derives_the_claims_numbers_and_shows_the_stored_run_elsewhere(monkeypatch, session):
    rows = {"builds": [{"attempt": a, "loads and runs": v, "build": a, "message": ""}
                       for a, v in zip(experiments.ATTEMPTS, (0.0, 1.0, 1.0))]}
    assert experiments._arch_derive(rows) == {"ch11.arch.wrong_sass_loads": 0.0, "ch11.arch.right_gencode_loads": 1.0}
    assert experiments._arch_derive({"builds": []}) == {}
    arch = experiments.ARCH.run(stored=True, card="h200")
    assert not arch.measured and arch.value("ch11.arch.wrong_sass_loads") == 0.0
    arch.show("builds", caption="builds")  # no stored run holds the build rows yet: says so, does not fail
