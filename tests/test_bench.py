"""helpers.bench: timing, derived quantities, ratios and records."""

from __future__ import annotations

import json
import time

import pytest

from helpers import bench
from helpers.errors import InputError


def test_timeit_measures_a_sleep():
    t = bench.timeit(lambda: time.sleep(0.002), backend="cpu", warmup=1, repeats=5)
    assert len(t.samples_s) == 5 and t.backend == "cpu"
    assert 0.0019 < t.median_s < 0.05
    assert t.percentile_s(10) <= t.median_s <= t.percentile_s(90)


def test_timeit_counts_warmup_calls():
    calls = []
    bench.timeit(lambda: calls.append(1), backend="cpu", warmup=3, repeats=4, inner=2)
    assert len(calls) == 3 + 4 * 2


@pytest.mark.parametrize("kwargs", [dict(repeats=0), dict(warmup=-1), dict(backend="gpu")])
def test_timeit_rejects_bad_arguments(kwargs):
    with pytest.raises(InputError):
        bench.timeit(lambda: None, **kwargs)


def test_timeit_rejects_a_non_callable():
    with pytest.raises(InputError, match="function"):
        bench.timeit(42)


def test_derived_quantities():
    assert bench.bandwidth_gbs(2e9, 0.5) == pytest.approx(4.0)
    assert bench.gemm_flops(2, 3, 4) == 48
    assert bench.tflops(2e12, 2.0) == pytest.approx(1.0)


def test_ratios_are_relative_to_baseline():
    slow = bench.Timing((2.0, 2.0), "cpu")
    fast = bench.Timing((0.5, 0.5), "cpu")
    r = bench.ratios({"slow": slow, "fast": fast}, baseline="slow")
    assert r == {"slow": 1.0, "fast": 4.0}
    with pytest.raises(InputError):
        bench.ratios({"a": slow}, baseline="b")


def test_record_writes_jsonl_and_round_trips(tmp_path, monkeypatch):
    out = tmp_path / "r.jsonl"
    monkeypatch.setenv(bench.RESULTS_VAR, str(out))
    bench.set_notebook("99_test")
    rec = bench.record("test.ratio", 1.5, "ratio", ratio_of=["a", "b"], size=4)
    line = json.loads(out.read_text().splitlines()[-1])
    assert line["name"] == "test.ratio" and line["value"] == 1.5 and line["notebook"] == "99_test"
    assert line["ratio_of"] == ["a", "b"] and line["extra"] == {"size": 4}
    assert line["device"] and line["date"] and "torch" in line["versions"]
    assert bench.load_records(out)[0] == rec
    bench.save_records([rec], tmp_path / "r.json")
    assert bench.load_records(tmp_path / "r.json")[0] == rec
    assert rec in bench.session_records()
    bench.set_notebook(None)


def test_record_rejects_empty_name():
    with pytest.raises(InputError):
        bench.record("", 1.0, "x")


def test_records_files_stay_valid_json(tmp_path, monkeypatch):
    out = tmp_path / "r.jsonl"
    monkeypatch.setenv(bench.RESULTS_VAR, str(out))
    with pytest.raises(InputError, match="not a finite number"):
        bench.record("test.nan", float("nan"), "x")
    assert not out.exists()
    bench.record("test.ok", 2.0, "x", spread=float("nan"))  # a NaN among the extras is stored as null
    line = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"{c} written into JSON"))
    assert line["value"] == 2.0 and line["extra"] == {"spread": None}
    out.write_text(out.read_text() + '{"name": "cut')
    with pytest.raises(InputError, match="line 2 is not valid JSON"):
        bench.load_records(out)


def test_interleaved_times_every_function_in_every_round_in_turn():
    order: list[str] = []
    r = bench.interleaved({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, rounds=4, clock="cpu",
                          warmup=1, settle=1, per_round=2)
    assert order[:2] == ["a", "b"]  # the warm-up call of each
    assert order[2:] == (["a"] * 3 + ["b"] * 3) * 4  # every round: one settling call, then two timed, then the next
    assert set(r.seconds) == {"a", "b"} and all(len(v) == 4 for v in r.seconds.values())
    assert r.harness == bench.CPU_HARNESS and r.timing("a").backend == "cpu"


def test_interleaved_rotates_the_order_when_asked():
    order: list[str] = []
    bench.interleaved({k: (lambda k=k: order.append(k)) for k in "abc"}, rounds=3, clock="cpu", warmup=0,
                      rotate=True)
    assert order == list("abc" "bca" "cab")


def test_rounds_pair_their_samples_and_name_their_harness():
    r = bench.Rounds({"fp16": (2.0, 2.0, 4.0, 2.0, 2.0), "int8": (1.0, 1.0, 2.0, 1.0, 0.8)},
                     {"fp16": "torch", "int8": "torch"})
    ratio, s = r.ratio("fp16", "int8")  # round 3 was slow for both: paired, its ratio is still 2
    assert ratio == 2.0 and s is not None and s.hi == pytest.approx(2.3)
    assert r.median_s("fp16") == 2.0 and r.spread("int8").lo == pytest.approx(0.88)
    assert r.harness == bench.EVENTS_HARNESS and bench.Rounds(r.seconds, r.clocks, graph=True).harness == \
        bench.GRAPH_HARNESS
    with pytest.raises(InputError, match="no timing named"):
        r.median_s("fp8")


@pytest.mark.parametrize("kwargs, match", [(dict(rounds=1), "at least 2"), (dict(per_round=0), "per_round"),
                                           (dict(graph=True, clock="cpu"), "clock='torch'")])
def test_interleaved_rejects_bad_arguments(kwargs, match):
    with pytest.raises(InputError, match=match):
        bench.interleaved({"a": lambda: None}, **{"clock": "cpu", **kwargs})
    with pytest.raises(InputError, match="dict of name"):
        bench.interleaved({})


def test_l2_copies_make_one_pass_read_past_the_l2_cache_within_its_bounds():
    assert bench.l2_copies(bench.L2_BYTES) == 6  # six times the cache
    assert bench.l2_copies(10**12) == 2 and bench.l2_copies(1) == 96 and bench.l2_copies(1, most=24) == 24
    for nbytes in (2**20, 8 * 2**20, 90 * 2**20):
        n = bench.l2_copies(nbytes)
        assert n * nbytes >= 6 * bench.L2_BYTES or n == 96
