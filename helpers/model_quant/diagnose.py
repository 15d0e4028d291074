"""The "accuracy dropped by more than 5 points after INT8" checklist, as one function.

``diagnose(model, qmodel, data)`` compares a calibrated fake-quant model with its FP32 original and
reports, per quantized layer:
- the error of the layer's output (SQNR in dB, quantized model vs FP32, errors accumulated);
- weight ranges: the ratio of the largest to the median per-output-channel |w| max (a large ratio
  with per-tensor weights means most channels get only a few levels);
- activation-range coverage: the share of input values clipped by amax, how much of the
  [-amax, amax] grid the inputs use (99.9th percentile of |x| / amax), and how unequal the input
  channels' ranges are (activations get one scale per tensor);
and turns those into recommendations: per-channel weights, another calibrator (percentile/MSE, or
max when amax is too small, as when entropy collapses), or keeping the layer in FP16.

The drop itself carries its noise: both models score the same test samples, so ``Diagnosis.drop_spread`` is
the paired-bootstrap 95 % interval of FP32 − quantized accuracy over them (``accuracy_gap``). A drop whose
interval holds 0 is printed as "not resolved at this noise" (``helpers.findings.NOT_RESOLVED``), not as a loss.

Serves: core — used by chapters 7, 10, 11 and lab 06.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers.errors import InputError
from helpers.findings import NOT_RESOLVED, NOT_RESOLVED_ZH
from helpers.models.train import _as_loader, model_device
from helpers.model_quant.ptq import fold_batchnorm, quant_layers, score, set_quant_enabled
from helpers.quant.metrics import sqnr_db
from helpers.spread import Spread, bootstrap_paired

WEIGHT_RATIO_LIMIT = 8.0   # largest / median channel range above which per-tensor weights lose too much
CLIP_LIMIT = 0.01          # more than 1% of inputs clipped: amax too small
COVERAGE_LIMIT = 0.10      # inputs use less than 10% of the grid: amax set by outliers
INPUT_RATIO_LIMIT = 20.0   # input channels this unequal waste most of a per-tensor activation scale
SQNR_LIMIT_DB = 15.0       # a layer output below this SQNR is a candidate to keep in FP16


def accuracy_gap(a: Sequence[bool], b: Sequence[bool]) -> Spread:
    """Paired-bootstrap 95 % interval of accuracy(a) − accuracy(b) in points, a and b right (True) or wrong on the
    same test samples (``helpers.model_quant.ptq.score``)."""
    points = [(100 * np.asarray(x, dtype=float)).tolist() for x in (a, b)]
    return bootstrap_paired(points[0], points[1], what="test samples")


@dataclass
class Diagnosis:
    """The checklist's findings: accuracies, one row per layer, what to try, and the per-sample results."""

    fp32_acc: float
    quant_acc: float
    layers: list[dict[str, Any]]
    recommendations: list[str] = field(default_factory=list)
    fp32_correct: np.ndarray | None = None   # right/wrong per test sample, FP32 model
    quant_correct: np.ndarray | None = None  # the same test samples, quantized model

    @property
    def drop(self) -> float:
        """Accuracy lost by quantization, in points."""
        return self.fp32_acc - self.quant_acc

    @cached_property
    def drop_spread(self) -> Spread | None:
        """Paired-bootstrap 95 % interval of the drop over the test samples both models scored (None without them)."""
        if self.fp32_correct is None or self.quant_correct is None:
            return None
        return accuracy_gap(self.fp32_correct, self.quant_correct)

    @property
    def resolved(self) -> bool:
        """True when the drop's interval excludes 0: a loss (or gain) larger than the noise of the test set."""
        s = self.drop_spread
        return s is not None and not s.contains(0.0)

    def extra(self) -> dict[str, Any]:
        """The drop's spread as record extras ({'lo', 'hi', 'spread'}; empty without per-sample results)."""
        return {} if self.drop_spread is None else self.drop_spread.extra()

    def summary(self) -> str:
        """One line: both accuracies, the drop with its interval, and whether it is resolved."""
        head = f"FP32 {self.fp32_acc:.1f}%  quantized {self.quant_acc:.1f}%  drop {self.drop:.1f} points"
        s = self.drop_spread
        if s is None:
            return f"{head}: no per-sample results, so no spread; whether this is more than the noise is unknown."
        head += f" ({s.method}: {s.lo:+.1f} to {s.hi:+.1f} points)"
        if s.contains(0.0):
            return f"{head}: {NOT_RESOLVED} ({NOT_RESOLVED_ZH}), no loss this test set can resolve."
        if s.hi < 0:
            return f"{head}: the quantized model is resolved above FP32."
        return f"{head}: a resolved loss."

    def show(self) -> None:
        """Print the summary, the per-layer table and the recommendations."""
        from helpers.tables import show

        print(self.summary())
        show(self.layers, caption="Per-layer error and range coverage")
        known, loss = self.drop_spread is not None, self.resolved and self.drop > 0
        if not self.recommendations:
            print(" - No layer stands out: " + ("the drop is spread over the model." if loss or not known
                                                 else "there is no resolved loss to explain."))
        elif known and not loss:
            print("The drop is not a resolved loss: the checks below describe the layers, not the cause of a loss.")
        for r in self.recommendations:
            print(" -", r)


