"""Lab 6: post-training quantization with pytorch-quantization, then layer sensitivity.

The specs are the reference solutions in helpers.model_quant.ptq and helpers.model_quant.sensitivity, run in the same
session, so thresholds are measured, not guessed. The cases use 4-bit PTQ of the chapter's ResNet,
where each classic mistake (no calibration pass, quantizers left off, per-tensor instead of
per-channel weights, sorting the wrong way) changes the answer by more than the tolerance.

Serves: lab06 (its exercises: spec, visible cases, hint).
"""

from __future__ import annotations

import functools
from typing import Any

from helpers.grading.exercise import Case, Exercise, register

TOLERANCE_PTS = 0.5
_SPEC_CACHE: dict[tuple, float] = {}  # reference accuracies, measured once per session


@functools.cache
def _setup() -> tuple[Any, Any]:
    """The MNIST-1D data and the cached, trained ResNet of chapter 7."""
    from helpers.data import load_dataset
    from helpers.models.train import trained_model

    return load_dataset("mnist1d"), trained_model("resnet_small", progress=False)


def spec_ptq_accuracy(model: Any, data: Any, method: str, per_channel: bool, bits: int) -> float:
    """Test accuracy (%) of model after PTQ with `bits`-bit weights and activations."""
    from helpers.model_quant import ptq
    from helpers.models.train import evaluate

    key = (id(model), id(data), method, per_channel, bits)
    if key not in _SPEC_CACHE:
        _SPEC_CACHE[key] = evaluate(ptq.ptq(model, data, method=method, per_channel=per_channel,
                                            weight_bits=bits, act_bits=bits), data)
    return _SPEC_CACHE[key]


def ptq_cases() -> list[Case]:
    """4-bit cases, where calibration mistakes show."""
    data, model = _setup()
    return [
        Case("W4A4, per-channel weights, MSE calibration", (model, data, "mse", True, 4)),
        Case("W4A4, per-tensor weights, max calibration", (model, data, "max", False, 4)),
    ]


def _close_accuracy(got: Any, expected: Any) -> None:
    """Accept an accuracy within TOLERANCE_PTS of the reference's."""
    if not isinstance(got, (int, float)):
        raise AssertionError(f"return the test accuracy as a float (percent), got {type(got).__name__}.")
    if abs(float(got) - float(expected)) > TOLERANCE_PTS:
        raise AssertionError(f"your accuracy {float(got):.1f}% vs the reference's {float(expected):.1f}% "
                             f"(allowed difference {TOLERANCE_PTS} points).")


def spec_rank_layers(qmodel: Any, data: Any) -> list[str]:
    """Quantized layers sorted by the SQNR (dB) of the logits with only that layer quantized, lowest first."""
    from helpers.model_quant import sensitivity

    return sensitivity.ranking(sensitivity.layer_sensitivity(qmodel, data, metric="sqnr"))


@functools.cache
def _fragile_qmodel() -> Any:
    """The chapter-7 ResNet with a planted outlier channel, INT8 per-tensor, max-calibrated."""
    from helpers.model_quant import diagnose, ptq

    data, model = _setup()
    bad = diagnose.make_fragile(model, "layer2.conv1", "layer2.conv2", factor=64.0)
    return ptq.ptq(bad, data, method="max", per_channel=False)


def rank_cases() -> list[Case]:
    """One case: the fragile model, whose two planted layers must come first."""
    data, _ = _setup()
    return [Case("fragile ResNet, per-tensor INT8", (_fragile_qmodel(), data))]


def _same_order(got: Any, expected: Any) -> None:
    """Compare two rankings and say where they first differ."""
    if not isinstance(got, (list, tuple)) or not all(isinstance(g, str) for g in got):
        raise AssertionError("return a list of layer names (strings), most sensitive first.")
    got = list(got)
    if sorted(got) != sorted(expected):
        raise AssertionError(f"rank every quantized layer exactly once; expected the layers {sorted(expected)}.")
    for i, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            raise AssertionError(f"position {i}: yours {g!r}, expected {e!r}. Expected order: {expected}")


register(
    Exercise(
        id="lab06.ptq_accuracy", title="calibrate a quantized model and measure it",
        spec=spec_ptq_accuracy, cases=ptq_cases, compare=_close_accuracy, plot=False,
        hint="quantize_model(...) with calib='max' for method 'max' and 'histogram' otherwise; then for every "
             "quantizer: disable_quant(), enable_calib(); run the calib split; then load_calib_amax (method for "
             "histograms), enable_quant(), disable_calib(); finally evaluate on the test split.",
    ),
    Exercise(
        id="lab06.rank_layers", title="rank layers by sensitivity", spec=spec_rank_layers, cases=rank_cases,
        compare=_same_order, plot=False,
        hint="Switch every quantizer off, record the FP logits on the val split, then for each layer switch on only "
             "its quantizers, compute sqnr_db(fp_logits, logits), switch it off again. Sort by SQNR, lowest first.",
    ),
)
