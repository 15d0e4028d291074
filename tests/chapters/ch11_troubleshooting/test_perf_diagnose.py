"""Chapter 11: the "INT8 is not faster" diagnostic on a small synthetic CNN exported two ways."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.errors import InputError
from helpers.chapters.ch11_troubleshooting import int8_exports, perf_diagnose


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from helpers.deploy.export import export_onnx

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv1d(1, 32, 5, padding=2), torch.nn.ReLU(), torch.nn.Conv1d(32, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool1d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10)).eval()
    folder = tmp_path_factory.mktemp("perf")
    fp32 = export_onnx(net, torch.randn(2, 1, 40), folder / "fp32.onnx")
    calib = [np.random.default_rng(i).normal(size=(32, 1, 40)).astype(np.float32) for i in range(2)]
    s8 = int8_exports.trt_style_qdq(net, calib, folder / "s8.onnx")  # TensorRT-style: no Q after layers
    u8 = int8_exports.ort_quantize(fp32, folder / "u8.onnx", calib, uint8_activations=True, per_channel=True)
    x = np.random.default_rng(9).normal(size=(64, 1, 40)).astype(np.float32)
    return fp32, s8, u8, (lambda b: x[:b])


def test_int8_activations_are_flagged(models):
    fp32, s8, u8, make = models
    assert perf_diagnose.activation_zero_point_types(s8).get("int8", 0) > 0
    assert perf_diagnose.activation_zero_point_types(u8).get("int8", 0) == 0
    ort_s8 = int8_exports.ort_quantize(fp32, s8.with_name("ort_s8.onnx"), [make(32)], uint8_activations=False,
                                         per_channel=False)
    rep = perf_diagnose.diagnose(ort_s8, make, batch=1, big_batch=64, repeats=2)
    assert not {f.check: f for f in rep.findings}["int8 activations on ORT CPU"].problem  # ORT's own S8S8 fuses
    rep = perf_diagnose.diagnose(s8, make, batch=1, big_batch=64, fp32_path=fp32, repeats=3)
    found = {f.check: f for f in rep.findings}
    assert found["int8 activations on ORT CPU"].problem
    assert found["unfused Q/DQ"].problem, found["unfused Q/DQ"].evidence
    assert "int8 / fp32 speed" in rep.measurements
    assert "PROBLEM" in rep.summary() and len(rep.rows()) == 5


def test_ort_own_quantization_fuses(models):
    fp32, s8, u8, make = models
    rep = perf_diagnose.diagnose(u8, make, batch=1, big_batch=64, repeats=3)
    found = {f.check: f for f in rep.findings}
    assert not found["int8 activations on ORT CPU"].problem
    assert not found["unfused Q/DQ"].problem, found["unfused Q/DQ"].evidence
    assert any(op in rep.optimized_ops for op in perf_diagnose.FUSED_INT8)


def test_layer_intensities_grow_with_batch(models):
    fp32, *_ = models
    small = perf_diagnose.layer_intensities(fp32, 1, 4)
    big = perf_diagnose.layer_intensities(fp32, 256, 4)
    assert len(small) == 3 and [r["op"] for r in small][:2] == ["Conv", "Conv"]
    assert big[-1]["FLOP/byte"] > small[-1]["FLOP/byte"]  # the Gemm reuses its weight across the batch


def test_diagnose_rejects_bad_arguments(tmp_path, models):
    with pytest.raises(InputError, match="does not exist"):
        perf_diagnose.diagnose(tmp_path / "none.onnx", lambda b: None)
    with pytest.raises(InputError, match="make_input"):
        perf_diagnose.diagnose(models[0], "not a function")
