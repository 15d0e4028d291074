"""The batched decode (decode_bench.build_batch / step_batch): every sequence decodes on its own cache, the
weight-only paths compute what the FP16 path computes up to their quantization, and the b8 headline is derived
from the batch-8 rows only."""

from __future__ import annotations

import re

import pytest
import torch

from helpers.chapters.ch12_language_models import decode_bench as db
from helpers.chapters.ch12_language_models import experiments
from helpers.kernels import nvrtc_compile as nv

TINY = db.StackShape(d=128, ffn=256, heads=2, layers=2, vocab=64, context=8)


@pytest.fixture(scope="module")
def batch3():
    torch.manual_seed(0)
    return db.build_batch(TINY, 3, device="cpu")


def test_each_sequence_decodes_on_its_own_cache(batch3):
    got = db.step_batch(batch3, "fp16 (cuBLAS)")
    one = db.build_batch(TINY, 1, device="cpu", weights=batch3)
    one["x"] = batch3["x"][1:2].clone()
    one["cache"] = batch3["cache"][:, :, 1:2].clone()
    alone = db.step_batch(one, "fp16 (cuBLAS)")
    assert got.shape == (3, TINY.vocab)
    assert torch.allclose(got[1].float(), alone[0].float(), atol=2e-2, rtol=1e-2)
    assert not torch.allclose(got[0].float(), got[1].float(), atol=1e-1)  # different sequences, different logits


@pytest.mark.parametrize("kind,tol", [("w8a16", 0.05), ("w4a16", 0.25)])
def test_weight_only_paths_match_fp16_up_to_their_quantization(batch3, kind, tol):
    assert db.batch_paths(batch3) == ("fp16 (cuBLAS)", "w4a16 GEMM (CUDA)", "w8a16 GEMM (CUDA)")
    ref = db.step_batch(batch3, "fp16 (cuBLAS)").float()
    got = db.step_batch(batch3, f"{kind} GEMM (CUDA)").float()
    rel = ((got - ref).norm() / ref.norm()).item()
    assert 0 < rel < tol, f"{kind}: {rel:.3f}"


def _rows(ratio8: float) -> list[dict]:
    rows = []
    for b, ratio in ((4, 9.0), (8, ratio8)):
        for path, r in (("fp16 (cuBLAS)", 1.0), ("w4a16 GEMM (CUDA)", ratio)):
            us = 1000.0 / r
            rows.append({"batch": b, "path": path, "tokens/s": b * 1e6 / us, "× FP16": r,
                         "spread": {"min_us": us * 0.99, "max_us": us * 1.01, "q1_us": us, "q3_us": us, "rounds": 7}})
    return rows


def test_the_b8_headline_comes_from_the_batch_8_rows_with_the_rounds_spread():
    got = experiments._decode_batch_derive({"batch": _rows(1.6)})
    value, sp = got["llm.decode.w4a16_over_fp16.b8"]
    assert value == 1.6 and sp.lo < 1.6 < sp.hi
    assert experiments._decode_batch_derive({"batch": [r for r in _rows(1.6) if r["batch"] != 8]}) == {}


def test_batch_rows_round_trip_through_the_table():
    from helpers.chapters.ch12_language_models import tables

    rows = [{**r, "ms/step": 1.0, "layers": 8, "context": 512} for r in _rows(1.6)]
    recs = tables.DECODE_BATCH.record(rows)
    assert {r.name for r in recs} >= {"ch12.decode.batch.b8.w4a16_GEMM_CUDA", "ch12.decode.batch.b8.fp16_cuBLAS"}
    back = tables.DECODE_BATCH.stored_rows(recs)
    assert sorted((r["batch"], r["path"], round(r["× FP16"], 6)) for r in back) == \
        sorted((r["batch"], r["path"], round(r["× FP16"], 6)) for r in rows)


def test_the_summary_covers_every_batch_and_says_where_a_path_loses():
    rows = _rows(0.9)
    text = db.batch_summary(rows)
    assert "9.00× at batch 4" in text and "0.90× at batch 8" in text and "slower than FP16 at batch 8" in text
    assert "every batch size" in db.batch_summary(_rows(1.6))


