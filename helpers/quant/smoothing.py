"""Moving difficulty between activations and weights: SmoothQuant's scale and an AWQ-style search.

Both rewrite x @ w.T as (x / s) @ (w * s).T: the same product in exact arithmetic, with input channel j
of the activations divided by s[j] and column j of the weights multiplied by it. `s` folds into the
layer before (an RMSNorm gain) in a deployment.
    SmoothQuant  s[j] = max|x_j|^α / max|w_j|^(1-α): flattens activation outlier channels so that
                 per-token INT8 activations work (W8A8); α = 0.5 splits the range evenly.
    AWQ-style    s[j] = mean|x_j|^α: enlarges the weight columns that meet large activations before
                 4-bit rounding (W4A16); α is chosen per layer by the output error on calibration data.

Serves: core — used by chapter 12 and lab 10.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from helpers.errors import InputError
from helpers.validation import require_callable, require_finite, require_float_tensor, require_real, require_tensor


def smoothquant_scales(act_amax: torch.Tensor, w_amax: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:
    """s[j] = act_amax[j]**alpha / w_amax[j]**(1 - alpha), per input channel, clamped away from zero."""
    alpha = require_real(alpha, "alpha (0: all difficulty stays in the activations)", 0.0, 1.0)
    require_tensor(act_amax, "act_amax")
    require_tensor(w_amax, "w_amax")
    if act_amax.shape != w_amax.shape or act_amax.ndim != 1:
        raise InputError(f"act_amax and w_amax need one value per input channel, got shapes "
                         f"{tuple(act_amax.shape)} and {tuple(w_amax.shape)}.")
    _check_amax(act_amax, "act_amax")
    _check_amax(w_amax, "w_amax")
    a, w = act_amax.float().clamp_min(1e-5), w_amax.float().clamp_min(1e-5)
    return (a.pow(alpha) / w.pow(1 - alpha)).clamp_min(1e-5)


def weight_column_amax(weights: Sequence[torch.Tensor]) -> torch.Tensor:
    """max |w[:, j]| over every output row of every weight that reads the same input."""
    _check_weights(weights)
    return torch.cat([w.detach().float() for w in weights]).abs().amax(dim=0)


def awq_scales(act_mean: torch.Tensor, alpha: float) -> torch.Tensor:
    """s = act_mean**alpha, normalized so that sqrt(max(s) * min(s)) = 1 (AWQ's normalization)."""
    alpha = require_real(alpha, "alpha", 0.0, 1.0)
    _check_amax(act_mean, "act_mean")
    s = act_mean.float().clamp_min(1e-4).pow(alpha)
    return s / (s.max() * s.min()).sqrt()


def awq_search(x: torch.Tensor, weights: Sequence[torch.Tensor],
               fake_quant: Callable[[torch.Tensor], torch.Tensor],
               grid: Sequence[float] = tuple(i / 10 for i in range(11))) -> tuple[float, torch.Tensor, list[float]]:
    """The α of `grid` whose scales give the smallest output error of the fake-quantized weights on x.

    x: calibration inputs (tokens, K); weights: the layers that read x; fake_quant: weight -> its
    quantized-then-dequantized copy. Returns (alpha, scales, error per grid point); α = 0 is plain
    round-to-nearest, so the search can only match or beat it on the calibration data.
    """
    require_float_tensor(x, "x", (2,), "calibration inputs (tokens, K)")
    require_finite(x, "x")
    _check_weights(weights)
    if any(w.shape[1] != x.shape[1] for w in weights):
        raise InputError(f"awq_search needs inputs (tokens, K) and weights (N, K) with the same K, got "
                         f"{tuple(x.shape)} and {[tuple(w.shape) for w in weights]}.")
    require_callable(fake_quant, "fake_quant", "lambda w: quantize_w4(w, 128).dequantize()")
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence) or not grid:
        raise InputError(f"grid must be a non-empty list of alphas in [0, 1], got {grid!r}; e.g. grid=(0, 0.5, 1).")
    grid = [require_real(a, "every alpha of grid", 0.0, 1.0) for a in grid]
    x = x.float()
    mean = x.abs().mean(dim=0)
    refs = [x @ w.float().T for w in weights]
    errors = []
    for alpha in grid:
        s = awq_scales(mean, alpha)
        errors.append(sum(float(((x / s) @ _fake(fake_quant, w.float() * s).T - r).pow(2).mean())
                          for w, r in zip(weights, refs)))
    best = min(range(len(grid)), key=errors.__getitem__)
    return float(grid[best]), awq_scales(mean, grid[best]), errors


def _check_amax(t: torch.Tensor, name: str) -> None:
    """A non-empty 1-D float tensor of finite values >= 0 (ranges, one per input channel)."""
    require_float_tensor(t, name, (1,), "one value per input channel (a 1-D float tensor)")
    require_finite(t, name)
    if bool((t < 0).any()):
        raise InputError(f"{name} holds negative values; pass ranges of |x| (e.g. x.abs().amax(dim=0)).")


def _check_weights(weights: Sequence[torch.Tensor]) -> None:
    """A non-empty list of finite 2-D float weights (N, K) with one K."""
    if not isinstance(weights, (list, tuple)) or not weights:
        raise InputError(f"weights must be a non-empty list of (N, K) weights that read one input, got "
                         f"{type(weights).__name__}; wrap a single weight as [w].")
    for i, w in enumerate(weights):
        require_float_tensor(w, f"weights[{i}]", (2,), "a 2-D float weight (N, K)")
        require_finite(w, f"weights[{i}]")
    if len({w.shape[1] for w in weights}) > 1:
        raise InputError(f"weights read inputs of different sizes K, shapes {[tuple(w.shape) for w in weights]}; "
                         "group only the layers that read the same input.")


def _fake(fake_quant: Callable[[torch.Tensor], torch.Tensor], w: torch.Tensor) -> torch.Tensor:
    """fake_quant(w), which must be a tensor of w's shape."""
    out = fake_quant(w)
    if not isinstance(out, torch.Tensor) or out.shape != w.shape:
        raise InputError(f"fake_quant must return the quantized-then-dequantized weight, a tensor of shape "
                         f"{tuple(w.shape)}; got {type(out).__name__} {tuple(getattr(out, 'shape', ()))}.")
    require_finite(out, "fake_quant(w)")
    return out
