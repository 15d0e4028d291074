"""Chapter 5's copy and GEMM Experiments record under the names the stored runs hold, with each GEMM in its own
unit, and the stored GPU run comes back as the rows the notebook shows (planted timings: nothing is timed here)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import records
from helpers.chapters.ch05_quantization_fundamentals import measurements as m


@pytest.fixture
def session(monkeypatch):
    """A clean records session that writes no file."""
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)


def copy_ratio(numel, repeats, device):
    return {"fp32_ms": 4.0, "int8_ms": 1.5, "fp32_over_int8_time": 4.0 / 1.5, "fp32_over_int8_bytes": 4.0,
            "fp32_gbs": 20.0 if device == "cpu" else 4000.0, "int8_gbs": 13.0}


def test_the_cpu_copy_records_its_stored_name_and_extras(monkeypatch, session, capsys):
    monkeypatch.setattr(m.sizes, "measured_copy_ratio", copy_ratio)
    res = m.COPY_CPU.run(numel=1 << 26, repeats=10)
    rec = records.session_records()[0]
    assert rec.name == "ch05.copy.fp32_over_int8_time.cpu" and rec.unit == "ratio"
    assert rec.extra["numel"] == 1 << 26 and rec.extra["fp32_gbs"] == 20.0
    assert res["copy"][0]["FP32 ÷ INT8 time"] == pytest.approx(4.0 / 1.5)
    assert "CPU copy of 64M values" in capsys.readouterr().out


def test_the_gpu_run_keeps_every_name_and_unit(monkeypatch, session):
    monkeypatch.setattr(m.sizes, "measured_copy_ratio", copy_ratio)
    monkeypatch.setattr(m.intgemm, "dp4a_gemm", lambda a, b: a.astype(np.int32) @ b.astype(np.int32))
    monkeypatch.setattr(m.intgemm, "gemm_throughput", lambda *a, **k: {"dp4a_tops": 90.0, "int_mm_tops": 900.0,
                                                                      "bf16_tops": 780.0})
    rows = m._gpu(numel=1 << 10, size=64, repeats=2)
    recs = [r for key, t in m.GPU_INT8.tables.items() for r in t.record(rows[key])]
    assert [(r.name, r.unit) for r in recs] == [("ch05.copy.fp32_over_int8_time.gpu", "ratio"),
                                                ("ch05.gemm.dp4a_tops", "TOPS"), ("ch05.gemm.int_mm_tops", "TOPS"),
                                                ("ch05.gemm.bf16_tops", "TFLOP/s")]
    assert m._gpu_derive(rows) == {"ch05.gemm.dp4a_over_int_mm": pytest.approx(0.1)}
    assert m._gpu_derive({"int8_gemm": []}) == {}


def test_the_stored_gpu_run_comes_back_as_rows():
    res = m.GPU_INT8.run(stored=True, card="h200")
    assert {r["device"] for r in res["copy"]} == {"cpu", "gpu"}
    bars = m.gemm_bars(res)
    assert set(bars) == {"dp4a", "int8 Tensor Core", "bf16 Tensor Core"} and bars["int8 Tensor Core"] > bars["dp4a"]
