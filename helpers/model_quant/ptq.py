"""Post-training quantization with NVIDIA's pytorch-quantization: swap layers, calibrate, measure.

The steps a notebook shows, one function each:
1. ``fold_batchnorm``: fold BatchNorm into the convolution before it, as deployment runtimes do
   before they quantize weights (TensorRT, ONNX Runtime). This is where the per-channel weight
   ranges of a depthwise-separable model become very unequal.
2. ``quantize_model``: replace every Conv1d/Conv2d/Linear by its ``quant_nn`` twin, explicitly
   (no global monkey-patching), with a ``QuantDescriptor`` for inputs and one for weights.
3. ``calibrate``: run calibration batches with quantization off, then load each quantizer's amax
   by 'max', 'entropy', 'percentile' or 'mse' (histogram methods; see ``helpers.plugins.pq_compat``).
4. ``accuracy_table`` / ``model_size``: compare with FP32.

Serves: core — used by chapters 7–12 and labs 06–09.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from helpers.errors import InputError
from helpers.models.train import _as_loader, model_device, predict
from helpers.plugins.pq_compat import load_calib_amax, pq, quantizers
from helpers.validation import require_choice, require_int_range

METHODS = ("max", "entropy", "percentile", "mse")
SEARCH_STRIDE = 8  # entropy/MSE try every 8th of the 2048 histogram bins as amax: 240 candidates, 8x faster
QUANTIZABLE = (nn.Conv1d, nn.Conv2d, nn.Linear)


def fold_batchnorm(model: nn.Module) -> nn.Module:
    """An eval-mode copy of `model` with every Conv+BatchNorm pair folded into one Conv (torch.fx)."""
    from torch.fx.experimental.optimization import fuse

    model = copy.deepcopy(model).eval()
    if not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return model
    return fuse(model)


def _parent(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    """The module holding submodule `name`, and the attribute name inside it."""
    *path, leaf = name.split(".")
    parent = model
    for p in path:
        parent = getattr(parent, p)
    return parent, leaf


def _quant_twin(mod: nn.Module, desc_in: Any, desc_w: Any) -> nn.Module:
    """The quant_nn module equivalent to `mod`, sharing its weights."""
    qnn = pq().nn
    kw = {"quant_desc_input": desc_in, "quant_desc_weight": desc_w}
    if isinstance(mod, nn.Linear):
        q = qnn.QuantLinear(mod.in_features, mod.out_features, bias=mod.bias is not None, **kw)
    else:
        cls = qnn.QuantConv1d if isinstance(mod, nn.Conv1d) else qnn.QuantConv2d
        padding = mod.padding
        if padding == "same":
            padding = tuple(d * (k - 1) // 2 for k, d in zip(mod.kernel_size, mod.dilation))
        q = cls(mod.in_channels, mod.out_channels, mod.kernel_size, stride=mod.stride, padding=padding,
                dilation=mod.dilation, groups=mod.groups, bias=mod.bias is not None,
                padding_mode=mod.padding_mode, **kw)
    q.weight = mod.weight
    if mod.bias is not None:
        q.bias = mod.bias
    return q.to(mod.weight.device)


def quantize_model(model: nn.Module, *, per_channel: bool = True, weight_bits: int = 8, act_bits: int = 8,
                   calib: str = "max", fold_bn: bool = True, skip: Iterable[str] = ()) -> nn.Module:
    """A copy of `model` whose Conv/Linear layers are quant_nn layers (weights per-channel or per-tensor).

    `calib` picks the input calibrator: 'max' or 'histogram' (needed for entropy/percentile/mse).
    Layers named in `skip` stay in floating point.
    """
    require_int_range(weight_bits, 2, 16, "weight_bits")
    require_int_range(act_bits, 2, 16, "act_bits")
    require_choice(calib, ("max", "histogram"), "calib")
    desc_cls = pq().tensor_quant.QuantDescriptor
    qmodel = fold_batchnorm(model) if fold_bn else copy.deepcopy(model).eval()
    skip = set(skip)
    names = [n for n, m in qmodel.named_modules() if isinstance(m, QUANTIZABLE)]
    unknown = skip - set(names)
    if unknown:
        raise InputError(f"skip names {sorted(unknown)} are not quantizable layers; choose from {names}.")
    desc_in = desc_cls(num_bits=act_bits, calib_method=calib)
    for name in names:
        if name in skip:
            continue
        mod = qmodel.get_submodule(name)
        desc_w = desc_cls(num_bits=weight_bits, axis=(0,) if per_channel else None)
        parent, leaf = _parent(qmodel, name)
        setattr(parent, leaf, _quant_twin(mod, desc_in, desc_w))
    return qmodel.eval()


def quant_layers(qmodel: nn.Module) -> list[str]:
    """Names of the quantized layers of a model (those with an input and a weight quantizer)."""
    return [n for n, m in qmodel.named_modules() if hasattr(m, "_input_quantizer")]


def _amax_kwargs(method: str, percentile: float) -> dict[str, float]:
    """Keyword arguments of the histogram calibrator's compute_amax for one method."""
    if method == "percentile":
        return {"percentile": percentile}
    return {"stride": SEARCH_STRIDE} if method in ("entropy", "mse") else {}


