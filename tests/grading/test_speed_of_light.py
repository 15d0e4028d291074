"""Speed-of-light limits of the ranked kernel exercises: read from the card's stored chapter 2/3 measurements (never
from lab timings), the larger of the memory and compute bounds, refused for a card without stored rates; the
fraction of the limit and the geometric mean; the sentence a student's check prints."""

from __future__ import annotations

import math

import pytest

from helpers import reference
from helpers.errors import InputError
from helpers.grading import speed_of_light as sol
from helpers.records import Record


def _rec(name: str, value: float) -> Record:
    return Record(name=name, value=value, unit="x", device="Fake GPU", date="2026-01-01")


FAKE = {r.name: r for r in (_rec("ch03.copy_gbs.torch_d2d", 1000.0), _rec("ch02.gemm_tflops.fp32.n8192", 10.0),
                            _rec("ch02.gemm_tflops.int8.n8192", 100.0))}


def test_every_lab_has_ranked_targets_with_three_shapes() -> None:
    labs = {ex.split(".")[0] for ex in sol.TARGETS}
    assert labs == {"lab11", "lab12", "lab13"}
    assert all(len(t.shapes) == 3 for t in sol.TARGETS.values())


def test_limits_from_fake_rates_are_the_larger_bound() -> None:
    rows = sol.table("lab11.naive", "fake", FAKE)
    first = rows[0]
    assert first["shape"] == "1024³"
    n = 1024
    memory = 4 * 3 * n * n / 1000e9
    compute = 2 * n**3 / 10e12
    assert first["memory bound µs"] == pytest.approx(memory * 1e6, abs=1e-3)
    assert first["compute bound µs"] == pytest.approx(compute * 1e6, abs=1e-3)
    assert first["limit µs"] == pytest.approx(max(memory, compute) * 1e6, abs=1e-3)
    assert first["bound by"] == "compute" and first["card"] == "Fake GPU"
    hist = sol.table("lab12.shared_bins", "fake", FAKE)[1]
    assert hist["bound by"] == "memory" and hist["compute bound µs"] == 0
    assert hist["limit µs"] == pytest.approx((4 * 2**24 + 4 * 2048) / 1000e9 * 1e6, abs=1e-3)


def test_int8_uses_the_int8_rate_and_gemv_its_byte_count() -> None:
    r = sol.rates("fake", FAKE)
    s = sol.shape("lab11.int8", "2048³")
    assert sol.limit_seconds(s, r)[2] == pytest.approx(2 * 2048**3 / 100e12)
    g = sol.shape("lab13.gemv", "4096×4096")
    assert g.bytes == 4096 * 4096 / 2 + 4 * 4096 * 32 + 4 * 4096 + 4 * 4096


def test_stored_h200_rates_come_from_chapter_measurements_and_name_the_card() -> None:
    rows = sol.table("lab13.gemv", "h200")
    bw = reference.lookup("ch03.copy_gbs.torch_d2d", "h200")
    assert bw is not None
    assert all(r["card"] == bw.device and "ch03.copy_gbs.torch_d2d" in r["bandwidth"] for r in rows)
    assert all("lab1" not in r["bandwidth"] + r["rate"] for t in sol.TARGETS for r in sol.table(t, "h200"))
    s = sol.shape("lab13.gemv", rows[0]["shape"])
    assert rows[0]["limit µs"] == pytest.approx(s.bytes / (bw.value * 1e9) * 1e6, abs=1e-3)


def test_a_card_without_stored_rates_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as m:  # a stored run of a known card that holds no chapter 2/3 rates
        m.setattr(reference, "load", lambda source="h200": [r for r in FAKE.values() if "copy" not in r.name])
        with pytest.raises(InputError, match="copy bandwidth.*run chapters 2 and 3"):
            sol.rates("h100")
    with pytest.raises(InputError, match="unknown card"):
        sol.rates("a100")
    with pytest.raises(InputError, match="not a ranked kernel exercise"):
        sol.target("lab11.dp4a")
    with pytest.raises(InputError, match="no ranked shape"):
        sol.shape("lab11.naive", "3³")


def test_fraction() -> None:
    assert sol.fraction(1e-3, 4e-3) == 0.25
    for bad in (0, -1.0, math.nan, math.inf, "1"):
        with pytest.raises(InputError, match="positive, finite"):
            sol.fraction(1e-3, bad)  # type: ignore[arg-type]


def test_note_gives_the_fraction_only_on_a_card_with_stored_rates() -> None:
    lim = sol.limit_seconds(sol.shape("lab11.tiled", "2048³"), sol.rates("h200"))[0]
    said = sol.note("lab11.tiled", "2048³", 4 * lim, device="NVIDIA H200")
    assert "0.250 of the limit" in said and "H200" in said and "ch02.gemm_tflops.fp32.n8192" in said
    assert "not computed" in sol.note("lab11.tiled", "2048³", 1e-3, device="NVIDIA A100-SXM4-80GB")
    assert "not computed" in sol.note("lab11.tiled", "2048³", 1e-3, device="CPU (x86_64, 2 cores)")
    zh = sol.note("lab11.tiled", "2048³", 4 * lim, device="NVIDIA H200", zh=True)
    assert "达到极限的 0.250" in zh and "H200" in zh
    assert "未计算" in sol.note("lab11.tiled", "2048³", 1e-3, device="NVIDIA A100-SXM4-80GB", zh=True)


def test_a_students_speed_check_reports_the_fraction(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from helpers.grading import kernel_perf

    lim = sol.limit_seconds(sol.shape("lab11.naive", "2048³"), sol.rates("h200"))[0]
    times = iter([2.0, 10 * lim * 1e3] * kernel_perf.ROUNDS)  # reference, then yours (ms)
    monkeypatch.setattr("helpers.bench.timeit", lambda *a, **k: SimpleNamespace(median_ms=next(times)))
    monkeypatch.setattr("helpers.device.device_label", lambda: "NVIDIA H200")
    from helpers.labs.lab11_gemm_kernels import kit

    light = kit._light("lab11.naive")
    _, _, detail = kernel_perf.perf_ratio(lambda: None, lambda: None, 0.8, "2048³ FP32 GEMM", light)
    assert "0.100 of the limit" in detail


def test_lab12s_speed_check_names_a_ranked_shape() -> None:
    from helpers.labs.lab12_histogram_kernels import kit

    assert sol.shape("lab12.shared_bins", kit.LIGHT_SHAPE).dims == (2**24, 2048)


def test_lab13_shows_the_fraction_of_the_limit_per_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.labs.lab13_weight_only_gemv import bench

    shapes = tuple(s.dims[:2] for s in sol.target("lab13.gemv").shapes)
    result = bench.Result(shapes, {("yours", sh): [1e-4] for sh in shapes})
    monkeypatch.setattr("helpers.device.device_label", lambda: "NVIDIA H200")
    said = bench.speed_of_light_notes(result)
    assert len(said) == 6 and all("of the limit" in s for s in said[::2]) and all("达到极限的" in s for s in said[1::2])
