"""Chapter 9: ONNX Runtime and PyTorch-native INT8 backends, parity and benchmarking."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tests.support.tiny_models import tiny_cnn, tiny_inputs

from helpers.deploy.export import export_onnx, export_qdq
from helpers.deploy.ort_backend import OrtBackend, deploy_cpu_int8, optimized_op_counts
from helpers.deploy.parity import compare_logits, latency_rows, parity_rows, plot_throughput
from helpers.deploy.qdq_model import fake_quant_copy
from helpers.deploy.torch_int8 import FP8Linear, Int8Linear, TorchBackend, int8_matmul, to_int8
from helpers.errors import InputError


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    """The tiny CNN as FP32 ONNX, ORT quantize_static INT8, TensorRT-style Q/DQ, torch INT8."""
    d = tmp_path_factory.mktemp("ch09b")
    m, x = tiny_cnn(), tiny_inputs(128)
    fq = fake_quant_copy(m, [x[:64]])
    fp32 = export_onnx(m, x[:1], d / "fp32.onnx")
    return {
        "m": m,
        "fq": fq,
        "x": x,
        "fp32": OrtBackend(fp32),
        "ort_int8": deploy_cpu_int8(fp32, d / "int8.onnx", [x[:64].numpy()]),
        "trt_style": OrtBackend(export_qdq(fq, x[:1], d / "qdq.onnx"), precision="int8"),
        "torch_int8": TorchBackend(to_int8(fq, {}), precision="int8"),
    }


def test_int8_matmul_is_exact():
    g = torch.Generator().manual_seed(0)
    q = torch.randint(-128, 128, (5, 24), dtype=torch.int8, generator=g)
    w = torch.randint(-128, 128, (7, 24), dtype=torch.int8, generator=g)  # N=7: not a multiple of 8
    assert torch.equal(int8_matmul(q, w), q.int() @ w.int().t())
    w8 = torch.randint(-128, 128, (16, 24), dtype=torch.int8, generator=g)
    assert torch.equal(int8_matmul(q, w8), q.int() @ w8.int().t())


def test_torch_int8_equals_fake_quant_model(deployed):
    x = deployed["x"]
    want = deployed["fq"](x).detach()
    got = torch.from_numpy(deployed["torch_int8"].run(x.numpy()))
    assert torch.allclose(got, want, atol=1e-5)
    assert isinstance(deployed["torch_int8"].model.get_submodule("9"), Int8Linear)


def test_fp8_linear_is_close_to_float():
    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 16)
    x = torch.randn(20, 32)
    f8 = FP8Linear(lin, float(x.abs().max()), out_dtype=torch.float32)
    ref = lin(x)
    assert (f8(x) - ref).abs().max() < 0.1 * ref.abs().max()


def test_to_int8_rejects_unknown_layer_and_bad_amax():
    with pytest.raises(InputError, match="does not have"):
        to_int8(tiny_cnn(), {"nope": 1.0})
    with pytest.raises(InputError, match="positive"):
        to_int8(tiny_cnn(), {"9": float("nan")})


def test_ort_default_cpu_int8_fuses_into_integer_kernels(deployed):
    ops = optimized_op_counts(deployed["ort_int8"].path)
    assert ops["QLinearConv"] == 2 and ops.get("Conv", 0) == 0 and ops.get("FusedConv", 0) == 0


def test_tensorrt_style_qdq_stays_float_in_ort(deployed):
    ops = optimized_op_counts(deployed["trt_style"].path)
    assert ops.get("QLinearConv", 0) == 0 and ops["DequantizeLinear"] >= 2


def test_parity_rows_of_every_backend(deployed):
    x = deployed["x"]
    ref = deployed["fq"](x).detach().numpy()
    labels = ref.argmax(1)
    rows = parity_rows(
        ref, {k: deployed[k] for k in ("trt_style", "torch_int8")}, x.numpy(), labels
    )
    by = {r["backend"]: r for r in rows}
    assert by["torch_int8"]["top-1 agreement"] == 1.0 and by["torch_int8"]["accuracy"] == 1.0
    assert by["trt_style"]["mean |diff|"] < 0.01 * np.abs(ref).max()


def test_compare_logits_catches_a_wrong_model_and_bad_shapes():
    ref = np.eye(10)[np.arange(50) % 10] * 5
    wrong = np.roll(ref, 1, axis=1)
    row = compare_logits(ref, wrong, labels=np.arange(50) % 10)
    assert row["top-1 agreement"] == 0.0 and row["accuracy"] == 0.0
    with pytest.raises(InputError, match="same inputs"):
        compare_logits(ref, ref[:10])
    with pytest.raises(InputError, match="labels"):
        compare_logits(ref, ref, labels=np.zeros(3))


def test_ort_backend_errors_are_clear(deployed, tmp_path):
    be = deployed["fp32"]
    with pytest.raises(InputError, match=r"shape \(batch, 1, 12, 12\)"):
        be.run(np.zeros((2, 1, 8, 8), np.float32))
    with pytest.raises(InputError, match="no input named 'images'"):
        be.run_named({"images": np.zeros((1, 1, 12, 12), np.float32)})
    with pytest.raises(InputError, match="does not exist"):
        OrtBackend(tmp_path / "missing.onnx")
    with pytest.raises(InputError, match="CUDAExecutionProvider|provider"):
        OrtBackend(
            be.path,
            provider="cuda"
            if "CUDAExecutionProvider" not in be.session.get_providers()
            else "bogus",
        )


def test_benchmark_and_plot(deployed):
    lat = latency_rows(
        {"fp32": deployed["fp32"], "int8": deployed["ort_int8"]},
        lambda b: np.zeros((b, 1, 12, 12), np.float32),
        (1, 4),
        repeats=3,
    )
    assert len(lat) == 4 and all(r.p99_ms >= r.p50_ms > 0 and r.items_per_s > 0 for r in lat)
    fig = plot_throughput(lat)
    assert len(fig.axes[0].lines) == 2
    with pytest.raises(InputError):
        deployed["fp32"].benchmark(lambda b: np.zeros((b, 1, 12, 12), np.float32), (0,))


def test_deploy_all_and_cpu_comparison_on_small_inputs(tmp_path):
    from helpers.chapters.ch09_deployment.workloads import deploy_all, ort_cpu_comparison, slug

    m, x = tiny_cnn(), tiny_inputs(64)
    d = deploy_all(m, x, x, tmp_path / "all", calib_batch=32)
    assert set(d["backends"]) >= {
        "ORT FP32",
        "ORT INT8 (default CPU path)",
        "PyTorch INT8 (torch._int_mm)",
    }
    assert d["size_mb"]["ORT INT8 (default CPU path)"] < d["size_mb"]["ORT FP32"]
    cpu = ort_cpu_comparison(tmp_path / "cpu", batch=2, size=32, repeats=3)
    assert set(cpu["speedup"]) == set(cpu["timings"]) and cpu["speedup"]["ORT FP32"] == 1.0
    assert all(len(t.samples_s) == 3 for t in cpu["timings"].values())  # interleaved: one call each per round
    for label, s in cpu["spread"].items():  # the rounds' spread holds their median, and is stored with it
        assert s.lo <= cpu["speedup"][label] <= s.hi and "interleaved rounds" in s.method
    assert slug("fp16 eager + CUDA graph") == "fp16_eager_cuda_graph"
    from helpers.chapters.ch09_deployment import fusion

    rows = fusion.fusion_rows(d["paths"]["ORT FP32"], d["paths"]["ORT on TensorRT-style Q/DQ"],
                              [x[:32].numpy()], tmp_path / "all")
    by = {r["export"]: r for r in rows}
    assert [r["export"] for r in rows] == list(fusion.DIALECTS)
    assert by[fusion.DIALECTS[0]]["integer kernels"] > 0  # ORT's own u8 graph runs integer kernels
    assert by[fusion.DIALECTS[2]]["integer kernels"] == 0  # no Q after a layer: nothing fuses
    assert "fuses none" in fusion.fusion_sentence(rows)


def test_fusion_sentence_and_speed_verdict_follow_the_counts():
    from helpers.chapters.ch09_deployment import fusion

    def rows(s8_int: int, trt_int: int = 0) -> list[dict]:
        counts = ((9, 0), (s8_int, 9 - s8_int), (trt_int, 9 - trt_int))
        return [{"export": e, "integer kernels": i, "float conv/GEMM kernels": f, "Q/DQ nodes left": 0}
                for e, (i, f) in zip(fusion.DIALECTS, counts)]

    assert "do not fuse at all" in fusion.fusion_sentence(rows(0))
    assert "fewer layers than with uint8" in fusion.fusion_sentence(rows(3))
    assert "as completely as uint8" in fusion.fusion_sentence(rows(9))
    assert "even the TensorRT-style export fuses 2" in fusion.fusion_sentence(rows(9, 2))
    with pytest.raises(InputError):
        fusion.fusion_sentence(rows(3)[:2])
    assert "slower" in fusion.cpu_speed_verdict({"i": 3.4, "t": 0.49})
    assert "ORT's own INT8 is faster" in fusion.cpu_speed_verdict({"i": 3.4, "t": 1.2})


def test_chapter9_claims_are_judged_from_the_numbers():
    from helpers import claims
    from helpers.chapters.ch09_deployment import notes  # noqa: F401 - registers the claims

    doubles = claims.get("ch09.int8_doubles_speed")
    # the notes mean "against FP32": judged as INT8 ÷ FP32 eager, whatever INT8 ÷ FP16 is
    m = {notes.FP32: 1667.0, notes.FP16: 16271.0, notes.INT8_OVER_FP32: 9.6, notes.INT8_OVER_FP16: 0.99}
    judged = claims.judge(doubles, m)
    assert judged["verdict"] == claims.HOLDS and "not from INT8 over FP16" in judged["evidence"]
    assert claims.judge(doubles, {**m, notes.FP16: 2000.0, notes.INT8_OVER_FP32: 1.2})["verdict"] == claims.FAILS
    # fusion is judged by what it defines: kernels per forward, unfused vs fused, not by a wall-time ratio
    fusion_claim = claims.get("ch09.layer_fusion")
    assert claims.judge(fusion_claim, {notes.UNFUSED_K: 320.0, notes.FUSED_K: 98.0})["verdict"] == \
        "holds (partly measured)"
    assert claims.judge(fusion_claim, {notes.UNFUSED_K: 98.0, notes.FUSED_K: 98.0})["verdict"].startswith(claims.FAILS)
    assert claims.judge(fusion_claim, {notes.FUSED_K: 98.0})["verdict"] == claims.NOT_MEASURED
    assert claims.judge(claims.get("ch09.trt_api"), {})["verdict"] == "outdated"


def test_what_runs_here_and_tensorrt_guard():
    from helpers.plugins import trt_family
    from helpers.deploy.base import what_runs_here
    from helpers.deploy.tensorrt_backend import load_tensorrt
    from helpers.errors import MissingPackageError

    rows = {r["backend"]: r for r in what_runs_here()}
    assert rows["ONNX Runtime CPU"]["runs here"]
    if trt_family.find(trt_family.TENSORRT) is None:
        assert not rows["TensorRT 10/11"]["runs here"] and "NOT RUN" in rows["TensorRT 10/11"]["note"]
    if trt_family.find(trt_family.TENSORRT_RTX) is None:
        assert "pip install tensorrt-rtx" in rows["TensorRT-RTX"]["note"]
    if trt_family.find() is None:
        with pytest.raises(MissingPackageError, match="tensorrt-rtx"):
            load_tensorrt()


@pytest.mark.parametrize("shape,k,s,p,d", [
    ((2, 3, 1, 40), (1, 5), (1, 1), (0, 2), (1, 1)),
    ((2, 3, 9, 11), (3, 3), (2, 1), (1, 1), (1, 1)),
    ((1, 4, 7, 8), (3, 2), (1, 2), (0, 1), (1, 1)),
    ((2, 2, 9, 9), (3, 3), (1, 1), (2, 2), (2, 2)),
])
def test_im2col_matches_unfold(shape, k, s, p, d):
    import torch

    from helpers.deploy.torch_int8 import im2col

    x = torch.randn(*shape, generator=torch.Generator().manual_seed(0))
    cols, h, w = im2col(x, k, s, p, d)
    ref = torch.nn.functional.unfold(x, k, dilation=d, padding=p, stride=s).transpose(1, 2)
    assert torch.equal(cols, ref) and h * w == ref.shape[1]
