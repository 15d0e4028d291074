"""Chapter 12's sentences never call a difference inside its measured spread a finding (issue 28).

Each test builds rows whose spreads do or do not overlap and checks the printed verdict; the old sentences
said "not met", "changed the time by less than 5 %", "no measurable change" or a bare crossover instead.
"""

from __future__ import annotations

import numpy as np
import pytest

from helpers import bench, findings, reference
from helpers.chapters.ch12_language_models import batch_sweep, experiments, gemv_bench, outliers, path_bench, quality
from helpers.findings import NOT_RESOLVED
from helpers.spread import Spread

SEVEN = [f"{n}×{k}" for n, k in gemv_bench.SHAPES_7B]


def _sp(lo: float, hi: float) -> dict:
    return {"min_us": lo, "max_us": hi, "q1_us": lo, "q3_us": hi, "rounds": 7}


def _gemv_rows(w4_lo: float, w4_hi: float) -> list[dict]:
    """FP16 cuBLAS at 27 µs (26.5..27.5) and the course's W4A16 at 10 µs (w4_lo..w4_hi) on the three 7B shapes."""
    rows = []
    for s in SEVEN:
        rows.append({"N×K": s, "kernel": "fp16 cuBLAS", "µs": 27.0, "weight GB/s": 3000.0, "× FP16 cuBLAS": 1.0,
                     "× fastest FP16": 1.0, "key": "fp16 cuBLAS", "spread": _sp(26.5, 27.5)})
        rows.append({"N×K": s, "kernel": "w4a16 CUDA", "µs": 10.0, "weight GB/s": 2000.0, "× FP16 cuBLAS": 2.7,
                     "× fastest FP16": 2.7, "key": "w4a16 g128", "spread": _sp(w4_lo, w4_hi)})
    return rows


def _fake_get(value: float):
    return lambda name, sources=None: findings.Measured(name, value, "ratio", "here", "x", "d")


def test_headline_spreads_are_the_geometric_mean_of_the_rows_ends():
    s = gemv_bench.headline_spreads(_gemv_rows(9.8, 10.2))["llm.gemv.w4a16_over_fp16"]
    assert s.lo == pytest.approx(26.5 / 10.2) and s.hi == pytest.approx(27.5 / 9.8) and "7 interleaved rounds" in s.method
    no_spread = [{k: v for k, v in r.items() if k != "spread"} for r in _gemv_rows(9.8, 10.2)]
    assert gemv_bench.headline_spreads(no_spread) == {}


def test_a_target_inside_the_rows_spread_is_not_resolved(monkeypatch):
    monkeypatch.setattr(findings, "get", _fake_get(2.69))
    line = gemv_bench.target_line("llm.gemv.w4a16_over_fp16", "W4A16 over FP16", _gemv_rows(9.8, 10.2))
    assert NOT_RESOLVED in line and "not met" not in line and "2.6..2.81" in line
    tight = gemv_bench.target_line("llm.gemv.w4a16_over_fp16", "W4A16 over FP16", _gemv_rows(10.3, 10.4))
    assert "not met, 2.55..2.67" in tight and NOT_RESOLVED not in tight


def test_the_stored_w4a16_gemv_verdict_follows_its_rows_spread():
    rows = experiments.GEMV.run(stored=True)["gemv"]
    target = reference.TARGETS_BY_NAME["llm.gemv.w4a16_over_fp16"]
    s = gemv_bench.headline_spreads(rows).get("llm.gemv.w4a16_over_fp16")
    if s is None:
        pytest.skip("no stored GEMV rows with spreads")
    line = gemv_bench.target_line("llm.gemv.w4a16_over_fp16", "W4A16 over FP16", rows)
    assert (NOT_RESOLVED in line) == s.contains(target.value)


def test_path_steps_inside_the_noise_are_not_resolved():
    def row(step: str, us: float, lo: float, hi: float, before: float) -> dict:
        return {"N×K": "1×1", "kernel": "w4a16", "step": step, "µs": us, "× FP16 cuBLAS": 30 / us,
                "× step before": before, "loads / weight": 0.2, "spread": _sp(lo, hi)}

    rows = [row("naive", 40, 39, 41, 1.0), row("vector loads", 17.4, 17.3, 17.7, 2.3),
            row("magic conversion", 17.6, 17.5, 17.8, 0.99)]
    said = path_bench.path_summary(rows)
    assert f"magic conversion 0.99× ({NOT_RESOLVED})" in said and f"vector loads 2.30× ({NOT_RESOLVED})" not in said
    assert path_bench._step_verdict(0.99, {"instructions": 0.5}, True).startswith(NOT_RESOLVED)
    assert path_bench._step_verdict(0.99, {"instructions": 0.5}, False).startswith("changed the time by less")
    prof = [{"kernel": f"w4a16 {r['step']}", "N×K": "1×1", "instructions / weight": i, "L1 B / weight B": 3.0}
            for r, i in zip(rows, (20.0, 6.0, 3.0))]
    assert f"magic conversion 0.99× (instructions/weight 6.00 → 3.00, L1 B/weight B 3.0 → 3.0): {NOT_RESOLVED}" \
        in path_bench.path_reasons(rows, prof)


