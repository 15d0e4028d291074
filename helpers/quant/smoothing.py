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


def smoothquant_scales(act_amax: torch.Tensor, w_amax: torch.Tensor, alpha: float = 0.5) -> torch.Tensor:
    """s[j] = act_amax[j]**alpha / w_amax[j]**(1 - alpha), per input channel, clamped away from zero."""
    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"alpha must lie in [0, 1] (0: all difficulty stays in the activations), got {alpha}.")
    if act_amax.shape != w_amax.shape or act_amax.ndim != 1:
        raise InputError(f"act_amax and w_amax need one value per input channel, got shapes "
                         f"{tuple(act_amax.shape)} and {tuple(w_amax.shape)}.")
    a, w = act_amax.float().clamp_min(1e-5), w_amax.float().clamp_min(1e-5)
    return (a.pow(alpha) / w.pow(1 - alpha)).clamp_min(1e-5)


def weight_column_amax(weights: Sequence[torch.Tensor]) -> torch.Tensor:
    """max |w[:, j]| over every output row of every weight that reads the same input."""
    return torch.cat([w.detach().float() for w in weights]).abs().amax(dim=0)


def awq_scales(act_mean: torch.Tensor, alpha: float) -> torch.Tensor:
    """s = act_mean**alpha, normalized so that sqrt(max(s) * min(s)) = 1 (AWQ's normalization)."""
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
    if x.ndim != 2 or not weights or any(w.shape[1] != x.shape[1] for w in weights):
        raise InputError(f"awq_search needs inputs (tokens, K) and weights (N, K) with the same K, got "
                         f"{tuple(x.shape)} and {[tuple(w.shape) for w in weights]}.")
    x = x.float()
    mean = x.abs().mean(dim=0)
    refs = [x @ w.float().T for w in weights]
    errors = []
    for alpha in grid:
        s = awq_scales(mean, alpha)
        err = sum(float(((x / s) @ fake_quant(w.float() * s).T - r).pow(2).mean()) for w, r in zip(weights, refs))
        errors.append(err)
    best = min(range(len(grid)), key=errors.__getitem__)
    return float(grid[best]), awq_scales(mean, grid[best]), errors
