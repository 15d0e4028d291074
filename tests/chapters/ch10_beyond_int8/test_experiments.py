"""Chapter 10's Experiments: the CPU ones measure here and record the names chapter 10 recorded before it declared
tables (the CPU reference's names); the GPU ones show the stored H200 rows on a machine without a GPU, labelled;
every speed ratio carries the spread of its interleaved rounds (``helpers.bench.interleaved``)."""

from __future__ import annotations

import numpy as np
import pytest

from helpers import records, reference
from helpers.chapters.ch10_beyond_int8 import experiments as ch10
from helpers.chapters.ch10_beyond_int8 import readings, tables
from helpers.errors import InputError
from helpers.spread import Spread

# rows recorded now that were shown, but not recorded, before the tables existed (reference/cpu lacks them)
NEW_CPU_NAMES = {"ch10.sparsity.int8_24_acc", "ch10.sparsity.unstructured_int8_acc",
                 "ch10.pipeline.split_bytes_ratio.k0", "ch10.pipeline.split_bytes_ratio.k3"}
GPU_EXPERIMENTS = (ch10.SPARSITY_GPU, ch10.FP8, ch10.MIXED_SPEED, ch10.LAYOUT_GPU, ch10.SPLIT_GAIN, ch10.PIPELINE_GPU)


@pytest.fixture(autouse=True)
def session(monkeypatch):
    """A clean records session that writes no file."""
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)


def _names() -> list[str]:
    return [r.name for r in records.session_records()]


def test_cpu_experiments_record_the_stored_cpu_names_with_their_spreads():
    """Old behaviour: each cell called bench.record with a literal name (32 places in the notebook)."""
    ch10.UNSTRUCTURED_CPU.run(size=32, repeats=3)
    ch10.LAYOUT_CPU.run(batch=1, channels=8, size=8, repeats=3)
    ch10.SPLIT_BYTES.run()
    video = ch10.VIDEO_CPU.run(size=32, batch=2, repeats=2)
    ch10.ATOMICADD.run(updates={"right": np.ones(8), "wrong": np.array([1.0, 1.5] + [1e9] * 6)})
    speed = ch10.DYNAMIC_SPEED.run(d=32, layers=1, seq_len=16, batch=2, repeats=3)
    names = set(_names())
    stored = {r.name for r in reference.load("cpu") if r.name.startswith("ch10.")}
    assert names - stored <= NEW_CPU_NAMES
    assert {"ch10.sparsity.cpu_unstructured_speedup", "ch10.layout.cpu_int8_nhwc_speedup", "ch10.pipeline.cpu_gain",
            "ch10.dynamic.cpu_static_over_fp32", "ch10.dynamic.amax_share", "ch10.dynamic.atomicadd_in_range",
            "ch10.pipeline.split_bytes_ratio.k2"} <= names
    by = {r.name: r for r in records.session_records()}
    assert by["ch10.dynamic.atomicadd_in_range"].value == 0.25 and by["ch10.dynamic.atomicadd_in_range"].extra[
        "batches"] == 8
    for name in ("ch10.sparsity.cpu_unstructured_speedup", "ch10.layout.cpu_fp32_nhwc_speedup",
                 "ch10.dynamic.cpu_dynamic_over_fp32", "ch10.pipeline.cpu_gain"):
        r = by[name]
        assert r.extra["lo"] <= r.value <= r.extra["hi"] and "interleaved rounds" in r.extra["spread"], name
    assert "bound" in by["ch10.pipeline.cpu_gain"].extra  # the physical bound rides with the gain
    assert isinstance(speed["speed"][0]["speed vs FP32 spread"], Spread) and video.measured


def test_accuracy_experiments_derive_the_stored_deltas():
    rows = {"accuracy": [{"variant": v, "accuracy %": a, "sparsity": 0.5} for v, a in
                         (("dense FP32", 51.0), ("2:4 pruned", 30.0), ("2:4 + fine-tune", 50.0),
                          ("2:4 + fine-tune + INT8", 50.5), ("unstructured 50% + fine-tune + INT8 (seed)", 49.0))]}
    assert ch10.SPARSITY_ACCURACY.derive(rows) == {"ch10.sparsity.int8_24_delta_pts": pytest.approx(0.5)}
    names = [r.name for r in tables.SPARSITY_ACC.record(rows["accuracy"])]
    assert names[:3] == ["ch10.sparsity.dense_acc", "ch10.sparsity.pruned_24_acc", "ch10.sparsity.finetuned_24_acc"]
    text = readings.sparsity_recovery(rows["accuracy"])
    assert "cost 21.0 points" in text and "leaves 1.0 points lost (most of the loss recovered)" in text
    with pytest.raises(InputError, match="no record name"):
        tables.SPARSITY_ACC.record([{**rows["accuracy"][0], "variant": "something else"}])


