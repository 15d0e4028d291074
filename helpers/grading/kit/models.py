"""Labs 6 and 7 on the student's side: build the chapter-7 model and data from plain settings, call the
student's function, and send back plain data (an accuracy, layer names, or the trained weights).

The QAT exercise uses a small, fixed budget (a W4A4 max-calibrated copy, 1,024 training samples,
two epochs) so that its time is seconds on two busy cores; the grader loads the weights it gets
back into a fresh copy of the same model and measures the accuracy itself.

Serves: lab06 and lab07 (runners and comparisons).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np

from helpers.grading.compare import BadAnswer

# lab 6: PTQ accuracy within this of the reference's. pytorch-quantization's histograms depend on how the
# calibration split is batched (it re-bins as the range grows): at W4A4 with percentile calibration, one
# batch of 512 vs batches of 256 differ by 0.4 points on the CPU and 0.9 on the H200 (2026-11-30), both
# correct; every known-wrong answer (tests/test_ch07_lab06.py) is 8 points or more away.
ACCURACY_TOLERANCE_PTS = 1.5
QAT_TOLERANCE_PTS = 2.5       # lab 7: QAT accuracy at most this far below the reference loop's
QAT_SAMPLES = 1024
QAT_EPOCHS = 2
QAT_LR = 1e-3


@functools.cache
def setup() -> tuple[Any, Any]:
    """The MNIST-1D data and the cached, trained ResNet of chapter 7."""
    from helpers.data import load_dataset
    from helpers.models.train import trained_model

    return load_dataset("mnist1d"), trained_model("resnet_small", progress=False)


def _number(x: Any, what: str) -> float:
    """x as a float, or a BadAnswer naming what was expected."""
    if isinstance(x, bool) or not isinstance(x, (int, float, np.floating, np.integer)) and not hasattr(x, "item"):
        raise BadAnswer(f"return {what} as a float, got {type(x).__name__}.")
    return float(x)


def run_ptq(fn: Any, method: str, per_channel: bool, bits: int) -> float:
    """Lab 6, exercise 1: the student's PTQ accuracy on the chapter's ResNet."""
    data, model = setup()
    return _number(fn(model, data, method, per_channel, bits), "the test accuracy (percent)")


def compare_accuracy(got: Any, expected: Any) -> None:
    """Accept an accuracy within ACCURACY_TOLERANCE_PTS of the reference's."""
    if abs(float(got) - float(expected)) > ACCURACY_TOLERANCE_PTS:
        raise AssertionError(f"your accuracy {float(got):.1f}% vs the reference's {float(expected):.1f}% "
                             f"(allowed difference {ACCURACY_TOLERANCE_PTS} points).")


def fragile_qmodel(first: str, second: str, factor: float) -> Any:
    """The ResNet with an outlier channel planted between two layers, INT8 per-tensor, max-calibrated."""
    from helpers.model_quant import diagnose, ptq

    data, model = setup()
    return ptq.ptq(diagnose.make_fragile(model, first, second, factor=factor), data, method="max", per_channel=False)


def run_rank(fn: Any, first: str, second: str, factor: float) -> list[str]:
    """Lab 6, exercise 2: the student's ranking of a fragile model's layers."""
    data, _ = setup()
    got = fn(fragile_qmodel(first, second, factor), data)
    if not isinstance(got, (list, tuple)) or not all(isinstance(g, str) for g in got):
        raise BadAnswer("return a list of layer names (strings), most sensitive first.")
    return list(got)


def compare_order(got: Any, expected: Any) -> None:
    """Compare two rankings and say where they first differ."""
    got, expected = list(got), list(expected)
    if sorted(got) != sorted(expected):
        raise AssertionError(f"rank every quantized layer exactly once; expected the layers {sorted(expected)}.")
    for i, (g, e) in enumerate(zip(got, expected)):
        if g != e:
            raise AssertionError(f"position {i}: yours {g!r}, expected {e!r}. Expected order: {expected}")


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
