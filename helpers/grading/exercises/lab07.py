"""Lab 7: quantization-aware training.

1. ``lab07.ste_fake_quant``: a fake quantizer whose gradient is the straight-through estimator.
   Spec: helpers.quant.fake_quant_ste (chapter 5). The run returns (forward values, gradient), so a
   missing STE (zero gradient), an unclipped gradient, or a wrong scale are all caught.
2. ``lab07.qat_finetune``: a QAT fine-tuning loop for a calibrated W4A4 model. Spec: helpers.model_quant.qat.qat
   run in the same session with the same epochs; the student's accuracy must come within
   QAT_TOLERANCE_PTS of it and beat PTQ clearly.

Serves: lab07 (its exercises: spec, visible cases, hint).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

from helpers.grading.exercise import Case, Exercise, register

QAT_EPOCHS = 6
QAT_LR = 1e-3
QAT_TOLERANCE_PTS = 1.5


def reference_ste(x: torch.Tensor, amax: float, bits: int) -> torch.Tensor:
    """Symmetric fake quantization with scale amax / (2^(bits-1) - 1), narrow range, STE gradient."""
    from helpers.quant.fake_quant import fake_quant_ste

    scale = torch.tensor(amax / (2 ** (bits - 1) - 1))
    return fake_quant_ste(x, scale, bits=bits, narrow=True)


def spec_ste(values: list[float], amax: float, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(values, gradient) of the reference STE fake quantizer on one case."""
    return run_ste(reference_ste, Case("spec", (values, amax, bits)))


def run_ste(fn: Any, case: Case) -> tuple[np.ndarray, np.ndarray]:
    """Call fn on a fresh leaf tensor; return (values, d sum(fn(x)) / dx)."""
    values, amax, bits = case.args
    x = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    y = fn(x, amax, bits)
    if not isinstance(y, torch.Tensor):
        raise TypeError(f"return a torch tensor, got {type(y).__name__}")
    if y.requires_grad:
        y.sum().backward()
    grad = x.grad if x.grad is not None else torch.zeros_like(x)
    return y.detach().numpy(), grad.numpy()


def ste_cases() -> list[Case]:
    """Values inside and outside [-amax, amax] (none exactly on the edge or on a rounding tie), 8 and 4 bits."""
    return [
        Case("8 bits, amax 1", ([-2.0, -1.01, -0.5, -0.004, 0.0, 0.3, 0.99, 1.01, 1.5], 1.0, 8)),
        Case("4 bits, amax 0.7", ([-1.0, -0.72, -0.33, -0.06, 0.0, 0.06, 0.12, 0.69, 0.71, 3.0], 0.7, 4)),
        Case("4 bits, amax 2, random", (list(np.random.default_rng(7).normal(0, 1.5, 24)), 2.0, 4)),
    ]


@functools.cache
def _setup() -> tuple[Any, Any, float]:
    """Data, the trained ResNet and its FP32 accuracy."""
    from helpers.data import load_dataset
    from helpers.models.train import evaluate, trained_model

    data = load_dataset("mnist1d")
    model = trained_model("resnet_small", progress=False)
    return data, model, evaluate(model, data)


def w4a4(model: Any, data: Any) -> Any:
    """A fresh W4A4 PTQ copy of model (per-channel weights, MSE calibration)."""
    from helpers.model_quant import ptq

    return ptq.ptq(model, data, method="mse", weight_bits=4, act_bits=4)


_SPEC_CACHE: dict[tuple, float] = {}


def spec_qat(model: Any, data: Any, epochs: int, lr: float) -> float:
    """Test accuracy (%) of the W4A4 model after the reference QAT (helpers.model_quant.qat.qat); run once per session."""
    from helpers.model_quant import qat
    from helpers.models.train import evaluate

    key = (id(model), id(data), epochs, lr)
    if key not in _SPEC_CACHE:
        q = w4a4(model, data)
        qat.qat(q, data, epochs=epochs, lr=lr, progress=False)
        _SPEC_CACHE[key] = evaluate(q, data)
    return _SPEC_CACHE[key]


def run_qat(fn: Any, case: Case) -> float:
    """Give the student a fresh calibrated W4A4 model; evaluate what their loop returns."""
    from helpers.models.train import evaluate

    model, data, epochs, lr = case.args
    torch.manual_seed(0)
    out = fn(w4a4(model, data), data, epochs, lr)
    if not isinstance(out, torch.nn.Module):
        raise TypeError(f"return the fine-tuned model, got {type(out).__name__}")
    return evaluate(out, data)


def qat_cases() -> list[Case]:
    """One case: the chapter's W4A4 ResNet."""
    data, model, _ = _setup()
    return [Case(f"W4A4 ResNet, {QAT_EPOCHS} epochs, lr {QAT_LR}", (model, data, QAT_EPOCHS, QAT_LR))]


def _qat_close(got: Any, expected: Any) -> None:
    """Accept an accuracy at most QAT_TOLERANCE_PTS below the reference QAT's."""
    if float(got) < float(expected) - QAT_TOLERANCE_PTS:
        raise AssertionError(f"after your QAT the model reaches {float(got):.1f}%; the reference loop reaches "
                             f"{float(expected):.1f}% (you may be at most {QAT_TOLERANCE_PTS} points below).")


register(
    Exercise(
        id="lab07.ste_fake_quant", title="fake quantization with a straight-through gradient", spec=spec_ste,
        cases=ste_cases, run=run_ste, compare="close", rtol=1e-5, atol=1e-6,
        hint="scale = amax / (2**(bits-1) - 1); q = clamp(round(x / scale), -(2**(bits-1) - 1), 2**(bits-1) - 1) * scale. "
             "For the STE return x_c + (q - x_c).detach() where x_c = clamp(x, -amax, amax), so the gradient is 1 "
             "inside the range and 0 outside.",
    ),
    Exercise(
        id="lab07.qat_finetune", title="fine-tune a W4A4 model with QAT", spec=spec_qat, cases=qat_cases,
        run=run_qat, compare=_qat_close, plot=False,
        hint="model.train(); AdamW(model.parameters(), lr); CosineAnnealingLR over epochs * batches; for each batch: "
             "zero_grad, cross_entropy(model(x), y).backward(), step, scheduler.step(). Shuffle the train split "
             "(DataLoader(data.train, batch_size=128, shuffle=True)). Return the model in eval mode.",
    ),
)