def test_without_a_gpu_every_gpu_experiment_shows_the_stored_rows_of_the_newest_card(monkeypatch, capsys):
    """Without a GPU the newest stored card that holds chapter 10's rows is shown, and the label says which; the
    H200's stored values are read back exactly."""
    from helpers import reference

    monkeypatch.setattr("helpers.device.device_label", lambda: "CPU (x86_64, 2 cores)")
    newest = reference.nearest_card()
    for exp in GPU_EXPERIMENTS:
        result = exp.run(stored=True)
        assert result.source == newest and any(result.rows.values()), exp.name
        assert f"stored {newest.upper()} run" in result.where() and "holds these rows" in result.where()
    sparse = ch10.SPARSITY_GPU.run(stored=True, card="h200")
    assert [r["dtype"] for r in sparse["gemm"]] == ["float16", "int8"]
    assert sparse["gemm"][0]["2:4 kernel"] == "SparseSemiStructuredTensorCUSPARSELT"
    text = sparse.say("{f:.2f} {i:.2f}: {verdict}.", {"f": ch10.SPARSE_NAMES[0], "i": ch10.SPARSE_NAMES[1]},
                      readings.sparsity_gain)
    assert text.startswith("0.76 0.79: " + readings.LOSS_24)
    speed = ch10.MIXED_SPEED.run(stored=True, card="h200")
    assert [r["kept in FP"] for r in speed["speed"]] == [0, 1, 2, 4, 10] and speed["speed"][0]["batch"] == 8192
    pipe = ch10.PIPELINE_GPU.run(stored=True, card="h200")
    assert pipe["video"][0]["bound gain"] == pytest.approx(0.4027, abs=1e-4)
    assert pipe.value("ch10.pipeline.video_cpu_stage_slowdown") == pytest.approx(2.07, abs=0.01)


def test_the_pipeline_experiment_derives_the_cpu_stage_slowdown():
    rows = {"video": [{"CPU stage slowdown": 1.3}]}
    assert ch10.PIPELINE_GPU.derive(rows) == {"ch10.pipeline.video_cpu_stage_slowdown": 1.3}


def test_rows_of_keeps_the_declared_columns_only():
    rows = tables.rows_of(tables.LAYOUT_CPU, [{"dtype": "float32", "NHWC speed-up": 1.2, "NCHW ms": 2.0,
                                               "NHWC ms": 1.7, "device": "cpu"}])
    assert rows == [{"dtype": "float32", "NHWC speed-up": 1.2, "NCHW ms": 2.0, "NHWC ms": 1.7,
                     "output is NHWC for NCHW input": None, "NHWC speed-up spread": None}]


def test_the_mixed_precision_speed_curve_gives_each_k_its_spread_and_round_trips():
    import torch

    from helpers.chapters.ch10_beyond_int8 import mixed_precision
    from helpers.models.train import build_model

    model = build_model("resnet_small", (1, 40), 10).eval()
    order = [n for n, m in model.named_modules() if isinstance(m, (torch.nn.Conv1d, torch.nn.Linear))]
    rows = tables.rows_of(tables.MIXED_SPEED, mixed_precision.speed_curve(model, order, torch.randn(4, 1, 40),
                                                                          ks=(0, len(order)), repeats=2))
    spreads = mixed_precision.speed_spreads(rows)
    assert set(spreads) == {0, len(order)} and all(spreads[r["kept in FP"]].contains(r["speed vs float"]) for r in rows)
    assert [r["batch"] for r in rows] == [4, 4]
    recs = tables.MIXED_SPEED.record(rows)
    assert [r.name for r in recs] == ["ch10.mixed.cuda.speed.k0", f"ch10.mixed.cuda.speed.k{len(order)}"]
    assert tables.MIXED_SPEED.stored_rows(recs) == rows