def test_the_streaming_sentence_compares_the_rate_with_the_copy_roof():
    from helpers.chapters.ch12_language_models import batch_sweep

    rows = [{"scheme": "fp16", "M": 8, "µs": 36.0, "bytes": 90e6}, {"scheme": "w4a16 tc", "M": 8, "µs": 21.0, "bytes": 23e6}]
    text = batch_sweep.stream_sentence(rows, 3000.0)
    assert "runs 1.71× FP16 while reading 3.91× fewer bytes" in text and "1095 GB/s, 37% of" in text
    assert "memory does not set its time" in text
    fast = [rows[0], {**rows[1], "µs": 9.0}]
    assert "its bytes still set most of its time" in batch_sweep.stream_sentence(fast, 3000.0)
    assert "no w4a16 tc and FP16 points at M = 4" in batch_sweep.stream_sentence(rows, 3000.0, m=4)


def test_the_tinygemm_sentence_judges_every_batch_and_says_what_grew():
    from helpers.chapters.ch12_language_models import batch_sweep

    def pt(scheme: str, m: int, us: float, half: float = 0.1) -> dict:
        return {"scheme": scheme, "M": m, "µs": us, "lo_us": us - half, "hi_us": us + half}

    rows = [pt("w4a16 tinygemm", 1, 15.0), pt("w4a16", 1, 9.0),                            # 1.67: met
            pt("w4a16 tinygemm", 4, 20.0), pt("w4a16", 4, 34.0), pt("w4a16 tc", 4, 20.0),  # 1.00, the GEMM: not met
            pt("w4a16 tinygemm", 8, 30.0, 1.0), pt("w4a16 tc", 8, 20.0, 1.0),               # 1.43..1.58: straddles
            pt("w4a16 tinygemm", 32, 90.0), pt("w4a16 tc", 32, 30.0)]                       # beyond up_to: left out
    text = batch_sweep.tinygemm_sentence(rows)
    assert "M = 1 1.67× (GEMV, 1.64..1.70: met)" in text
    assert "M = 4 1.00× (tensor-core GEMM, 0.99..1.01: not met)" in text
    assert "M = 8 1.50× (tensor-core GEMM, 1.38..1.63: not resolved at this noise)" in text and "M = 32" not in text
    assert "Not met at M = 4: from M = 1 to M = 4 tinygemm's time grows 15.0 → 20.0 µs (1.33×)" in text
    assert "9.0 → 20.0 µs (2.22×, GEMV → tensor-core GEMM), so the lead falls from 1.67× to 1.00×" in text
    all_met = [pt("w4a16 tinygemm", 1, 15.0), pt("w4a16", 1, 9.0)]
    assert "Not met" not in batch_sweep.tinygemm_sentence(all_met)
    assert batch_sweep.tinygemm_sentence([pt("w4a16", 1, 9.0)]) == "Batch sweep: no tinygemm points to compare with."
    assert "registers" not in text  # the GEMM at the worst point: the GEMV's registers do not explain it


@pytest.mark.skipif(not nv.available(), reason="needs cuda-bindings (NVRTC) and a cuda_fp16.h")
def test_where_the_gemv_loses_its_lead_the_sentence_says_what_its_launch_holds(monkeypatch):
    from helpers.chapters.ch12_language_models import batch_sweep

    monkeypatch.setattr("helpers.kernels.wo_gemv_resources.has_gpu", lambda: False)
    rows = [{"scheme": s, "M": m, "µs": us} for s, m, us in
            (("w4a16 tinygemm", 1, 15.0), ("w4a16", 1, 10.3), ("w4a16 tinygemm", 2, 15.6), ("w4a16", 2, 14.7))]
    text = batch_sweep.tinygemm_sentence(rows)
    assert "(1.43×, GEMV → GEMV)" in text
    assert re.search(r"The GEMV's launch at M = 2 \(rows 4, split 4\) holds (\d+) registers a thread against (\d+) at "
                     r"M = 1 \(rows 4, split 4; ptxas of NVRTC [\d.]+ for sm_90\): an SM keeps (\d+) of its 64 warps "
                     r"resident instead of (\d+)", text), text


def test_the_gpu_norm_is_the_cpu_formula():
    """On a GPU the batched step normalises with PyTorch's fused RMSNorm; it must be the formula the CPU runs: eps
    inside the square root, the mean over each row's own features (not the batch), gain 1."""
    x = torch.randn(5, 64, dtype=torch.float32) * torch.arange(1, 6, dtype=torch.float32)[:, None]
    fused = torch.nn.functional.rms_norm(x, (64,), eps=db.EPS)
    formula = db._rmsnorm_rows(x.half()).float()
    assert torch.allclose(fused, formula, rtol=2e-3, atol=2e-3)
    assert not torch.allclose(torch.nn.functional.rms_norm(x, (64,), eps=1.0), formula, rtol=2e-3, atol=2e-3)