@torch.no_grad()
def calibrate(qmodel: nn.Module, data: Any, method: str = "max", *, percentile: float = 99.99,
              split: str = "calib", max_batches: int | None = None) -> nn.Module:
    """Collect statistics on `data` with quantization off, then load each quantizer's amax; returns qmodel."""
    require_choice(method, METHODS, "method")
    qs = list(quantizers(qmodel))
    if not qs:
        raise InputError("this model has no quantizers; build it with helpers.model_quant.ptq.quantize_model first.")
    hist = any(type(q._calibrator).__name__ == "HistogramCalibrator" for _, q in qs if q._calibrator is not None)
    if (method != "max") != hist:
        need = "histogram" if method != "max" else "max"
        raise InputError(f"method={method!r} needs {need} calibrators: quantize_model(..., calib={need!r}).")
    for _, q in qs:
        if q._calibrator is not None:
            q.disable_quant()
            q.enable_calib()
            q._calibrator.reset()
    dev = model_device(qmodel)
    qmodel.eval()
    for i, (x, _) in enumerate(_as_loader(data, split, batch_size=256)):
        if max_batches is not None and i >= max_batches:
            break
        qmodel(x.to(dev))
    for _, q in qs:
        if q._calibrator is None:
            continue
        is_hist = type(q._calibrator).__name__ == "HistogramCalibrator"
        load_calib_amax(q, method if is_hist else "max", **_amax_kwargs(method, percentile))
        q.enable_quant()
        q.disable_calib()
    return qmodel.to(dev)


def ptq(model: nn.Module, data: Any, *, method: str = "max", per_channel: bool = True, weight_bits: int = 8,
        act_bits: int = 8, fold_bn: bool = True, skip: Iterable[str] = (), percentile: float = 99.99) -> nn.Module:
    """Quantize and calibrate `model` on `data`'s calibration split in one call; returns the fake-quant model."""
    require_choice(method, METHODS, "method")
    qmodel = quantize_model(model, per_channel=per_channel, weight_bits=weight_bits, act_bits=act_bits,
                            calib="max" if method == "max" else "histogram", fold_bn=fold_bn, skip=skip)
    return calibrate(qmodel.to(model_device(model)), data, method, percentile=percentile)


def set_quant_enabled(qmodel: nn.Module, enabled: bool, layers: Iterable[str] | None = None) -> None:
    """Switch the quantizers of the named layers (default: all) on or off, e.g. to keep layers in FP."""
    names = quant_layers(qmodel) if layers is None else list(layers)
    known = set(quant_layers(qmodel))
    for n in names:
        if n not in known:
            raise InputError(f"{n!r} is not a quantized layer; choose from {sorted(known)}.")
        mod = qmodel.get_submodule(n)
        for q in (mod._input_quantizer, mod._weight_quantizer):
            q.enable() if enabled else q.disable()


def score(model: nn.Module, data: Any, split: str = "test") -> tuple[float, np.ndarray]:
    """(top-1 accuracy % as ``helpers.models.train.evaluate`` gives it, per-sample correctness as a bool array)."""
    logits, labels = predict(model, data, split)
    right = logits.argmax(1) == labels
    return float(right.float().mean() * 100), right.numpy()


def accuracy_table(model: nn.Module, data: Any, *, methods: Sequence[str] = METHODS,
                   granularities: Sequence[bool] = (False, True), split: str = "test",
                   correct: dict[tuple[str, str], np.ndarray] | None = None, **kw: Any) -> list[dict[str, Any]]:
    """Rows {weights, calibrator, accuracy %, delta pts} for each weight granularity x calibrator, plus FP32.

    Histogram methods share one calibration pass per granularity (amax is recomputed from the histograms).
    A dict passed as `correct` is filled with each row's per-sample correctness, keyed (weights, calibrator),
    for paired comparisons on the same samples (``helpers.spread.bootstrap_paired``).
    """
    for m in methods:
        require_choice(m, METHODS, "method")
    right = {} if correct is None else correct
    fp32, right["FP32", "-"] = score(model, data, split)
    rows: list[dict[str, Any]] = [{"weights": "FP32", "calibrator": "-", "accuracy %": fp32, "delta pts": 0.0}]
    groups = (("max", [m for m in methods if m == "max"]), ("histogram", [m for m in methods if m != "max"]))
    todo = [(pc, calib, group) for pc in granularities for calib, group in groups if group]
    bar = tqdm(total=sum(len(g) for *_, g in todo), desc="PTQ: calibrate and evaluate each calibrator", leave=False)
    for per_channel, calib, group in todo:
        qmodel = quantize_model(model, per_channel=per_channel, calib=calib, **kw).to(model_device(model))
        calibrate(qmodel, data, group[0])
        for i, method in enumerate(group):
            if i:
                recompute_amax(qmodel, method)
            weights = "per-channel" if per_channel else "per-tensor"
            acc, right[weights, method] = score(qmodel, data, split)
            rows.append({"weights": weights, "calibrator": method, "accuracy %": acc, "delta pts": fp32 - acc})
            bar.update()
    bar.close()
    return rows