def test_batch_summary_says_which_kernel_is_ahead_only_outside_the_noise():
    def row(kernel: str, m: int, us: float, lo: float, hi: float) -> dict:
        return {"N×K": "11008×4096", "M": m, "kernel": kernel, "µs": us, "× FP16 cuBLAS": 25 / us, "key": kernel,
                "spread": _sp(lo, hi)}

    rows = [row("fp16 cuBLAS", 2, 25, 24.8, 25.3), row("w4a16 CUDA", 2, 15.2, 15.1, 15.3),
            row("w4a16 tinygemm", 2, 15.3, 15.2, 15.4), row("fp16 cuBLAS", 4, 25, 24.8, 25.3),
            row("w4a16 CUDA", 4, 34, 33.9, 34.1), row("w4a16 tinygemm", 4, 20, 19.9, 20.1)]
    said = path_bench.batch_summary(rows)
    assert f"M = 2: W4A16 CUDA 1.64×, tinygemm 1.63× FP16 cuBLAS (CUDA vs tinygemm: {NOT_RESOLVED}; CUDA ahead of FP16)" in said
    assert "(tinygemm ahead of CUDA; FP16 ahead of CUDA)" in said


def test_quality_words_never_call_a_resolved_change_unmeasurable():
    assert quality.verdict(-0.02) != "no measurable change" and "under 0.2 %" in quality.verdict(-0.02)
    assert quality.verdict(1.03, Spread(0.59, 1.50, "x")) == "practically free to a small cost at this noise"
    assert quality.verdict(1.6, Spread(1.13, 2.05, "x")) == "a small cost"
    rng = np.random.default_rng(0)
    base = rng.normal(1.6, 0.1, 192)
    rows = [{"scheme": "FP32", "perplexity": 5.0, "vs FP32 %": 0.0, "_nll": base,
             "_ci": Spread(0.0, 0.0, "the reference")},
            {"scheme": "KV cache INT8", "perplexity": 5.0, "vs FP32 %": -0.02, "_nll": base - 0.0002,
             "_ci": quality.pct_interval(base - 0.0002, base)}]
    lesson = quality.lesson("KV cache INT8", rows)
    assert "no measurable change" not in lesson and "under 0.2 %" in lesson


def test_the_outlier_summary_gives_each_cost_its_interval_against_fp32():
    rng = np.random.default_rng(1)
    base = rng.normal(1.6, 0.1, 64)
    shifts = {"FP32": 0.0, "W8A16 per channel": 0.0, "W8A8 INT8 per token": 0.02, "W4A16 g128": 0.009,
              "W4A16 g128 + AWQ-style": 0.006}
    shifts |= {f"W8A8 + SmoothQuant α={a}": 0.0 for a in outliers.ALPHAS}
    rows = [{"model": m, "scheme": s, "vs its FP32 %": 100 * np.expm1(d),
             "_nll": base + d + (rng.normal(0, 0.003, 64) if s == "W8A16 per channel" else 0)}
            for m in ("trained (no change)", "outlier ×100 on purpose") for s, d in shifts.items()]
    said = outliers.summary(rows)
    assert "W8A8 per token costs +2.02 % (a small cost: +2.02 to +2.02 % against FP32" in said
    assert f"floating point: " in said and f"({NOT_RESOLVED}: " in said.split("floating point: ")[1]


def test_the_fastest_scheme_says_when_its_lead_is_inside_the_noise():
    def row(s: str, m: int, us: float, w: float | None) -> dict:
        return {"scheme": s, "M": m, "µs": us, "TFLOP/s": 1.0, "bytes": 1e8,
                "lo_us": None if w is None else us - w, "hi_us": None if w is None else us + w}

    def rows(w: float | None) -> list[dict]:
        return [row(s, m, us, w) for s, m, us in (("fp16", 1, 30), ("w4a16", 1, 10), ("w8a8 fp8", 1, 30),
                                                  ("fp16", 256, 40), ("w4a16", 256, 41), ("w8a8 fp8", 256, 39.5))]
    assert batch_sweep.fastest(rows(None))[256] == ("w8a8 fp8", "fp16", "w4a16")  # no spread: nothing resolved
    noisy = batch_sweep.fastest_sentence(rows(2.0))
    assert f"{NOT_RESOLVED.capitalize()}: M = 256 (w8a8 fp8, fp16, w4a16)" in noisy and "w4a16 at M = 1" in noisy
    clean = batch_sweep.fastest_sentence(rows(0.1))
    assert clean == ("Fastest, apart from every other scheme by more than the rounds' spread: w4a16 at M = 1; "
                     "w8a8 fp8 at M = 256.")


def test_the_gemv_experiment_records_each_headline_with_its_spread(monkeypatch):
    import dataclasses

    monkeypatch.setitem(bench._session, "records", [])
    monkeypatch.delenv("WORKBOOK_RESULTS", raising=False)
    rows = {"gemv": [{**r, "harness": "h"} for r in _gemv_rows(9.8, 10.2)],
            "d2d": [{"copy": "torch device-to-device", "GB/s": 4000.0}]}
    result = dataclasses.replace(experiments.GEMV, measure=lambda: rows, needs="cpu").run()
    assert result.measured and result.value("ch12.gemv.d2d_gbs") == 4000.0
    rec = next(r for r in bench.session_records() if r.name == "llm.gemv.w4a16_over_fp16")
    assert (rec.extra["lo"], rec.extra["hi"]) == pytest.approx((26.5 / 10.2, 27.5 / 9.8))
    assert sum(r.name.startswith("ch12.gemv.") and r.unit == "µs" for r in bench.session_records()) == 6
