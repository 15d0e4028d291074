"""Quantization-aware training: fine-tune a calibrated fake-quant model so the weights learn the rounding.

pytorch-quantization's fake quantizer rounds in the forward pass and lets the gradient through
unchanged inside [-amax, amax] (the straight-through estimator, STE) and zero outside. QAT
starts from a PTQ-calibrated model (``helpers.model_quant.ptq.ptq``), uses a small learning rate with a
cosine schedule, and keeps the calibrated amax fixed. On a GPU the convolutions run in true FP32
and deterministically: cuDNN's default TF32 keeps 10 mantissa bits, so the fake-quant rounding
sees other values than on the CPU, and its fastest algorithms are not bit-reproducible.

4-bit weights make the result noisy: a small weight change flips a rounding. In a probe on the H200
(2026-11-29, W4A8, notebook 08's lr 2e-3 and 10 epochs) the test accuracy moved by up to 0.6 points
over the last three epochs, and the final accuracy spread by 0.7 points over three seeds.
``qat_seeds`` runs several seeds so that a notebook can report the median.

Serves: core — used by chapter 8 and lab 07.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from torch import nn

from helpers.data import Dataset
from helpers.errors import InputError
from helpers.models.train import evaluate, fit, model_device
from helpers.model_quant.ptq import quant_layers
from helpers.threads import torch_threads
from helpers.validation import require_int_range


def qat(qmodel: nn.Module, data: Dataset, *, epochs: int = 6, lr: float = 5e-4, weight_decay: float = 0.0,
        batch_size: int = 128, seed: int = 0, progress: bool = True) -> list[dict[str, float]]:
    """Fine-tune a calibrated fake-quant model in place (STE, AdamW, cosine LR); per-epoch history with val_acc."""
    if not isinstance(data, Dataset):
        raise InputError(f"qat() needs a helpers.data.Dataset (it trains on .train, tracks .val), got {type(data).__name__}.")
    if not quant_layers(qmodel):
        raise InputError("qat() needs a quantized, calibrated model: build it with helpers.model_quant.ptq.ptq(model, data).")
    require_int_range(epochs, 1, 1000, "epochs")
    if not lr > 0:
        raise InputError(f"lr must be positive, got {lr}.")
    start = {"epoch": 0, "loss": float("nan"), "lr": lr, "val_acc": evaluate(qmodel, data, "val")}
    on_cpu = model_device(qmodel).type == "cpu"  # tiny layers: one thread (helpers.threads); a GPU run keeps its count
    with torch_threads(1 if on_cpu else None), exact_fp32():
        history = fit(qmodel, data.train, epochs=epochs, lr=lr, weight_decay=weight_decay,
                      batch_size=batch_size, seed=seed, progress=progress, desc="QAT fine-tuning",
                      val=data.val, schedule="cosine")
    return [start, *history]


def exact_fp32() -> Any:
    """A context in which cuDNN convolutions use full FP32 (no TF32) and deterministic algorithms."""
    return torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True, allow_tf32=False)


def qat_seeds(make: Callable[[], nn.Module], data: Dataset, seeds: Sequence[int] = (0, 1, 2),
              **kwargs: Any) -> list[dict[str, Any]]:
    """QAT from a fresh calibrated model (`make()`) once per seed: rows of seed, test accuracy and history."""
    rows = []
    for seed in seeds:
        qmodel = make()
        history = qat(qmodel, data, seed=seed, **kwargs)
        with exact_fp32():
            rows.append({"seed": seed, "test_acc": evaluate(freeze(qmodel), data), "history": history})
    return rows


def recovery(fp32: float, ptq_acc: float, qat_acc: float) -> dict[str, Any]:
    """How much of the PTQ loss QAT won back: points lost by PTQ and QAT, and the recovered fraction."""
    lost = fp32 - ptq_acc
    return {"ptq drop pts": lost, "qat drop pts": fp32 - qat_acc,
            "recovered %": 100.0 * (qat_acc - ptq_acc) / lost if lost > 0 else float("nan")}


def freeze(qmodel: nn.Module) -> nn.Module:
    """Eval mode and no gradients: the fine-tuned model ready for evaluation or export."""
    qmodel.eval()
    for p in qmodel.parameters():
        p.requires_grad_(False)
    return qmodel



