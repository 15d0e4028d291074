"""Chapter 10's FP8 speeds carry their noise: BF16, INT8 and FP8 are timed in interleaved rounds
(``helpers.bench.interleaved``), each ratio is paired round by round, the ch10.fp8.* records (``tables.FP8_*``)
store its spread under the names stored before the tables existed, and a spread that holds 1 is printed "not
resolved" (planted timings, no GPU)."""

from __future__ import annotations

import pytest

from helpers import bench, findings
from helpers.bench import Rounds
from helpers.chapters.ch10_beyond_int8 import experiments, fp8_study, readings, tables
from helpers.errors import InputError

NAMES = {"g": "ch10.fp8.gemm_fp8_over_bf16", "f": "ch10.fp8.bert_fp8_over_bf16", "i": "ch10.fp8.bert_int8_over_bf16"}
BF16 = (2.0e-3, 2.0e-3, 4.0e-3, 2.0e-3, 2.0e-3)  # round 3 was slow for every variant
BERT = {"BF16": BF16, "INT8 (_int_mm)": (6.0e-3, 6.0e-3, 12e-3, 6.0e-3, 6.0e-3),
        "FP8 (_scaled_mm)": (1.9e-3, 2.1e-3, 4.0e-3, 2.05e-3, 1.95e-3),  # round ratios straddle 1
        "INT8 (Triton, fused)": (4.0e-3, 4.0e-3, 8.0e-3, 4.0e-3, 4.4e-3)}
COSINE = dict.fromkeys(BERT, 0.999)


@pytest.fixture(autouse=True)
def _session(monkeypatch):
    """An empty session record, nothing written to a results file."""
    monkeypatch.setitem(bench._session, "records", [])
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)


def test_gpu_rounds_ask_the_one_harness_for_cuda_events_and_a_settling_call(monkeypatch):
    """Old behaviour: a harness of its own (bench.timed_rounds over a timeit per round)."""
    seen = {}

    def planted(fns, **kw):
        seen.update(kw)
        return Rounds({k: (1e-3,) * kw["rounds"] for k in fns}, dict.fromkeys(fns, "torch"))

    monkeypatch.setattr(fp8_study, "interleaved", planted)
    secs = fp8_study.gpu_rounds({"a": lambda: None, "b": lambda: None}, 5, per_round=4)
    assert secs == {"a": (1e-3,) * 5, "b": (1e-3,) * 5}
    assert seen == {"rounds": 5, "clock": "torch", "warmup": 1, "settle": 1, "per_round": 4}


def test_gemm_speed_pairs_the_rounds_and_keeps_the_spread(monkeypatch):
    from helpers.perf import gemm

    planted = {"bf16": iter(BF16), "fp8": iter((1.1e-3, 1.2e-3, 2.2e-3, 1.1e-3, 1.0e-3))}
    monkeypatch.setattr(fp8_study, "fp8_support", lambda: (True, ""))
    monkeypatch.setattr(gemm, "gemm_fn", lambda p, m, n, k: p)  # the timer below reads the precision back
    monkeypatch.setattr(fp8_study, "gpu_rounds", lambda fns, rounds, per_round: {p: tuple(planted[p]) for p in fns})
    row, = fp8_study.gemm_speed((64,))
    s = row["FP8 / BF16 spread"]
    assert row["FP8 / BF16"] == pytest.approx(2.0 / 1.1) and s is not None and s.lo < 2.0 / 1.1 < s.hi
    assert row["BF16 TFLOP/s"] == pytest.approx(bench.tflops(2 * 64**3, 2.0e-3)) and "5 interleaved rounds" in s.method


def test_bert_ratios_pair_the_faster_int8_path_with_bf16_round_by_round():
    b = fp8_study.bert_result(BERT, COSINE, 32, 128)
    assert b["INT8 best"] == "INT8 (Triton, fused)" and b["INT8 / BF16 speed"] == pytest.approx(0.5)
    assert b["FP8 / BF16 speed"] == pytest.approx(1.0) and b["BF16 ms"] == pytest.approx(2.0)
    assert b["FP8 / BF16 speed spread"].contains(1.0)
    with pytest.raises(InputError, match="needs BF16"):
        fp8_study.bert_result({"BF16": BF16}, COSINE, 32, 128)


def test_the_records_store_their_spread_and_a_spread_holding_1_is_not_resolved(monkeypatch, capsys):
    g = [fp8_study.gemm_row(4096, {"bf16": BF16, "fp8": BF16}),
         fp8_study.gemm_row(8192, {"bf16": BF16, "fp8": (1.1e-3, 1.2e-3, 2.2e-3, 1.1e-3, 1.0e-3)})]
    monkeypatch.setattr(fp8_study, "gemm_speed", lambda sizes: g)
    monkeypatch.setattr(fp8_study, "bert_speed",
                        lambda batch, seq_len: fp8_study.bert_result(BERT, COSINE, batch, seq_len))
    rows = experiments.FP8.measure()
    recs = [r for key, table in experiments.FP8.tables.items() for r in table.record(rows[key])]
    by = {r.name: r for r in recs}
    assert set(NAMES.values()) <= set(by) and by[NAMES["g"]].extra["size"] == 8192
    assert "ch10.fp8.gemm_fp8_over_bf16_4096" in by and "ch10.fp8.bert_ms.int8_triton_fused" in by
    assert by[NAMES["i"]].extra["path"] == "INT8 (Triton, fused)" and by[NAMES["f"]].extra["batch"] == 32
    assert tables.FP8_BERT.stored_rows(recs) == rows["bert"]
    for r in (by[n] for n in NAMES.values()):  # the old records held the bare ratio only
        assert r.extra["lo"] <= r.value <= r.extra["hi"] and r.extra["spread"] == "p10..p90 of 5 interleaved rounds"
    text = findings.sentence("{verdict}", NAMES, readings.fp8_model)  # the notebook's verdict, judged by spreads
    assert text.startswith(f"the GEMM alone is faster than BF16; the eager model is {findings.NOT_RESOLVED} against "
                           "BF16 with FP8 Linears and slower than BF16 with INT8 Linears")  # never one word for both
    assert readings.NO_SPREAD not in text
    fp8_bert = NAMES["f"]  # its rounds ran 0.95..1.05x BF16: not a finding either way
    inside = findings.sentence("{verdict}", dict.fromkeys("gfi", fp8_bert), readings.fp8_model)
    assert inside.startswith(f"the GEMM alone is {findings.NOT_RESOLVED} against BF16")


def test_without_fp8_hardware_the_timings_say_why():
    if fp8_study.fp8_support()[0]:
        pytest.skip("this machine runs FP8 GEMMs")
    with pytest.raises(InputError, match="FP8 GEMM skipped"):
        fp8_study.gemm_speed((64,))
    with pytest.raises(InputError, match="FP8 model skipped"):
        fp8_study.bert_speed()