def _weight_ratio(mod: nn.Module) -> float:
    """Largest / median of the per-output-channel max |w| of a layer's weight."""
    w = mod.weight.detach().abs().flatten(1).amax(1)
    return float(w.max() / w.median().clamp_min(1e-12))


@torch.no_grad()
def _capture(qmodel: nn.Module, layers: list[str], x: torch.Tensor) -> tuple[dict, dict]:
    """Inputs and outputs of the named layers for one batch."""
    ins, outs, hooks = {}, {}, []
    for name in layers:
        mod = qmodel.get_submodule(name)

        def hook(m: nn.Module, inp: tuple, out: torch.Tensor, name: str = name) -> None:
            ins[name], outs[name] = inp[0].detach(), out.detach()
        hooks.append(mod.register_forward_hook(hook))
    try:
        qmodel(x)
    finally:
        for h in hooks:
            h.remove()
    return ins, outs


def _channel_ratio(x: torch.Tensor) -> float:
    """Largest / median per-channel max |x| of a layer input (channels on axis 1, or last for Linear)."""
    axis = 1 if x.ndim >= 3 else x.ndim - 1
    per = x.detach().abs().transpose(0, axis).flatten(1).amax(1)
    return float(per.max() / per.median().clamp_min(1e-12))


def _amax(q: nn.Module) -> float:
    """A quantizer's (largest) amax as a float; NaN when it has none."""
    a = getattr(q, "amax", None)
    return float(a.max()) if a is not None else float("nan")


