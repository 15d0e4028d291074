"""What the lecture notes say about quantization-aware training, registered in the course's claims
registry and judged by pytorch-quantization itself and by chapter 8's QAT runs.

Serves: chapter 8.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values


def notes_api_exists() -> bool:
    """Does pytorch_quantization.nn have the QuantDesc the notes pass to QuantConv2d(quant_desc=...)?"""
    from helpers.plugins.pq_compat import pq

    return hasattr(pq().nn, "QuantDesc")


def _recipe(m: Values) -> tuple[str, str]:
    exists, rec = m.get("ch08.notes_quantdesc_exists"), m.get("ch08.w4a8.qat_delta_pts")
    if exists is None:
        return "pytorch-quantization was not run here", NOT_MEASURED
    api = ("the installed pytorch-quantization has an nn.QuantDesc" if exists else
           "the installed pytorch-quantization has no nn.QuantDesc: the descriptor is tensor_quant.QuantDescriptor, "
           "passed as quant_desc_input and quant_desc_weight")
    result = "" if rec is None else (f"; started that way, chapter 8's W4A8 QAT ends {abs(rec):.1f} points "
                                     f"{'below' if rec > 0 else 'above'} FP32")
    return (f"{api}. The STE needs no change to the loop: it is the backward pass of the fake-quant op. What QAT "
            "does need is a calibrated start and a short, small-learning-rate fine-tune, not training from "
            f"scratch{result}"), FAILS if not exists else HOLDS


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch08.qat_recipe", 8, "notes 3 §3.2",
        "QAT: replace the layer by quant_nn.QuantConv2d(..., quant_desc=quant_nn.QuantDesc(num_bits=8, "
        "calib_method='histogram')) and add a straight-through estimator to the training loop.",
        "量化感知训练：把层替换为 quant_nn.QuantConv2d(..., quant_desc=quant_nn.QuantDesc(num_bits=8, "
        "calib_method='histogram'))，并在训练循环中加入直通估计器。",
        _recipe, "pytorch-quantization 2.1.3, inspected here; chapter 8's QAT runs",
        ("ch08.notes_quantdesc_exists", "ch08.w4a8.qat_delta_pts"),
        baseline="the installed pytorch-quantization 2.1.3 API, and chapter 8's QAT started from a calibrated model",
        summary_zh=lambda m: ("尚未运行 pytorch-quantization" if m.get("ch08.notes_quantdesc_exists") is None else
                              ("pytorch-quantization 有 nn.QuantDesc" if m.get("ch08.notes_quantdesc_exists") else
                               "pytorch-quantization 没有 nn.QuantDesc，描述符是 tensor_quant.QuantDescriptor")
                              + "；直通估计器就是伪量化算子的反向传播，训练循环无需改动")),
)
registry.register(*CLAIMS)
