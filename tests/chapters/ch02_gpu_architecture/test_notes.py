"""Chapter 2: the notes' hardware figures and circulating datasheet numbers, judged from the datasheet table."""

from __future__ import annotations

from helpers import claims
from helpers.chapters.ch02_gpu_architecture import notes  # noqa: F401  - registers chapter 2's claims


def _verdict(cid, measured=None):
    return claims.judge(claims.get(cid), measured)


def test_a100_tensor_core_rate_is_per_sm_not_per_tensor_core():
    row = _verdict("ch02.a100_tensor_core_rate")
    assert row["verdict"] == claims.FAILS
    assert "= 256 FP16 FMAs per clock per Tensor Core, 1024 per SM" in row["evidence"]


def test_int8_twice_fp16_holds_on_paper_and_is_judged_by_the_gemm():
    assert _verdict("ch02.int8_twice_fp16", {"gemm.int8_over_bf16": 1.95})["verdict"] == claims.HOLDS
    row = _verdict("ch02.int8_twice_fp16", {"gemm.int8_over_bf16": 1.21})
    assert row["verdict"].startswith("holds on paper only") and "= 2.0×" in row["evidence"]
    assert _verdict("ch02.int8_twice_fp16", {"gemm.int8_over_bf16": None})["verdict"] == claims.NOT_MEASURED


def test_sparse_figures_are_recognised():
    for cid in ("ch02.h100_tf32_989", "ch02.h100_int8_3958", "ch02.a100_int8_1248"):
        row = _verdict(cid)
        assert row["verdict"] == claims.FAILS and "2:4-sparse figure" in row["evidence"], cid


def test_volta_has_no_int8_tensor_cores():
    row = _verdict("ch02.volta_int8_tensor_cores")
    assert row["verdict"] == claims.FAILS and "INT8 Tensor Cores no" in row["evidence"]
    assert len(claims.registered(2)) == 6
