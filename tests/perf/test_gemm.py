"""Chapter 2: GEMM per precision: exact INT8, supported precisions, headline ratios, GPU sweep."""

from __future__ import annotations

import pytest
import torch

from helpers.perf import gemm
from helpers.bench import Record
from helpers.errors import InputError


def test_supported_precisions_by_cc():
    assert gemm.supported_precisions("cuda", (9, 0)) == ("fp32", "tf32", "fp16", "bf16", "int8", "fp8")
    assert gemm.supported_precisions("cuda", (8, 0)) == ("fp32", "tf32", "fp16", "bf16", "int8")
    assert gemm.supported_precisions("cuda", (7, 0)) == ("fp32", "fp16")
    assert gemm.supported_precisions("cpu") == ("fp32", "bf16", "int8")


def test_int8_gemm_is_exact_on_cpu():
    out = gemm.gemm_fn("int8", 32, 48, 64, device="cpu")()
    assert out.dtype == torch.int32
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (32, 64), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (48, 64), generator=g, dtype=torch.int8).t()  # column-major, as gemm_fn
    assert torch.equal(out, a.int() @ b.int())


def test_cpu_measure_and_rows():
    r = gemm.measure("fp32", 64, device="cpu", warmup=1, repeats=2)
    assert r.tflops > 0 and r.pct_of_spec is None
    assert gemm.rows([r])[0]["size"] == "64x64x64"


def _res(p, n, tflops, spec):
    return gemm.GemmResult(p, n, n, n, 2 * n**3 / (tflops * 1e12), tflops, spec)


def test_headline_ratios_use_best_bf16_and_same_shape():
    results = [_res("bf16", 4096, 600, 989.4), _res("bf16", 8192, 780, 989.4),
               _res("int8", 4096, 900, 1978.9), _res("int8", 8192, 950, 1978.9), _res("fp8", 8192, 1400, 1978.9)]
    h = gemm.headline_ratios(results)
    assert h["gemm.bf16_over_spec"] == pytest.approx(780 / 989.4)
    assert h["gemm.int8_over_bf16"] == pytest.approx(950 / 780)
    assert h["gemm.fp8_over_bf16"] == pytest.approx(1400 / 780)


def test_records_round_trip():
    r = _res("bf16", 2048, 500.0, 989.4)
    rec = Record("ch02.gemm_tflops.bf16.n2048", 500.0, "TFLOP/s", "H200", "d",
                 extra={"pct_of_spec": r.pct_of_spec})
    back = gemm.results_from_records([rec])[0]
    assert (back.precision, back.m) == ("bf16", 2048)
    assert back.spec_tflops == pytest.approx(989.4) and back.seconds == pytest.approx(r.seconds)


@pytest.mark.parametrize("args", [("fp64", 64, 64, 64), ("int8", 16, 64, 64), ("int8", 40, 64, 64),
                                  ("fp32", 0, 8, 8)])
def test_bad_shapes_and_precisions(args):
    with pytest.raises(InputError):
        gemm.gemm_fn(*args, device="cpu")


def test_spec_peak_lookup():
    assert gemm.spec_peak("bf16", "NVIDIA H200") == pytest.approx(989.4)
    assert gemm.spec_peak("fp8", "NVIDIA A100-SXM4-80GB") is None
    assert gemm.spec_peak("int8", "Some CPU") is None


@pytest.mark.gpu
def test_gpu_precisions_run_and_fp8_int8_are_fast():
    results = gemm.sweep(gemm.supported_precisions(), [4096], repeats=5)
    by = {r.precision: r for r in results}
    assert by["bf16"].tflops > by["fp32"].tflops
    if "int8" in by:
        assert by["int8"].tflops > 0.8 * by["bf16"].tflops
    assert all(r.pct_of_spec is None or r.pct_of_spec < 110 for r in results)


@pytest.mark.gpu
def test_gpu_int8_and_fp8_results_are_right():
    a8 = gemm.gemm_fn("int8", 256, 256, 256)()
    assert a8.dtype == torch.int32 and a8.is_cuda
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-128, 128, (256, 256), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (256, 256), generator=g, dtype=torch.int8).t()  # column-major, as gemm_fn
    assert torch.equal(a8.cpu(), a.int() @ b.int())
    if "fp8" in gemm.supported_precisions():
        out = gemm.gemm_fn("fp8", 256, 256, 256)()
        assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()


@pytest.mark.gpu
def test_gpu_dp4a_matches_tensor_cores():
    pytest.importorskip("cupy")
    pytest.importorskip("helpers.quant.intgemm")
    r = gemm.dp4a_comparison(1024, repeats=3)
    assert 0 < r["ratio"] < 1.5
