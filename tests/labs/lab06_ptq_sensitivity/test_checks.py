"""Lab 6: the checks accept the reference answers and reject known-wrong ones."""

from __future__ import annotations

import pytest
import torch
from tests.support.grading import one_torch_thread  # noqa: F401  (fixture)

from helpers.model_quant import ptq
from helpers.grading import CheckFailed, check
from helpers.models.train import evaluate
from helpers.plugins.pq_compat import load_calib_amax, quantizers
from helpers.quant.metrics import sqnr_db

pytest.importorskip("pytorch_quantization")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _calibrated(model, data, method, per_channel, bits, *, enable=True):
    q = ptq.quantize_model(model, per_channel=per_channel, weight_bits=bits, act_bits=bits,
                           calib="max" if method == "max" else "histogram")
    for _, qz in quantizers(q):
        qz.disable_quant()
        qz.enable_calib()
    with torch.no_grad():
        q(data.calib.tensors[0])
    for _, qz in quantizers(q):
        hist = type(qz._calibrator).__name__ == "HistogramCalibrator"
        load_calib_amax(qz, method if hist else "max", **({"stride": 8} if hist and method != "percentile" else {}))
        if enable:
            qz.enable_quant()
        qz.disable_calib()
    return q


def test_ptq_accuracy_check():
    check("lab06.ptq_accuracy", lambda m, d, meth, pc, b: evaluate(_calibrated(m, d, meth, pc, b), d), plot=False)
    wrong = {
        "quantizers left off": lambda m, d, meth, pc, b: evaluate(_calibrated(m, d, meth, pc, b, enable=False), d),
        "8 bits instead of bits": lambda m, d, meth, pc, b: evaluate(_calibrated(m, d, meth, pc, 8), d),
        "FP32 accuracy": lambda m, d, meth, pc, b: evaluate(m, d),
        "per_channel ignored (always per-tensor)": lambda m, d, meth, pc, b: evaluate(_calibrated(m, d, meth, False, b), d),
    }
    for name, fn in wrong.items():
        with pytest.raises(CheckFailed):
            check("lab06.ptq_accuracy", fn, plot=False)


def test_ptq_accuracy_rejects_always_per_channel():
    """The per-tensor case on the model with an outlier channel (hidden) catches a PTQ that is always per-channel."""
    from helpers.grading import verify

    verify("lab06.ptq_accuracy", lambda m, d, meth, pc, b: evaluate(_calibrated(m, d, meth, pc, b), d))
    with pytest.raises(CheckFailed):
        verify("lab06.ptq_accuracy", lambda m, d, meth, pc, b: evaluate(_calibrated(m, d, meth, True, b), d))


def _rank(qmodel, data, descending=False, split="val"):
    x = getattr(data, split).tensors[0]
    ptq.set_quant_enabled(qmodel, False)
    with torch.no_grad():
        ref = qmodel(x)
        scores = {}
        for name in ptq.quant_layers(qmodel):
            ptq.set_quant_enabled(qmodel, True, [name])
            scores[name] = sqnr_db(ref, qmodel(x))
            ptq.set_quant_enabled(qmodel, False, [name])
    ptq.set_quant_enabled(qmodel, True)
    return sorted(scores, key=scores.get, reverse=descending)


def test_rank_layers_check():
    check("lab06.rank_layers", _rank, plot=False)
    with pytest.raises(CheckFailed):
        check("lab06.rank_layers", lambda q, d: _rank(q, d, descending=True), plot=False)
    with pytest.raises(CheckFailed):
        check("lab06.rank_layers", lambda q, d: ptq.quant_layers(q), plot=False)
