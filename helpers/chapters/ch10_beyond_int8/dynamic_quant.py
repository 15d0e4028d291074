"""Dynamic vs static INT8 for Linear layers (torch.ao on the CPU), and the right way to update a
running activation scale.

Dynamic: weights are INT8 ahead of time; each call measures the activation range, picks a scale and
quantizes on the fly (no calibration, one extra reduction per layer per call).
Static: activation scales come from a calibration pass and stay fixed (no reduction, but a range
that is wrong for the data clips or wastes resolution).

The seed's "runtime scale update" did `atomicAdd(&scale, m*scale + (1-m)*amax)` from every thread.
That adds the EMA to the old value ((1+m)·s + (1-m)·x: it grows without bound) and reads `scale`
while other threads change it. The right update is two steps: reduce the batch's amax (atomicMax
or a tree reduction), then one thread sets scale = m·scale + (1-m)·amax/qmax.

Serves: chapter 10 (also lab 09).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numba import cuda

from helpers.bench import Rounds, interleaved
from helpers.errors import InputError
from helpers.quant.calibrators import _check_momentum, ema_amax, ema_update  # noqa: F401  (re-used here)
from helpers.validation import require_float


def atomic_add_ema(batches: Iterable[np.ndarray], momentum: float = 0.9) -> np.ndarray:
    """The seed's bug, serialised as atomics would run it: every element adds m*s + (1-m)*|x| to s."""
    _check_momentum(momentum)
    s, out = 0.0, []
    for b in batches:
        for v in np.abs(np.asarray(b, dtype=np.float64)).ravel():
            s = s + (momentum * s + (1 - momentum) * v)
        out.append(s)
    return np.asarray(out)


def share_in_range(wrong: Sequence[float], right: Sequence[float], factor: float = 2.0) -> float:
    """Fraction of batches where a running scale stays finite and within `factor`x of the correct one."""
    w, r = np.asarray(wrong, dtype=np.float64), np.asarray(right, dtype=np.float64)
    if w.shape != r.shape or not w.size:
        raise InputError(f"need two equally long, non-empty scale sequences; got {w.shape} and {r.shape}.")
    ok = np.isfinite(w) & (w <= r * factor) & (w >= r / factor)
    return float(ok.mean())


@cuda.jit
def _wrong_ema_kernel(x, scale, momentum, one_minus):
    """The seed's kernel: each thread atomically ADDS the EMA expression (wrong twice over)."""
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(scale, 0, momentum * scale[0] + one_minus * abs(x[i]))


@cuda.jit
def _amax_kernel(x, amax):
    """Step 1 of the right update: the batch's max |x| with atomicMax."""
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.max(amax, 0, abs(x[i]))


@cuda.jit
def _ema_kernel(amax, scale, momentum, one_minus, inv_qmax):
    """Step 2: one thread blends the batch amax into the running scale."""
    if cuda.grid(1) == 0:
        scale[0] = momentum * scale[0] + one_minus * amax[0] * inv_qmax


def gpu_scale_updates(batches: Sequence[np.ndarray], momentum: float = 0.9, qmax: float = 127.0,
                      threads: int = 64) -> dict[str, np.ndarray]:
    """Run the wrong and the right scale-update kernels over batches (GPU or CUDA simulator).

    Returns the scale after each batch: 'wrong' (atomicAdd of the EMA) and 'right' (amax, then EMA),
    both starting from the first batch's amax / qmax.
    """
    _check_momentum(momentum)
    if not batches:
        raise InputError("gpu_scale_updates needs at least one batch.")
    arrays = []
    for b in batches:
        require_float(np.asarray(b), "batch")
        arrays.append(np.ascontiguousarray(b, dtype=np.float32).ravel())
    init = np.float32(np.abs(arrays[0]).max() / qmax)
    m, one_minus, inv_q = np.float32(momentum), np.float32(1 - momentum), np.float32(1 / qmax)
    wrong = cuda.to_device(np.array([init], dtype=np.float32))
    right = cuda.to_device(np.array([init], dtype=np.float32))
    out: dict[str, list[float]] = {"wrong": [float(init)], "right": [float(init)]}
    with warnings.catch_warnings():  # the wrong update overflows to inf: that is the point
        warnings.simplefilter("ignore", RuntimeWarning)
        for a in arrays[1:]:
            d = cuda.to_device(a)
            blocks = (a.size + threads - 1) // threads
            _wrong_ema_kernel[blocks, threads](d, wrong, m, one_minus)
            amax = cuda.to_device(np.zeros(1, dtype=np.float32))
            _amax_kernel[blocks, threads](d, amax)
            _ema_kernel[1, 1](amax, right, m, one_minus, inv_q)
            out["wrong"].append(float(wrong.copy_to_host()[0]))
            out["right"].append(float(right.copy_to_host()[0]))
    return {k: np.asarray(v, dtype=np.float32) for k, v in out.items()}


