"""Chapter 10: the printed verdicts follow the numbers (stored H200 values and planted opposites), the
lecture-note claims judge the split, atomicAdd and sparsity claims, and the PCIe bytes are exact."""

from __future__ import annotations

import pytest
import torch

from helpers import claims
from helpers.chapters.ch10_beyond_int8 import notes, pipeline, readings
from helpers.errors import InputError

STORED_ACC = {0: 67.1, 1: 86.6, 2: 98.9, 4: 98.6, 10: 98.7}
STORED_SPEED = {0: 0.3567, 1: 0.4019, 2: 0.4668, 4: 0.4989, 10: 1.0056}


def test_mixed_precision_reading_of_the_stored_run():
    text = readings.mixed_precision(STORED_ACC, STORED_SPEED, 98.7, "stored")
    assert "67.1%" in text and "k=1: 86.6%" in text and "k=2: 98.9%" in text
    assert "from k=2" in text  # not "one layer recovers it"
    assert "rising" in text and "INT8 layers are the slow ones" in text and "0.36×" in text


def test_mixed_precision_reading_flips_when_int8_is_faster():
    falling = {k: 1.6 - 0.06 * k for k in STORED_SPEED}
    text = readings.mixed_precision(STORED_ACC, falling, 98.7, "here")
    assert "INT8 pays" in text and "slow ones" not in text
    assert "Speed: not measured" in readings.mixed_precision(STORED_ACC, {}, 98.7, "here")
    with pytest.raises(InputError):
        readings.mixed_precision({}, {}, 98.7, "here")


@pytest.mark.parametrize("f,i,word", [(0.8648, 0.9963, "no gain"), (1.45, 1.2, "real gain"), (0.7, 0.8, "a loss")])
def test_sparsity_verdict(f, i, word):
    assert word in readings.sparsity_gain({"f": f, "i": i})


def test_other_verdicts_follow_the_numbers():
    assert "dynamic is faster" in readings.dynamic_vs_static({"d": 2.30, "s": 2.16})
    assert "static is faster" in readings.dynamic_vs_static({"d": 1.04, "s": 1.48})
    assert "slower than BF16" in readings.fp8_model({"g": 1.83, "f": 0.41, "i": 0.34})
    assert "follow it" in readings.fp8_model({"g": 1.83, "f": 1.3, "i": 1.2})
    assert "by most for INT8" in readings.layout_gain({"f": 1.51, "i": 6.93})
    assert "not win everywhere" in readings.layout_gain({"f": 0.9, "i": 6.93})
    assert "does not hold" in readings.split_claim({"g1": -0.2, "g2": -0.1})
    assert "holds here" in readings.split_claim({"g1": 0.02, "g2": 0.2})


def test_pcie_bytes_match_the_tensors_the_cpu_stage_hands_over():
    for k in range(pipeline.SPLIT_BLOCKS + 1):
        pre, post, frames = pipeline.split_stages("cpu", k, size=37, batch=2, width=8)
        x = pre(frames[0])
        assert x.numel() // 2 * 2 == pipeline.pcie_bytes_per_frame(k, size=37, width=8)  # FP16 bytes per frame
        assert post(x).shape == (2,)
    rows = {r["conv blocks on the CPU"]: r["vs no split"] for r in pipeline.split_bytes_rows()}
    assert rows[1] > 1 and rows[2] > 1 and rows[3] < 1  # the first blocks widen the tensor
    with pytest.raises(InputError):
        pipeline.split_stages("cpu", 4)


def test_split_gain_needs_the_baseline_and_runs_small_on_cpu():
    with pytest.raises(InputError, match="include 0"):
        pipeline.split_layers_gain("cpu", (1, 2))
    rows = pipeline.split_layers_gain("cpu", (0, 1), repeats=1, size=16, batch=1, width=4)
    assert rows[0]["gain vs k=0"] == 0 and rows[1]["pipelined fps"] > 0


def test_notes_claims_are_registered_and_judged():
    ids = {c.id for c in claims.registered(10)}
    assert {"ch10.cpu_first_layers", "ch10.atomicadd_scale", "ch10.unstructured_sparsity", "ch10.nhwc",
            "ch10.mixed_precision"} <= ids
    split = claims.judge(claims.get("ch10.cpu_first_layers"), {
        "ch10.pipeline.split_bytes_ratio.k1": 2.67, "ch10.pipeline.split_bytes_ratio.k2": 1.33,
        "ch10.pipeline.split_gain.k1": -0.3, "ch10.pipeline.split_gain.k2": -0.2})
    assert split["verdict"] == claims.FAILS
    partly = claims.judge(claims.get("ch10.cpu_first_layers"), {
        "ch10.pipeline.split_bytes_ratio.k1": 2.67, "ch10.pipeline.split_bytes_ratio.k2": 1.33})
    assert "partly measured" in partly["verdict"] or partly["verdict"] == claims.FAILS
    assert claims.judge(claims.get("ch10.atomicadd_scale"), {"ch10.dynamic.atomicadd_in_range": 0.125})[
        "verdict"] == claims.FAILS
    assert claims.judge(claims.get("ch10.unstructured_sparsity"), {
        "ch10.sparsity.cpu_unstructured_speedup": 0.99, "ch10.sparsity.gpu_unstructured_speedup": 1.05})[
        "verdict"] == claims.FAILS
    faster = claims.judge(claims.get("ch10.unstructured_sparsity"), {
        "ch10.sparsity.cpu_unstructured_speedup": 1.0, "ch10.sparsity.gpu_unstructured_speedup": 1.4})
    assert faster["verdict"] == claims.HOLDS and "buy no speed" not in faster["evidence"]
    mixed = claims.judge(claims.get("ch10.mixed_precision"), {
        "ch10.mixed.acc.k0": 67.1, "ch10.mixed.acc.k2": 98.9, "ch10.mixed.cuda.speed.k0": 0.36,
        "ch10.mixed.cuda.speed.k10": 1.0})
    assert mixed["verdict"].startswith("depends: holds for accuracy") and "slower than FP16" in mixed["evidence"]
    fast = claims.judge(claims.get("ch10.mixed_precision"), {
        "ch10.mixed.acc.k0": 67.1, "ch10.mixed.acc.k2": 98.9, "ch10.mixed.cuda.speed.k0": 1.6,
        "ch10.mixed.cuda.speed.k10": 1.0})
    assert "slower than FP16" not in fast["evidence"] and "faster than FP16" in fast["evidence"]
    assert notes.CLAIMS


def test_share_in_range_counts_the_batches_before_the_runaway():
    import numpy as np

    from helpers.chapters.ch10_beyond_int8 import dynamic_quant

    right = [1.0, 1.1, 1.2, 1.3]
    assert dynamic_quant.share_in_range([1.0, 1.5, np.inf, np.inf], right) == 0.5
    assert dynamic_quant.share_in_range(right, right) == 1.0
    batches = [np.random.default_rng(i).normal(size=64).astype(np.float32) for i in range(4)]
    wrong = dynamic_quant.atomic_add_ema(batches)
    assert dynamic_quant.share_in_range(wrong, dynamic_quant.ema_amax(batches)) < 1
    with pytest.raises(InputError):
        dynamic_quant.share_in_range([1.0], [1.0, 2.0])
