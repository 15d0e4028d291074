"""helpers.model_quant.sensitivity and helpers.model_quant.diagnose: rankings, mixed precision, and the checklist on a model made to fail."""

from __future__ import annotations

import pytest
import torch

from helpers.model_quant import diagnose, ptq, sensitivity
from helpers.data import load_dataset
from helpers.errors import InputError
from helpers.models.train import evaluate, trained_model

pytest.importorskip("pytorch_quantization")
from tests.support.trained import data, tiny_digits_cnn  # noqa: E402,F401  (fixtures)


@pytest.fixture(scope="module")
def fragile():
    resnet = trained_model("resnet_small", progress=False)
    return resnet, diagnose.make_fragile(resnet, "layer2.conv1", "layer2.conv2", factor=64.0)


def test_make_fragile_keeps_the_function(fragile, data):
    resnet, bad = fragile
    x = data.val.tensors[0][:64]
    torch.testing.assert_close(bad(x), resnet(x), rtol=1e-3, atol=1e-3)
    with pytest.raises(InputError, match="feed"):
        diagnose.make_fragile(resnet, "layer2.conv1", "layer3.conv2")


def test_sensitivity_ranks_the_fragile_layers_first(fragile, data):
    _, bad = fragile
    q = ptq.ptq(bad, data, method="max", per_channel=False)
    rows = sensitivity.layer_sensitivity(q, data, metric="sqnr")
    assert {r["layer"] for r in rows[:2]} & {"layer2.conv1", "layer2.conv2"}
    assert all(rows[i]["sqnr dB"] <= rows[i + 1]["sqnr dB"] for i in range(len(rows) - 1))
    order = sensitivity.ranking(rows)
    curve = sensitivity.mixed_precision_curve(q, data, order, ks=[0, len(order)])
    assert curve[-1]["quantized layers"] == 0
    assert curve[-1]["accuracy %"] == pytest.approx(evaluate(bad, data), abs=0.11)
    assert curve[0]["accuracy %"] < curve[-1]["accuracy %"]
    with pytest.raises(InputError, match="every quantized layer"):
        sensitivity.mixed_precision_curve(q, data, order[:-1])


def test_diagnose_finds_the_planted_problem(fragile, data):
    _, bad = fragile
    report = diagnose.diagnose(bad, ptq.ptq(bad, data, method="max", per_channel=False), data)
    assert report.drop > 5.0
    text = " ".join(report.recommendations)
    assert "layer2.conv1: channel weight ranges" in text and "per-channel" in text
    assert "layer2.conv2" in text  # its input range is dominated by the outlier channel
    healthy = diagnose.diagnose(bad, ptq.ptq(bad, data, method="percentile", per_channel=True), data)
    assert healthy.drop < report.drop
    assert not any("channel weight ranges" in r for r in healthy.recommendations)


def test_diagnose_sees_entropy_collapse():
    digits = load_dataset("digits")
    m = tiny_digits_cnn()
    report = diagnose.diagnose(m, ptq.ptq(m, digits, method="entropy"), digits)
    first = report.layers[0]
    assert first["clipped %"] > 1.0
    assert any(r.startswith("0:") and "clipped" in r for r in report.recommendations)


def test_checks_reject_unquantized_models(data):
    m = trained_model("resnet_small", progress=False)
    with pytest.raises(InputError):
        sensitivity.layer_sensitivity(m, data)
    with pytest.raises(InputError):
        diagnose.diagnose(m, m, data)
