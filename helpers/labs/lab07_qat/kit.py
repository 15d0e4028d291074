"""Lab 07 on the student's side: the straight-through estimator and a short QAT run on the course's model,
judged by accuracy.

Serves: lab 07.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from helpers.grading.compare import BadAnswer
from helpers.grading.model_runs import setup

QAT_TOLERANCE_PTS = 2.5       # lab 7: QAT accuracy at most this far below the reference loop's


QAT_SAMPLES = 1024


QAT_EPOCHS = 2


QAT_LR = 1e-3


def run_ste(fn: Any, values: list[float], amax: float, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """Lab 7, exercise 1: call fn on a fresh leaf tensor; return (values, d sum(fn(x)) / dx)."""
    import torch

    x = torch.tensor(values, dtype=torch.float32, requires_grad=True)
    y = fn(x, amax, bits)
    if not isinstance(y, torch.Tensor):
        raise BadAnswer(f"return a torch tensor, got {type(y).__name__}.")
    if y.requires_grad:
        y.sum().backward()
    grad = x.grad if x.grad is not None else torch.zeros_like(x)
    return y.detach().numpy().astype(np.float32), grad.numpy().astype(np.float32)


def qat_data(samples: int = QAT_SAMPLES) -> Any:
    """The chapter's data with the training split cut to its first `samples` examples (the fixed budget)."""
    from torch.utils.data import TensorDataset

    data, _ = setup()
    x, y = data.train.tensors
    return dataclasses.replace(data, train=TensorDataset(x[:samples], y[:samples]))


def w4a4() -> Any:
    """A fresh W4A4 copy of the chapter's ResNet: per-channel 4-bit weights, max-calibrated 4-bit activations."""
    from helpers.model_quant import ptq

    data, model = setup()
    return ptq.ptq(model, data, method="max", weight_bits=4, act_bits=4)


def run_qat(fn: Any, epochs: int, lr: float, samples: int) -> dict:
    """Lab 7, exercise 2: give the student a fresh W4A4 model; send back the weights it returns."""
    import torch

    torch.manual_seed(0)
    out = fn(w4a4(), qat_data(samples), epochs, lr)
    if not isinstance(out, torch.nn.Module):
        raise BadAnswer(f"return the fine-tuned model, got {type(out).__name__}.")
    return {"state": {k: v.detach().cpu().numpy() for k, v in out.state_dict().items()}}


def accuracy_of_state(state: dict) -> float:
    """Load weights into a fresh W4A4 ResNet (in this process) and measure its test accuracy."""
    import torch

    from helpers.models.train import evaluate

    data, _ = setup()
    model = w4a4()
    try:
        model.load_state_dict({k: torch.as_tensor(np.asarray(v)) for k, v in state.items()})
    except (RuntimeError, KeyError, TypeError) as err:
        raise AssertionError(f"the returned model is not the W4A4 model you were given ({str(err)[:200]}).") from None
    return evaluate(model.eval(), data)


def compare_qat(got: Any, expected: Any) -> None:
    """Measure the returned weights here; accept at most QAT_TOLERANCE_PTS below the reference loop."""
    if not isinstance(got, dict) or not isinstance(got.get("state"), dict):
        raise AssertionError("no model weights came back.")
    acc = accuracy_of_state(got["state"])
    if acc < float(expected) - QAT_TOLERANCE_PTS:
        raise AssertionError(f"after your QAT the model reaches {acc:.1f}%; the reference loop reaches "
                             f"{float(expected):.1f}% (you may be at most {QAT_TOLERANCE_PTS} points below).")