def recompute_amax(qmodel: nn.Module, method: str, percentile: float = 99.99) -> None:
    """Recompute input amax from the histograms already collected, with another method (no new passes)."""
    require_choice(method, METHODS[1:], "method")
    for _, q in quantizers(qmodel):
        if q._calibrator is not None and type(q._calibrator).__name__ == "HistogramCalibrator":
            load_calib_amax(q, method, **_amax_kwargs(method, percentile))
    qmodel.to(model_device(qmodel))  # histogram amax comes back on the CPU


def model_size(model: nn.Module, weight_bits: int | None = None) -> dict[str, float]:
    """Bytes of the parameters: FP32 as stored, or with quantized layers' weights at `weight_bits` plus scales."""
    total = 0.0
    quantized = {id(m.weight) for m in model.modules() if hasattr(m, "_weight_quantizer")} if weight_bits else set()
    for m in model.modules():
        for name, p in m.named_parameters(recurse=False):
            if id(p) in quantized and name == "weight":
                total += p.numel() * weight_bits / 8 + p.shape[0] * 4  # integer weights + one FP32 scale per channel
            else:
                total += p.numel() * p.element_size()
    return {"bytes": total, "kib": total / 1024}


@torch.no_grad()
def scratch_ptq(model: nn.Module, data: Any, *, method: str = "max", per_channel: bool = True,
                fold_bn: bool = True, bits: int = 8) -> nn.Module:
    """The same PTQ with the course's from-scratch quantizers (helpers.quant) instead of pytorch-quantization.

    A BN-folded copy whose Conv/Linear weights are fake-quantized in place and whose inputs are
    fake-quantized by a forward pre-hook, with amax from helpers.quant.calibrators.
    """
    from helpers.quant.calibrators import amax_max
    from helpers.quant.calibrators import calibrate as amax_of
    from helpers.quant.core import fake_quantize

    require_choice(method, METHODS, "method")
    qmodel = fold_batchnorm(model) if fold_bn else copy.deepcopy(model).eval()
    layers = [(n, m) for n, m in qmodel.named_modules() if isinstance(m, QUANTIZABLE)]
    seen: dict[str, list[torch.Tensor]] = {n: [] for n, _ in layers}
    hooks = [m.register_forward_pre_hook(lambda mod, inp, n=n: seen[n].append(inp[0].detach().cpu()))
             for n, m in layers]
    dev = model_device(qmodel)
    for x, _ in _as_loader(data, "calib", batch_size=256):
        qmodel(x.to(dev))
    for h in hooks:
        h.remove()
    top = 2 ** (bits - 1) - 1
    for n, m in layers:
        a_in = max(amax_of([t.numpy() for t in seen[n]], method, num_bits=bits), 1e-12)
        w = m.weight.data
        a_w = amax_max(w, axis=0) if per_channel else amax_max(w)
        s_w = torch.as_tensor(a_w, dtype=torch.float32).clamp_min(1e-12) / top
        m.weight.data = fake_quantize(w, s_w.to(w.device), axis=0 if per_channel else None, bits=bits, narrow=True)
        m.register_forward_pre_hook(
            lambda mod, inp, s=a_in / top: (fake_quantize(inp[0], torch.tensor(s, device=inp[0].device), bits=bits,
                                                          narrow=True),))
    return qmodel


def plot_accuracy_table(rows: Sequence[dict[str, Any]], *, title: str, device: str | None = None,
                        note: str = "", name: str | None = None) -> Any:
    """Grouped bars of accuracy_table() rows: one group per calibrator, one bar per weight granularity."""
    import matplotlib.pyplot as plt

    from helpers import plots

    fp32 = next(r["accuracy %"] for r in rows if r["weights"] == "FP32")
    methods = list(dict.fromkeys(r["calibrator"] for r in rows if r["weights"] != "FP32"))
    grans = list(dict.fromkeys(r["weights"] for r in rows if r["weights"] != "FP32"))
    fig, ax = plt.subplots()
    width = 0.8 / max(1, len(grans))
    for i, g in enumerate(grans):
        acc = {r["calibrator"]: r["accuracy %"] for r in rows if r["weights"] == g}
        xs = [j + (i - (len(grans) - 1) / 2) * width for j in range(len(methods))]
        bars = ax.bar(xs, [acc.get(m, float("nan")) for m in methods], width, label=g, color=plots.PALETTE[i])
        ax.bar_label(bars, fmt="%.1f", fontsize=7)
    ax.axhline(fp32, ls="--", color="0.3", lw=1, label=f"FP32 {fp32:.1f}%")
    low = min(r["accuracy %"] for r in rows)
    ax.set_ylim(max(0.0, min(low, fp32) - 5), 100)
    ax.set_xticks(range(len(methods)), methods)
    ax.set(title=title, ylabel="test accuracy %", xlabel="activation calibrator")
    if ax.get_ylim()[0] > 50:
        plots.zoomed(ax, "the bars differ by points, not tens of points")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    plots.label_device(ax, device, note)
    fig.tight_layout()
    plots.save_figure(fig, name or title)
    return fig
