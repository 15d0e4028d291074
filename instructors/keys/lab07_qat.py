"""Lab 7: quantization-aware training.

1. ``lab07.ste_fake_quant``: a fake quantizer whose gradient is the straight-through estimator.
   Spec: helpers.quant.fake_quant.fake_quant_ste. The run sends back (forward values, gradient), so a
   missing STE (zero gradient), an unclipped gradient, or a wrong scale are all caught.
2. ``lab07.qat_finetune``: a QAT loop for a calibrated W4A4 model, on a small fixed budget
   (helpers.labs.lab07_qat.kit). Spec: helpers.model_quant.qat.qat on the same budget; the weights
   the student's loop returns are measured by the grader, and must come within
   QAT_TOLERANCE_PTS of the reference loop.

Serves: lab07 (its answer key: specs, visible and hidden cases, hints).
"""

from __future__ import annotations

import functools

import numpy as np

from helpers.grading.exercise import Case, Exercise, register
from helpers.labs.lab07_qat import kit as models

QAT_EPOCHS, QAT_LR = models.QAT_EPOCHS, models.QAT_LR


def reference_ste(x, amax: float, bits: int):  # noqa: ANN001, ANN201 - torch types stay lazy
    """Symmetric fake quantization with scale amax / (2^(bits-1) - 1), narrow range, STE gradient."""
    import torch

    from helpers.quant.fake_quant import fake_quant_ste

    return fake_quant_ste(x, torch.tensor(amax / (2 ** (bits - 1) - 1)), bits=bits, narrow=True)


def spec_ste(values: list[float], amax: float, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, gradient) of the reference STE fake quantizer on one case."""
    return models.run_ste(reference_ste, values, amax, bits)


def ste_cases() -> list[Case]:
    """Values inside and outside [-amax, amax] (none exactly on the edge or on a rounding tie), 8 and 4 bits."""
    return [
        Case("8 bits, amax 1", ([-2.0, -1.01, -0.5, -0.004, 0.0, 0.3, 0.99, 1.01, 1.5], 1.0, 8)),
        Case("4 bits, amax 0.7", ([-1.0, -0.72, -0.33, -0.06, 0.0, 0.06, 0.12, 0.69, 0.71, 3.0], 0.7, 4)),
        Case("4 bits, amax 2, random", ([float(v) for v in np.random.default_rng(7).normal(0, 1.5, 24)], 2.0, 4)),
    ]


@functools.cache
def spec_qat(epochs: int, lr: float, samples: int) -> float:
    """Test accuracy (%) of the W4A4 model after the reference QAT loop on the same budget."""
    import torch

    from helpers.model_quant import qat
    from helpers.models.train import evaluate

    data, _ = models.setup()
    torch.manual_seed(0)
    q = models.w4a4()
    qat.qat(q, models.qat_data(samples), epochs=epochs, lr=lr, progress=False)
    return evaluate(q.eval(), data)


register(
    Exercise(
        id="lab07.ste_fake_quant", title="fake quantization with a straight-through gradient", spec=spec_ste,
        cases=ste_cases, run=models.run_ste, compare="close", rtol=1e-5, atol=1e-6,
        hidden=lambda: [Case("hidden: 6 bits, amax 0.5", ([-0.9, -0.51, -0.2, 0.01, 0.26, 0.49, 0.8], 0.5, 6))],
        hint="Forward: the value snapped to the quantization grid. Backward: pretend the snapping did not "
             "happen inside the range, and pass no gradient outside it.",
        hints=("Clamp x to [-amax, amax] and quantize the clamped value. The output must equal the quantized "
               "value going forward, yet carry the clamp's gradient going back: add to the clamped tensor a "
               "correction that autograd does not see (what does .detach() do?).",),
    ),
    Exercise(
        id="lab07.qat_finetune", title="fine-tune a W4A4 model with QAT", spec=spec_qat, run=models.run_qat,
        compare=models.compare_qat, plot=False, measured=True,
        cases=lambda: [Case(f"W4A4 ResNet, {QAT_EPOCHS} epochs on {models.QAT_SAMPLES} samples, lr {QAT_LR}",
                            (QAT_EPOCHS, QAT_LR, models.QAT_SAMPLES))],
        hint="QAT is ordinary training of the quantized model: the fake quantizers stay in the forward pass, "
             "and the straight-through gradient lets the weights adapt to them.",
        hints=("AdamW over all the parameters, a cosine learning-rate schedule over every step, shuffled "
               "batches of 128 from data.train, cross-entropy; return the model in eval mode.",),
    ),
)
