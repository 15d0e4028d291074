"""Lab 6: post-training quantization with pytorch-quantization, then layer sensitivity.

The specs are the reference implementations in helpers.model_quant.ptq and .sensitivity; the grader
runs them once per batch on its own machine, so thresholds are measured, not guessed. The cases use
4-bit PTQ of the chapter's ResNet, where the classic mistakes tested in tests/labs/lab06_ptq_sensitivity/
(quantizers left off, 8 bits instead of `bits`, the FP32 model, sorting the wrong way, no sorting) change
the answer by more than the tolerance. Ignoring `per_channel` is caught on the copy with an outlier channel
(kit.FRAGILE), where per-channel and per-tensor weights differ by several points; on the plain ResNet at W4A4
they score within the tolerance of each other.

Serves: lab06 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import functools

from helpers.grading.exercise import Case, Exercise, register
from helpers.labs.lab06_ptq_sensitivity import kit as models


@functools.cache
def spec_ptq_accuracy(method: str, per_channel: bool, bits: int, fragile: bool = False) -> float:
    """Test accuracy (%) of the chapter's ResNet (or its copy with an outlier channel) after PTQ with `bits`-bit
    weights and activations."""
    from helpers.model_quant import ptq
    from helpers.models.train import evaluate

    data, model = models.ptq_model(fragile)
    return evaluate(ptq.ptq(model, data, method=method, per_channel=per_channel, weight_bits=bits,
                            act_bits=bits), data)


@functools.cache
def spec_rank_layers(first: str, second: str, factor: float) -> list[str]:
    """Quantized layers sorted by the SQNR (dB) of the logits with only that layer quantized, lowest first."""
    from helpers.model_quant import sensitivity

    data, _ = models.setup()
    qmodel = models.fragile_qmodel(first, second, factor)
    return sensitivity.ranking(sensitivity.layer_sensitivity(qmodel, data, metric="sqnr"))


register(
    Exercise(
        id="lab06.ptq_accuracy", title="calibrate a quantized model and measure it",
        spec=spec_ptq_accuracy, run=models.run_ptq, compare=models.compare_accuracy, plot=False, measured=True,
        cases=lambda: [Case("W4A4, per-tensor weights, max calibration", ("max", False, 4)),
                       Case("W4A4, per-channel weights, percentile calibration", ("percentile", True, 4)),
                       Case("INT8, per-channel weights, max calibration, ResNet with an outlier channel",
                            ("max", True, 8, True))],
        hidden=lambda: [Case("hidden: W4A4, per-channel weights, max calibration", ("max", True, 4)),
                        Case("hidden: INT8, per-tensor weights, max calibration, ResNet with an outlier channel",
                             ("max", False, 8, True))],
        hint="Calibration is a pass with quantization off and statistics on; only then is each quantizer's "
             "range loaded and quantization switched back on.",
        hints=("Build the copy with quantize_model (a max or a histogram calibrator, depending on the method), "
               "switch every quantizer to calibration mode, run the calib split through the model, then "
               "load_calib_amax per quantizer (weights use 'max'), and switch them back before evaluating.",),
    ),
    Exercise(
        id="lab06.rank_layers", title="rank layers by sensitivity", spec=spec_rank_layers, run=models.run_rank,
        compare=models.compare_order, plot=False, measured=True,
        cases=lambda: [Case("fragile ResNet (layer2.conv1 → layer2.conv2), per-tensor INT8",
                            ("layer2.conv1", "layer2.conv2", 64.0))],
        hidden=lambda: [Case("hidden: fragile ResNet (layer1.conv1 → layer1.conv2)",
                             ("layer1.conv1", "layer1.conv2", 64.0))],
        hint="Measure each layer alone: compare the logits with only that layer quantized against the "
             "logits with nothing quantized.",
        hints=("Switch every quantizer off and keep the FP logits of the val split; then for each layer switch "
               "on only its quantizers, score sqnr_db against the FP logits, and switch it off again. Sort "
               "ascending; leave all quantizers on at the end.",),
    ),
)
