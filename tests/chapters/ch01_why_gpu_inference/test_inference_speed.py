"""Chapter 1: latency sweeps, crossover, records, and the tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import bench, reference
from helpers.chapters.ch01_why_gpu_inference import inference_speed as speed
from helpers.chapters.ch01_why_gpu_inference import tables
from helpers.errors import InputError, NoGPUError
from tests.support.stored_tables import stored_tables_problems


def test_crossover_batch():
    assert speed.crossover_batch([1, 4, 16, 64], [1, 2, 8, 30], [5, 5, 6, 7]) == 16
    assert speed.crossover_batch([64, 1, 16, 4], [30, 1, 8, 2], [7, 5, 6, 5]) == 16  # unsorted input
    assert speed.crossover_batch([1, 4], [1, 2], [5, 5]) is None
    assert speed.crossover_batch([1, 4, 16], [1, 9, 8], [5, 5, 9]) is None  # GPU must stay ahead
    with pytest.raises(InputError):
        speed.crossover_batch([1, 2], [1], [1, 2])


def test_tiny_mlp_on_cpu_and_its_rows_round_trip(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    model, make = speed.build("tiny_mlp")
    assert sum(p.numel() for p in model.parameters()) < 5000
    rows = [speed.measure(model, make, b, "cpu", name="tiny_mlp", warmup=1, repeats=3) for b in (1, 64)]
    assert all(r.ms > 0 for r in rows) and rows[1].items_per_s > 0
    n = len(bench.session_records())
    recs = tables.LATENCY.record(tables.rows_of(rows))
    assert [r.name for r in recs] == ["ch01.tiny_mlp.cpu_ms.b1", "ch01.tiny_mlp.cpu_ms.b64"]
    back = tables.latencies(tables.LATENCY.stored_rows(bench.session_records()[n:]))
    assert [(r.model, r.mode, r.batch) for r in back] == [("tiny_mlp", "cpu", 1), ("tiny_mlp", "cpu", 64)]


def test_old_latency_records_read_back_by_mode_and_dtype():
    recs = [bench.Record(n, 1.0, "ms", "x", "d") for n in (
        "ch01.bert_base.gpu_e2e_ms.b8", "ch01.bert_base.gpu_fp16_ms.b8", "ch01.speedup.bert_base.b8",
        "ch01.tiny_mlp.crossover_batch", "ch01.cpu_bandwidth_all_cores_gbs")]
    got = {(r.mode, r.dtype) for r in tables.latencies(tables.LATENCY.stored_rows(recs))}
    assert got == {("gpu_e2e", "fp32"), ("gpu", "fp16")}
    assert tables.SPEEDUP.stored_rows(recs) == [{"model": "bert_base", "batch": 8, "CPU ÷ GPU end to end": 1.0}]
    assert tables.BANDWIDTH.stored_rows(recs) == [{"copy": "cpu_bandwidth_all_cores", "GB/s": 1.0, "threads": None}]


def test_speedups_and_crossover():
    res = [speed.Latency("m", "cpu", 1, 2.0), speed.Latency("m", "gpu_e2e", 1, 4.0),
           speed.Latency("m", "cpu", 8, 16.0), speed.Latency("m", "gpu_e2e", 8, 4.0)]
    assert speed.speedup_rows(res) == [{"model": "m", "batch": 1, "CPU ÷ GPU end to end": 0.5},
                                       {"model": "m", "batch": 8, "CPU ÷ GPU end to end": 4.0}]
    assert speed.crossover(res, "m") == 8
    with pytest.raises(InputError):
        speed.crossover(res[:3], "m")


def test_the_stored_runs_read_back_under_the_names_they_were_stored_with(monkeypatch):
    monkeypatch.delenv(bench.RESULTS_VAR, raising=False)
    monkeypatch.setitem(bench._session, "records", [])
    for source in ("h200", "cpu"):
        recs = reference.load(source)
        stored = sorted(r.name for r in recs if r.name.startswith("ch01.") and "_ms.b" in r.name)
        assert sorted(r.name for r in tables.LATENCY.record(tables.LATENCY.stored_rows(recs))) == stored
        copies = sorted(r.name for r in recs if r.name in tables.COPIES)
        assert sorted(r.name for r in tables.BANDWIDTH.record(tables.BANDWIDTH.stored_rows(recs))) == copies
    assert stored_tables_problems({"ch01.speedup.": (tables.SPEEDUP, 4)}) == []


def test_the_tiny_gpu_sweep_records_a_crossover_only_when_concluded(monkeypatch):
    from helpers.chapters.ch01_why_gpu_inference import experiments as ex

    cpu = tables.rows_of(speed.Latency("tiny_mlp", "cpu", b, b * 1.0, checked=True) for b in (1, 4, 16))
    gpu = [speed.Latency("tiny_mlp", m, b, 5.0, checked=True) for m in ("gpu", "gpu_e2e") for b in (1, 4, 16)]
    monkeypatch.setattr(speed, "sweep", lambda *a, **k: gpu)
    assert ex._tiny_gpu(cpu, (1, 4, 16))["crossover"] == [{"model": "tiny_mlp", "crossover batch": 16.0}]
    assert ex._tiny_gpu(cpu[:1] + [{**cpu[1], "ms": 0.1}, {**cpu[2], "ms": 0.1}], (1, 4, 16))["crossover"] == []


def test_plot_marks_crossover():
    res = [speed.Latency("m", "cpu", b, b * 1.0) for b in (1, 4, 16)]
    res += [speed.Latency("m", "gpu_e2e", b, 5.0) for b in (1, 4, 16)]
    fig = speed.plot(res, "m")
    assert any("batch 16" in t.get_text() for t in fig.axes[0].get_legend().get_texts())


def test_to_moves_nested_inputs():
    x = {"a": torch.ones(2), "b": (torch.zeros(1, dtype=torch.long),)}
    y = speed.to(x, "cpu", torch.float16)
    assert y["a"].dtype == torch.float16 and y["b"][0].dtype == torch.long


def test_bad_arguments():
    model, make = speed.build("tiny_mlp")
    with pytest.raises(InputError):
        speed.measure(model, make, 1, "tpu")
    with pytest.raises(InputError):
        speed.measure(model, make, 0, "cpu")
    with pytest.raises(InputError):
        speed.build("gpt2")
    if not torch.cuda.is_available():
        with pytest.raises(NoGPUError):
            speed.measure(model, make, 1, "gpu")


@pytest.mark.gpu
def test_gpu_modes_bert_small_batches():
    res = speed.sweep("bert_base", [1, 8], ["gpu", "gpu_e2e"], repeats=3)
    res += speed.sweep("bert_base", [1], ["gpu"], dtype="fp16", repeats=3)
    assert all(r.ms > 0 and math.isfinite(r.ms) for r in res)
    e2e = {r.batch: r.ms for r in res if r.mode == "gpu_e2e"}
    gpu = {r.batch: r.ms for r in res if r.mode == "gpu" and r.dtype == "fp32"}
    assert e2e[8] >= 0.8 * gpu[8]  # copies can only add time (allow noise)


@pytest.mark.gpu
def test_gpu_tiny_model_crossover_exists():
    res = speed.sweep("tiny_mlp", [1, 65536], ["cpu", "gpu_e2e"], repeats=10)
    cpu = {r.batch: r.ms for r in res if r.mode == "cpu"}
    gpu = {r.batch: r.ms for r in res if r.mode == "gpu_e2e"}
    assert gpu[1] > 0 and cpu[65536] > 0
