"""Chapter 1: latency sweeps, crossover, records, and the tiny model."""

from __future__ import annotations

import math

import pytest
import torch

from helpers import bench
from helpers.chapters.ch01_why_gpu_inference import inference_speed as speed
from helpers.errors import InputError, NoGPUError


def test_crossover_batch():
    assert speed.crossover_batch([1, 4, 16, 64], [1, 2, 8, 30], [5, 5, 6, 7]) == 16
    assert speed.crossover_batch([64, 1, 16, 4], [30, 1, 8, 2], [7, 5, 6, 5]) == 16  # unsorted input
    assert speed.crossover_batch([1, 4], [1, 2], [5, 5]) is None
    assert speed.crossover_batch([1, 4, 16], [1, 9, 8], [5, 5, 9]) is None  # GPU must stay ahead
    with pytest.raises(InputError):
        speed.crossover_batch([1, 2], [1], [1, 2])


def test_tiny_mlp_on_cpu_and_records_round_trip():
    model, make = speed.build("tiny_mlp")
    assert sum(p.numel() for p in model.parameters()) < 5000
    rows = [speed.measure(model, make, b, "cpu", name="tiny_mlp", warmup=1, repeats=3) for b in (1, 64)]
    assert all(r.ms > 0 for r in rows) and rows[1].items_per_s > 0
    n = len(bench.session_records())
    speed.record(rows, prefix="test01")
    recs = bench.session_records()[n:]
    assert [r.name for r in recs] == ["test01.tiny_mlp.cpu_ms.b1", "test01.tiny_mlp.cpu_ms.b64"]
    back = speed.from_records(recs)
    assert [(r.model, r.mode, r.batch) for r in back] == [("tiny_mlp", "cpu", 1), ("tiny_mlp", "cpu", 64)]


def test_from_records_parses_modes_and_dtypes():
    recs = [bench.Record(n, 1.0, "ms", "x", "d") for n in (
        "ch01.bert_base.gpu_e2e_ms.b8", "ch01.bert_base.gpu_fp16_ms.b8", "ch01.speedup.bert_base.b8",
        "ch01.tiny_mlp.crossover_batch")]
    got = {(r.mode, r.dtype) for r in speed.from_records(recs)}
    assert got == {("gpu_e2e", "fp32"), ("gpu", "fp16")}


def test_speedups_and_crossover_recording():
    res = [speed.Latency("m", "cpu", 1, 2.0), speed.Latency("m", "gpu_e2e", 1, 4.0),
           speed.Latency("m", "cpu", 8, 16.0), speed.Latency("m", "gpu_e2e", 8, 4.0)]
    s = speed.record_speedups(res, prefix="test01")
    assert s == {"test01.speedup.m.b1": 0.5, "test01.speedup.m.b8": 4.0}
    assert speed.record_crossover(res, "m", prefix="test01") == 8
    with pytest.raises(InputError):
        speed.record_crossover(res[:3], "m", prefix="test01")


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