def diagnose(model: nn.Module, qmodel: nn.Module, data: Any, *, split: str = "val",
             samples: int = 512) -> Diagnosis:
    """Run the >5-point-drop checklist on a calibrated quantized model against its FP32 original."""
    layers = quant_layers(qmodel)
    if not layers:
        raise InputError("qmodel has no quantized layers; pass the model returned by helpers.model_quant.ptq.ptq().")
    dev = model_device(qmodel)
    xs = []
    for x, _ in _as_loader(data, split, batch_size=samples):
        xs.append(x)
        break
    x = xs[0].to(dev)
    from tqdm.auto import tqdm

    bar = tqdm(total=3, desc="diagnose: compare every layer in FP32 and INT8, then test accuracy", leave=False)
    set_quant_enabled(qmodel, False)
    fp_in, fp_out = _capture(qmodel, layers, x)
    set_quant_enabled(qmodel, True)
    _, q_out = _capture(qmodel, layers, x)
    bar.update()
    rows = []
    for name in layers:
        mod = qmodel.get_submodule(name)
        a_in, wq = _amax(mod._input_quantizer), mod._weight_quantizer
        inp = fp_in[name].abs().flatten().float()
        rows.append({
            "layer": name,
            "sqnr dB": sqnr_db(fp_out[name], q_out[name]),
            "weights": "per-tensor" if wq.amax is None or wq.amax.numel() == 1 else "per-channel",
            "w range ratio": _weight_ratio(mod),
            "in range ratio": _channel_ratio(fp_in[name]),
            "clipped %": 100.0 * float((inp > a_in).float().mean()),
            "grid used": float(torch.quantile(inp[:1_000_000], 0.999) / a_in) if a_in > 0 else float("nan"),
            "input amax": a_in,
        })
    bar.update()
    (fp32_acc, fp32_right), (quant_acc, quant_right) = score(model, data, "test"), score(qmodel, data, "test")
    diag = Diagnosis(fp32_acc, quant_acc, rows, fp32_correct=fp32_right, quant_correct=quant_right)
    bar.update()
    bar.close()
    diag.recommendations = recommend(rows)
    return diag


def recommend(rows: list[dict[str, Any]]) -> list[str]:
    """Recommendations from per-layer rows (see the module docstring for the rules)."""
    out = []
    for r in rows:
        n = r["layer"]
        if r["weights"] == "per-tensor" and r["w range ratio"] > WEIGHT_RATIO_LIMIT:
            out.append(f"{n}: channel weight ranges differ {r['w range ratio']:.0f}x; use per-channel weights "
                       "(QuantDescriptor(axis=(0,))).")
        if r["clipped %"] > 100 * CLIP_LIMIT:
            out.append(f"{n}: {r['clipped %']:.1f}% of inputs are clipped (amax too small, as when entropy "
                       "collapses on few-valued inputs); use max or percentile calibration.")
        elif r["grid used"] < COVERAGE_LIMIT:
            out.append(f"{n}: inputs use {r['grid used']:.0%} of the INT8 range (amax set by outliers); "
                       "use percentile or MSE calibration.")
        if r["in range ratio"] > INPUT_RATIO_LIMIT:
            out.append(f"{n}: input channel ranges differ {r['in range ratio']:.0f}x, and activations have one "
                       "scale per tensor: most channels get a few levels. Keep this layer in FP16, or rebalance the "
                       "channels into the weights (SmoothQuant-style) before quantizing.")
    worst = sorted(rows, key=lambda r: r["sqnr dB"])[:2]
    for r in worst:
        if r["sqnr dB"] < SQNR_LIMIT_DB:
            out.append(f"{r['layer']}: output SQNR {r['sqnr dB']:.1f} dB; if the fixes above do not help, "
                       "keep this layer in FP16 (helpers.model_quant.sensitivity.keep_in_fp).")
    return out


@torch.no_grad()
def make_fragile(model: nn.Module, first: str, second: str, channel: int = 0, factor: float = 64.0) -> nn.Module:
    """A BN-folded copy computing the same function whose `first` layer has one huge output channel.

    Channel `channel` of `first` (and its bias) is multiplied by `factor` and the matching input
    channel of `second` divided by it; with a ReLU between them the FP32 outputs are unchanged,
    but per-tensor weight and activation ranges now span `factor` times more.
    """
    if not factor > 0:
        raise InputError(f"factor must be positive, got {factor}.")
    folded = fold_batchnorm(model)
    a, b = folded.get_submodule(first), folded.get_submodule(second)
    if a.weight.shape[0] != b.weight.shape[1] or b.groups != 1:
        raise InputError(f"{first} must feed {second} directly (out channels {a.weight.shape[0]} vs "
                         f"in channels {b.weight.shape[1]}), and {second} must not be grouped.")
    a.weight[channel] *= factor
    if a.bias is not None:
        a.bias[channel] *= factor
    b.weight[:, channel] /= factor
    return folded