# --------------------------------------------------------------------------- torch.ao INT8 Linear
def dynamic_int8(model: Any) -> Any:
    """A copy of `model` whose nn.Linear layers are torch.ao dynamic INT8 (weights int8, scales per call)."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise InputError(f"dynamic_int8 needs a torch.nn.Module, got {type(model).__name__}.")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(copy.deepcopy(model).eval(), {torch.nn.Linear}, dtype=torch.qint8)


class StaticInt8Linear:
    """Builds the static replacement of one nn.Linear: fixed input and output scales from calibration."""

    @staticmethod
    def build(linear: Any, in_range: tuple[float, float], out_range: tuple[float, float]) -> Any:
        """quantize(x, calibrated scale) -> fbgemm INT8 Linear (per-channel weights) -> dequantize."""
        import torch
        from torch import nn

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch.ao.nn.quantized as nnq

            def affine(lo: float, hi: float) -> tuple[float, int]:
                lo, hi = min(lo, 0.0), max(hi, 0.0)
                scale = max(hi - lo, 1e-8) / 255.0
                return scale, int(round(-lo / scale))

            w = linear.weight.detach().float()
            w_scale = w.abs().amax(dim=1).clamp_min(1e-8) / 127.0
            qw = torch.quantize_per_channel(w, w_scale, torch.zeros_like(w_scale, dtype=torch.long), 0, torch.qint8)
            q = nnq.Linear(linear.in_features, linear.out_features, dtype=torch.qint8)
            q.set_weight_bias(qw, None if linear.bias is None else linear.bias.detach().float())
            q.scale, q.zero_point = affine(*out_range)
            in_scale, in_zp = affine(*in_range)

        class _Static(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.q = q

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                qx = torch.quantize_per_tensor(x, in_scale, in_zp, torch.quint8)
                return self.q(qx).dequantize()

        return _Static()


def static_int8(model: Any, calib_batches: Iterable[Any]) -> Any:
    """A copy of `model` with every nn.Linear replaced by a static INT8 Linear calibrated (min/max) on calib_batches."""
    import torch

    model = copy.deepcopy(model).eval()
    ranges: dict[str, list[float]] = {}
    hooks = []

    def watch(name: str) -> Any:
        def hook(_m: Any, inp: tuple, out: torch.Tensor) -> None:
            r = ranges.setdefault(name, [np.inf, -np.inf, np.inf, -np.inf])
            x = inp[0]
            r[0], r[1] = min(r[0], float(x.min())), max(r[1], float(x.max()))
            r[2], r[3] = min(r[2], float(out.min())), max(r[3], float(out.max()))
        return hook

    linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    if not linears:
        raise InputError("static_int8 found no nn.Linear layers in the model.")
    hooks = [m.register_forward_hook(watch(n)) for n, m in linears.items()]
    seen = 0
    with torch.inference_mode():
        for x in calib_batches:
            model(x[0] if isinstance(x, (tuple, list)) else x)
            seen += 1
    for h in hooks:
        h.remove()
    if not seen:
        raise InputError("static_int8 needs at least one calibration batch.")
    for name, lin in linears.items():
        r = ranges[name]
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        setattr(parent, name.rsplit(".", 1)[-1], StaticInt8Linear.build(lin, (r[0], r[1]), (r[2], r[3])))
    return model


def speed_encoder(d: int = 256, layers: int = 4, seq_len: int = 128) -> Any:
    """A randomly initialised, BERT-shaped EncoderSmall big enough for CPU timings to mean something."""
    from helpers.models.encoder import ENCODER_SMALL, EncoderSmall

    shape = ENCODER_SMALL.with_(d_model=d, d_ff=4 * d, n_layers=layers)  # 4 heads, 64 amplitude tokens
    return EncoderSmall(seq_len=seq_len, shape=shape).eval()


def time_variants(models: dict[str, Any], x: Any, repeats: int = 10) -> Rounds:
    """The timing of each model on the same input, one call of each per round (``helpers.bench.interleaved``)."""
    import torch

    with torch.inference_mode():
        return interleaved({name: (lambda m=m: m(x)) for name, m in models.items()}, rounds=repeats, clock="cpu",
                           warmup=2)


def runtime_scale_cost(x: Any, linear: Any, repeats: int = 50) -> dict[str, float]:
    """What a dynamic scale costs per call: the amax reduction vs the INT8 Linear itself (ms, CPU)."""
    import torch

    require_float(x, "x")
    dyn = dynamic_int8(torch.nn.Sequential(linear))[0]
    with torch.inference_mode():
        t = interleaved({"amax": lambda: x.abs().amax(), "linear": lambda: dyn(x)}, rounds=repeats, clock="cpu",
                        warmup=2)
    t_amax, t_lin = t.median_s("amax") * 1e3, t.median_s("linear") * 1e3
    return {"amax ms": t_amax, "dynamic linear ms": t_lin, "share": t_amax / t_lin}


def accuracy_study(model: Any, data: Any) -> list[dict]:
    """Test accuracy of FP32, dynamic INT8 and static INT8 (min/max calibrated on data.calib) Linears."""
    from tqdm.auto import tqdm

    from helpers.models.train import evaluate

    calib = [data.calib.tensors[0][i:i + 128] for i in range(0, len(data.calib), 128)]
    builders = {"FP32": lambda: model, "dynamic INT8": lambda: dynamic_int8(model),
                "static INT8": lambda: static_int8(model, calib)}
    return [{"variant": name, "accuracy %": evaluate(build(), data)}
            for name, build in tqdm(builders.items(), desc="INT8 Linear layers: build and evaluate", leave=False)]


def cpu_speed_study(d: int = 256, layers: int = 2, seq_len: int = 64, batch: int = 32,
                    repeats: int = 5) -> dict[str, Any]:
    """FP32, dynamic and static INT8 encoders timed on the CPU in one run, and the runtime amax's share.

    Returns {'ms': {variant: median ms}, 'vs FP32': {variant: FP32 ÷ variant time, the median of the rounds},
    'spread': {variant: that ratio's spread over the rounds}, 'amax share': share of one dynamic INT8 Linear
    spent on its amax, with 'amax ms' and 'dynamic linear ms'}.
    """
    import torch
    from tqdm.auto import tqdm

    bar = tqdm(total=3, desc="dynamic vs static INT8 on the CPU", leave=False)
    big = speed_encoder(d=d, layers=layers, seq_len=seq_len)
    x = torch.randn(batch, 1, seq_len)
    bar.set_postfix_str("calibrating the static model")
    variants = {"FP32": big, "dynamic INT8": dynamic_int8(big),
                "static INT8": static_int8(big, [torch.randn(batch, 1, seq_len) for _ in range(2)])}
    bar.update()
    bar.set_postfix_str("timing the three models")
    t = time_variants(variants, x, repeats=repeats)
    ratios = {k: t.ratio("FP32", k) for k in variants if k != "FP32"}
    bar.update()
    bar.set_postfix_str("timing the runtime amax")
    cost = runtime_scale_cost(torch.randn(batch * seq_len, d), torch.nn.Linear(d, 4 * d))
    bar.update()
    bar.close()
    return {"ms": {k: t.median_s(k) * 1e3 for k in variants}, "vs FP32": {k: r for k, (r, _) in ratios.items()},
            "spread": {k: sp for k, (_, sp) in ratios.items()}, "amax share": cost["share"],
            "amax ms": cost["amax ms"], "dynamic linear ms": cost["dynamic linear ms"]}
