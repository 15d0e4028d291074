"""Chapters 7-8 on CUDA: PTQ, the MSE shim against upstream, from-scratch agreement, one QAT epoch."""

from __future__ import annotations

import pytest
import torch

from helpers.model_quant import ptq, qat
from helpers.plugins import pq_compat
from helpers.models.train import evaluate

pytestmark = pytest.mark.gpu
pytest.importorskip("pytorch_quantization")
from tests.support.trained import data, resnet  # noqa: E402,F401  (fixtures)




def test_ptq_on_cuda_matches_cpu(resnet, data):
    cpu = evaluate(ptq.ptq(resnet, data, method="percentile"), data)
    gpu_model = ptq.ptq(resnet.to("cuda"), data, method="percentile")
    assert next(gpu_model.parameters()).is_cuda
    assert abs(evaluate(gpu_model, data) - cpu) <= 0.3
    resnet.to("cpu")


def test_mse_shim_equals_upstream_on_cuda():
    from pytorch_quantization.calib.histogram import _compute_amax_mse

    x = torch.randn(200_000).abs()
    hist = torch.histc(x, 2048, 0, float(x.max())).int().numpy()
    edges = torch.linspace(0, float(x.max()), 2049).numpy()
    ours = pq_compat.compute_amax_mse(hist, edges, 8, False, stride=4)
    theirs = _compute_amax_mse(hist, edges, 8, False, stride=4)
    assert float(ours) == pytest.approx(float(theirs.cpu()), rel=1e-6)


def test_scratch_matches_pytorch_quantization_on_cuda(resnet, data):
    m = resnet.to("cuda")
    a = evaluate(ptq.ptq(m, data, method="max"), data)
    b = evaluate(ptq.scratch_ptq(m, data, method="max"), data)
    resnet.to("cpu")
    assert abs(a - b) <= 0.3


def test_one_qat_epoch_on_cuda(resnet, data):
    q = ptq.ptq(resnet.to("cuda"), data, method="mse", weight_bits=4, act_bits=4)
    before = evaluate(q, data)
    qat.qat(q, data, epochs=1, lr=1e-3, progress=False)
    assert evaluate(q, data) > before
    resnet.to("cpu")
