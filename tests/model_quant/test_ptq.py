"""helpers.model_quant.ptq and helpers.plugins.pq_compat: layer swap, calibration, CPU fixes, and agreement with helpers.quant."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.model_quant import ptq
from helpers.plugins import pq_compat
from helpers.data import load_dataset
from helpers.errors import InputError
from helpers.models.train import build_model, evaluate

pytest.importorskip("pytorch_quantization")
from tests.support.trained import data, resnet, tiny_digits_cnn  # noqa: E402,F401  (fixtures)




def test_quantize_model_swaps_every_layer_and_keeps_skipped_ones(data):
    m = build_model("mobilenet_small", data.input_shape, 10).eval()
    q = ptq.quantize_model(m, per_channel=False, skip=["fc"])
    names = ptq.quant_layers(q)
    assert "fc" not in names and len(names) == 1 + 2 * 4  # stem + (dw, pw) x 4 blocks
    assert not any(isinstance(mod, nn.BatchNorm1d) for mod in q.modules())  # BN folded
    with pytest.raises(InputError, match="not quantizable"):
        ptq.quantize_model(m, skip=["nope"])
    with pytest.raises(InputError, match="histogram"):
        ptq.calibrate(ptq.quantize_model(m), data, "entropy")
    with pytest.raises(InputError, match="no quantizers"):
        ptq.calibrate(m, data)


def test_folding_batchnorm_keeps_the_function(data):
    m = build_model("resnet_small", data.input_shape, 10).eval()
    x = data.val.tensors[0][:32]
    torch.testing.assert_close(ptq.fold_batchnorm(m)(x), m(x), rtol=1e-4, atol=1e-4)


def test_mse_calibration_works_on_cpu(data):
    m = build_model("resnet_small", data.input_shape, 10).eval()
    q = ptq.ptq(m, data, method="mse")
    amax = [float(mod._input_quantizer.amax) for mod in (q.get_submodule(n) for n in ptq.quant_layers(q))]
    assert all(a > 0 for a in amax)
    hist = torch.histc(torch.randn(100_000).abs(), 2048, 0, 5).numpy()
    edges = torch.linspace(0, 5, 2049).numpy()
    a = float(pq_compat.compute_amax_mse(hist, edges, 8, False, stride=4))
    assert 2.5 < a < 5.0  # MSE clips the far Gaussian tail but not the bulk
    layer = q.get_submodule(ptq.quant_layers(q)[0])
    with pytest.raises(InputError, match="histogram calibrator"):
        pq_compat.load_calib_amax(layer._input_quantizer, "max")
    with pytest.raises(InputError, match="calib_method='histogram'"):
        pq_compat.load_calib_amax(layer._weight_quantizer, "mse")


def test_calibrated_state_loads_into_a_fresh_model(data):
    m = build_model("resnet_small", data.input_shape, 10).eval()
    q = ptq.ptq(m, data, method="percentile")
    fresh = ptq.quantize_model(m, calib="histogram")
    pq_compat.load_quantized_state(fresh, q.state_dict())
    x = data.val.tensors[0][:16]
    torch.testing.assert_close(fresh(x), q(x))


def test_export_mode_emits_qdq_and_restores_the_flag(tmp_path, data):
    onnx = pytest.importorskip("onnx")
    from pytorch_quantization.nn import TensorQuantizer

    m = nn.Sequential(nn.Conv1d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 38, 10)).eval()
    q = ptq.ptq(m, data)
    path = tmp_path / "q.onnx"
    with pq_compat.export_mode():
        assert TensorQuantizer.use_fb_fake_quant
        torch.onnx.export(q, data.val.tensors[0][:1], str(path), **pq_compat.EXPORT_KWARGS)
    assert not TensorQuantizer.use_fb_fake_quant
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops


def test_entropy_collapses_on_few_valued_inputs():
    digits = load_dataset("digits")
    m = tiny_digits_cnn()
    q = ptq.ptq(m, digits, method="entropy")
    first = q.get_submodule("0")._input_quantizer
    assert float(first.amax) < 0.3  # pixels reach 1.0: entropy keeps only the darkest levels
    q_max = ptq.ptq(m, digits, method="max")
    assert float(q_max.get_submodule("0")._input_quantizer.amax) == pytest.approx(1.0)


def test_int8_per_channel_is_close_to_fp32(resnet, data):
    rows = ptq.accuracy_table(resnet, data, methods=("max", "percentile"), granularities=(True,))
    fp32 = rows[0]["accuracy %"]
    assert fp32 > 95.0
    assert min(r["delta pts"] for r in rows[1:]) <= 1.0


@pytest.mark.parametrize("method", ["max", "percentile"])
def test_from_scratch_quantizers_match_pytorch_quantization(resnet, data, method):
    pytest.importorskip("helpers.quant.calibrators")
    a = evaluate(ptq.ptq(resnet, data, method=method), data)
    b = evaluate(ptq.scratch_ptq(resnet, data, method=method), data)
    assert abs(a - b) <= 0.3, (a, b)


def test_model_size_is_about_a_quarter(resnet, data):
    q = ptq.ptq(resnet, data)
    fp = ptq.model_size(resnet)["bytes"]
    i8 = ptq.model_size(q, 8)["bytes"]
    assert 0.25 < i8 / fp < 0.35


def test_the_notes_standalone_calibrator_never_gets_an_amax():
    pytest.importorskip("pytorch_quantization")
    from helpers import claims
    from helpers.chapters.ch07_ptq import notes

    assert notes.standalone_calibrator_amax() is None
    claim = claims.get("ch07.ptq_recipe")
    assert claims.judge(claim, {"ch07.notes_calibrator_has_amax": 0.0})["verdict"] == claims.FAILS
    assert claims.judge(claim, {})["verdict"] == claims.NOT_MEASURED


def test_accuracy_bars_pass_the_figure_check():
    from helpers.figure_check import figure_problems

    rows = [{"weights": "FP32", "calibrator": "-", "accuracy %": 98.7}]
    rows += [{"weights": w, "calibrator": m, "accuracy %": 98.5 + 0.1 * i}
             for w in ("per-tensor", "per-channel") for i, m in enumerate(ptq.METHODS)]
    fig = ptq.plot_accuracy_table(rows, title="ResNet: INT8 PTQ accuracy")
    assert figure_problems(fig) == []
    assert "zoomed" in fig.axes[0].get_ylabel()
