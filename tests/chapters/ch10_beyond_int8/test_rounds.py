"""Chapter 10: speed ratios carry their noise: medians of interleaved rounds and the rounds' spread, stored by
each timing function for the notebook's records (planted timings, tiny CPU runs)."""

from __future__ import annotations

import pytest
import torch

from helpers import tables
from helpers.bench import Timing
from helpers.chapters.ch10_beyond_int8 import dynamic_quant, layouts, mixed_precision, rounds, sparsity
from helpers.errors import InputError
from helpers.spread import Spread


def test_paired_ratio_pairs_the_samples_of_each_round():
    base = Timing((2.0, 2.0, 4.0, 2.0, 2.0), "cpu")  # round 3 was slow for both: its ratio is still 2
    other = Timing((1.0, 1.0, 2.0, 1.0, 0.8), "cpu")
    ratio, s = rounds.paired_ratio({"a": base, "b": other}, "a", "b")
    assert ratio == 2.0 and s is not None and s.lo == pytest.approx(2.0) and s.hi == pytest.approx(2.3)
    assert "5 interleaved rounds" in s.method
    assert rounds.paired_ratio({"a": Timing((2.0,), "cpu"), "b": Timing((1.0,), "cpu")}, "a", "b") == (2.0, None)
    with pytest.raises(InputError, match="named"):
        rounds.paired_ratio({"a": base}, "a", "b")
    with pytest.raises(InputError, match="one sample per round"):
        rounds.paired_ratio({"a": base, "b": Timing((1.0,), "cpu")}, "a", "b")


def test_speed_ratio_times_both_in_every_round():
    calls = {"a": 0, "b": 0}

    def count(name):
        calls[name] += 1
        return sum(range(2000))

    ratio, s, ms = rounds.speed_ratio(lambda: count("a"), lambda: count("b"), backend="cpu", rounds=5, per_round=2,
                                      warmup=1)
    assert calls == {"a": 15, "b": 15}  # 5 rounds x (1 warm-up + 2 timed) each
    assert ratio > 0 and s is not None and s.lo <= s.hi and ms["base ms"] > 0 and ms["other ms"] > 0


def test_rows_store_and_give_back_their_spread():
    row = rounds.with_spread({"speed-up": 1.04}, "speed-up", Spread(0.98, 1.10, "p10..p90 of 5 interleaved rounds"))
    assert rounds.row_spread(row, "speed-up") == Spread(0.98, 1.10, "p10..p90 of 5 interleaved rounds")
    assert rounds.extra(row, "speed-up") == {"lo": 0.98, "hi": 1.10, "spread": "p10..p90 of 5 interleaved rounds"}
    assert rounds.extra({"speed-up": 1.0}, "speed-up") == {} and rounds.row_spread({}, "x") is None
    assert "0.98..1.1 (p10..p90 of 5 interleaved rounds)" in tables.to_text([row])


def test_cpu_timings_return_the_spread_of_their_ratio():
    z = sparsity.dense_with_zeros_times(32, 32, 32, repeats=3)
    s = rounds.row_spread(z, "speed-up from zeros")
    assert s is not None and s.lo <= z["speed-up from zeros"] <= s.hi
    for row in (layouts.conv_layout_times(batch=1, channels=8, size=8, repeats=3),
                layouts.quantized_conv_layout_times(batch=1, channels=8, size=8, repeats=3)):
        s = rounds.row_spread(row, "NHWC speed-up")
        assert s is not None and s.lo <= row["NHWC speed-up"] <= s.hi and row["NCHW ms"] > 0


def test_dynamic_speed_study_gives_each_ratio_its_spread():
    out = dynamic_quant.cpu_speed_study(d=32, layers=1, seq_len=16, batch=2, repeats=3)
    assert set(out["vs FP32"]) == set(out["spread"]) == {"dynamic INT8", "static INT8"}
    for k, s in out["spread"].items():
        assert s is not None and s.lo <= out["vs FP32"][k] <= s.hi


def test_mixed_precision_speed_curve_gives_each_k_its_spread():
    from helpers.models.train import build_model

    model = build_model("resnet_small", (1, 40), 10).eval()
    order = [n for n, m in model.named_modules() if isinstance(m, (torch.nn.Conv1d, torch.nn.Linear))]
    rows = mixed_precision.speed_curve(model, order, torch.randn(4, 1, 40), ks=(0, len(order)), repeats=2)
    spreads = mixed_precision.speed_spreads(rows)
    assert set(spreads) == {0, len(order)}
    assert all(spreads[r["kept in FP"]].contains(r["speed vs float"]) for r in rows)