def test_each_gpu_measure_turns_its_functions_rows_into_the_stored_names(monkeypatch, capsys):
    """The GPU measures cannot run here: planted rows, shaped as the chapter's GPU functions return them, must
    reach the records under the names the stored H200 run holds (and come back unchanged)."""
    from helpers.chapters.ch10_beyond_int8 import layouts, mixed_precision, pipeline, sparsity

    s = Spread(0.9, 1.1, "p10..p90 of 5 interleaved rounds")
    gemm = {"dtype": "float16", "shape": "8x8x8", "dense ms": 1.0, "2:4 ms": 1.2, "speed-up": 0.8,
            "dense TFLOP/s": 700.0, "2:4 dense-equivalent TFLOP/s": 600.0,
            "2:4 kernel": "SparseSemiStructuredTensorCUSPARSELT",
            "speed-up spread": s}
    monkeypatch.setattr(sparsity, "semi_structured_speed", lambda m, n, k, dtype: gemm if dtype == "float16" else
                        {"skipped": "int8 2:4 kernels unavailable here"})
    monkeypatch.setattr(sparsity, "dense_with_zeros_times", lambda m, n, k, device, repeats: {
        "device": device, "dense ms": 1.0, "50% zeros ms": 1.0, "speed-up from zeros": 1.0,
        "speed-up from zeros spread": s})
    conv = {"device": "cuda", "dtype": "float16", "NCHW ms": 2.0, "NHWC ms": 1.0, "NHWC speed-up": 2.0,
            "NHWC speed-up spread": s}
    monkeypatch.setattr(layouts, "conv_layout_times", lambda *a, **kw: conv)
    monkeypatch.setattr(layouts, "int8_pointwise_layout_times", lambda *a, **kw: {
        **conv, "dtype": "int8 (_int_mm)", "GEMM MB": 3.0})
    monkeypatch.setattr(pipeline, "split_layers_gain", lambda device, ks: [
        {"conv blocks on the CPU": k, "KB per frame over PCIe": 1.0, "CPU stage ms/batch": 1.0,
         "GPU stage ms/batch": 1.0, "pipelined fps": 9.0, "gain vs k=0": -0.1 * k,
         "gain vs k=0 spread": None if k == 0 else s} for k in ks])
    monkeypatch.setattr(pipeline, "pinned_vs_pageable", lambda sizes: [
        {"size MB": mb, "pageable GB/s": 5.0, "pinned GB/s": 40.0, "pinned/pageable": 8.0,
         "pinned/pageable spread": s} for mb in sizes])
    monkeypatch.setattr(pipeline, "overlap_copy_compute", lambda chunks, chunk_mb, timelines=False: {
        "copy ms": 1.0, "compute ms": 2.0, "serial ms": 3.0, "overlapped ms": 2.1, "speedup": 1.43, "bound": 1.5,
        "chunk MB": chunk_mb, "chunks": chunks, "speedup spread": s})
    monkeypatch.setattr(pipeline, "split_pipeline_gain", lambda device, size, batch: {
        "device": device, "frames": 64, "preprocess ms/batch": 1.0, "infer ms/batch": 1.0, "sequential fps": 10.0,
        "pipelined fps": 9.0, "gain": -0.1, "bound gain": 0.4, "CPU stage slowdown": 2.1,
        "rounds beyond the bound": 0, "gain spread": s})
    monkeypatch.setattr(mixed_precision, "speed_curve", lambda model, order, x, ks, device, calib: [
        {"kept in FP": k, "ms": 1.0, "float ms": 0.5, "batch": 8, "speed vs float": 0.5, "speed vs float spread": s}
        for k in ks])
    mixed = {"model": None, "order": ["a", "b"], "x": None, "ks": [0, 2]}
    expected = [(ch10.SPARSITY_GPU, {}, ["ch10.sparsity.fp16_24_over_dense", "ch10.sparsity.gpu_unstructured_speedup"]),
                (ch10.LAYOUT_GPU, {}, ch10.LAYOUT_NAMES),
                (ch10.SPLIT_GAIN, {}, ["ch10.pipeline.split_gain.k0", *ch10.SPLIT_NAMES]),
                (ch10.PIPELINE_GPU, {}, ["ch10.pipeline.pinned_over_pageable_4",
                                         "ch10.pipeline.pinned_over_pageable_64", *ch10.PIPE_NAMES[:3]]),
                (ch10.MIXED_SPEED, mixed, ["ch10.mixed.cuda.speed.k0", "ch10.mixed.cuda.speed.k2"])]
    for exp, kw, names in expected:
        rows = exp.measure(**kw)
        recs = [r for key, table in exp.tables.items() for r in table.record(rows[key])]
        assert [r.name for r in recs] == names, exp.name
        assert all(table.stored_rows(recs) == rows[key] for key, table in exp.tables.items()), exp.name
    assert "int8 2:4 kernels unavailable here" in capsys.readouterr().out
    video = ch10.PIPELINE_GPU.measure()["video"]
    assert ch10.PIPELINE_GPU.derive({"video": video}) == {"ch10.pipeline.video_cpu_stage_slowdown": 2.1}
    assert tables.VIDEO_GPU.record(video)[0].extra["bound"] == 0.4  # readings._bound reads it there


@pytest.mark.parametrize("lo, hi, en, zh", [(0.93, 1.03, "not resolved at this noise", "在此噪声下无法分辨"),
                                            (1.02, 1.05, "machine's load changed", "机器负载变了")])
def test_the_zeros_sentence_and_its_twin_are_judged_by_the_rounds_spread(lo, hi, en, zh):
    from helpers.chapters.ch10_beyond_int8 import readings_zh

    row = {"device": "cpu", "speed-up from zeros": 1.01, "dense ms": 2.0, "50% zeros ms": 1.98,
           "speed-up from zeros spread": Spread(lo, hi, "p10..p90 of 10 interleaved rounds")}
    assert en in readings.unstructured_cpu(row) and zh in readings_zh.unstructured_cpu(row)
    rows = [{"variant": v, "accuracy %": a} for v, a in (("dense FP32", 51.0), ("2:4 pruned", 30.0),
                                                         ("2:4 + fine-tune", 40.0), ("2:4 + fine-tune + INT8", 40.0))]
    assert "part of the loss" in readings.sparsity_recovery(rows)
    assert "部分损失被找回" in readings_zh.sparsity_recovery(rows)
