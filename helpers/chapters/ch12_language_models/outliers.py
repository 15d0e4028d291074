"""Activation outliers: where they appear in the tiny LM, and SmoothQuant and AWQ on outliers made on purpose.

Large language models (billions of parameters) grow a few activation channels far larger than the rest; a
per-token INT8 scale then spends its range on them. A small model trained briefly may have none, so
`measured` reports what this one has, and `injected_study` builds the same function with one channel
scaled up on purpose (`helpers.model_quant.lm_quant.inject_outlier`), labelled as such.

Serves: chapter 12.
"""

from __future__ import annotations

import math

import torch
from tqdm.auto import tqdm

from helpers.chapters.ch12_language_models.quality import pct_interval, quantize, verdict, window_nll
from helpers.findings import NOT_RESOLVED
from helpers.model_quant import lm_quant
from helpers.models.tiny_lm import TinyLM
from helpers.quant import smoothing

ALPHAS = (0.25, 0.5, 0.75)


def measured(model: TinyLM, calib: torch.Tensor) -> tuple[list[dict], str]:
    """Outlier ratio (largest channel max over the median channel max) per Linear input, and a summary."""
    rows = sorted(lm_quant.outlier_stats(lm_quant.linear_inputs(model, calib)), key=lambda r: -r["outlier ratio"])
    top = rows[0]
    strong = [r for r in rows if r["outlier ratio"] >= 20]
    text = (f"The largest activation channel of this model is {top['outlier ratio']:.1f}× the median channel, at "
            f"the input of {top['layer input of']} (channel {top['top channel']}). "
            + (f"{len(strong)} layer inputs have a channel 20× the median or more: real outliers."
               if strong else "No layer input reaches 20×: this small model has no strong outlier channels, so the "
               "outlier lesson needs the model with an outlier made on purpose below."))
    return rows, text


def pick_channel(model: TinyLM, calib: torch.Tensor, block: int = 0) -> int:
    """The channel of block `block`'s attention input that is already the largest (made larger below)."""
    x = lm_quant.linear_inputs(model, calib)[f"blocks.{block}.attn.q"]
    return int(x.abs().amax(dim=0).argmax())


CASES: tuple[tuple[str, dict], ...] = (
    ("W8A16 per channel", {"scheme": "w8a16"}), ("W8A8 INT8 per token", {"scheme": "w8a8"}),
    *((f"W8A8 + SmoothQuant α={a}", {"scheme": "w8a8", "smooth": "smoothquant", "alpha": a}) for a in ALPHAS),
    ("W4A16 g128", {"scheme": "w4a16", "group_size": 128}),
    ("W4A16 g128 + AWQ-style", {"scheme": "w4a16", "group_size": 128, "smooth": "awq"}),
)


def injected_study(model: TinyLM, heldout: torch.Tensor, calib: torch.Tensor, factor: float = 100.0,
                   block: int = 0, cases: tuple[tuple[str, dict], ...] = CASES) -> tuple[list[dict], TinyLM]:
    """Perplexity of schemes on the model with an outlier channel made on purpose (same FP32 function)."""
    channel = pick_channel(model, calib, block)
    bad = lm_quant.inject_outlier(model, block, channel, factor)
    def row(name: str, label: str, m: TinyLM) -> dict:
        nll = window_nll(m, heldout)
        return {"model": name, "scheme": label, "perplexity": math.exp(nll.mean()), "_nll": nll}

    rows = [row("trained (no change)", "FP32", model), row(f"outlier ×{factor:g} on purpose", "FP32", bad)]
    for label, kw in tqdm(cases, desc="schemes on both models", leave=False):
        for name, m in (("trained (no change)", model), (f"outlier ×{factor:g} on purpose", bad)):
            rows.append(row(name, label, quantize(m, kw, calib)[0]))
    base = {r["model"]: r["perplexity"] for r in rows if r["scheme"] == "FP32"}
    for r in rows:
        r["vs its FP32 %"] = 100 * (r["perplexity"] / base[r["model"]] - 1)
    return rows, bad


def _against(rows: list[dict], a: str, b: str) -> str:
    """The paired interval of scheme a over scheme b on the outlier model ('' without per-window losses)."""
    ra, rb = (next(r for r in rows if r["model"].startswith("outlier") and r["scheme"] == s) for s in (a, b))
    if "_nll" not in ra or "_nll" not in rb:
        return ""
    ci = pct_interval(ra["_nll"], rb["_nll"])
    return f" ({NOT_RESOLVED + ': ' if ci.contains(0.0) else ''}{ci.lo:+.2f} to {ci.hi:+.2f} % against {b}, {ci.method})"


def _vs_fp32(rows: list[dict], scheme: str) -> str:
    """'+1.91 % (a small cost, +1.3 to +2.4 % against FP32, …)' on the outlier model, or the interval said to be
    not resolved at this noise when it holds zero ('+x.xx %' alone without per-window losses)."""
    ra, rb = (next((r for r in rows if r["model"].startswith("outlier") and r["scheme"] == s), {})
              for s in (scheme, "FP32"))
    d = ra["vs its FP32 %"]
    if "_nll" not in ra or "_nll" not in rb:
        return f"{d:+.2f} %"
    ci = pct_interval(ra["_nll"], rb["_nll"])
    word = NOT_RESOLVED if ci.contains(0.0) else verdict(d, ci)
    return f"{d:+.2f} % ({word}: {ci.lo:+.2f} to {ci.hi:+.2f} % against FP32, {ci.method})"


def summary(rows: list[dict]) -> str:
    """What the injected outlier did to W8A8, and what SmoothQuant and AWQ recovered, from the numbers."""
    def get(model_prefix: str, scheme: str) -> float:
        return next(r["vs its FP32 %"] for r in rows if r["model"].startswith(model_prefix) and r["scheme"] == scheme)

    best_a, best = min(((a, get("outlier", f"W8A8 + SmoothQuant α={a}")) for a in ALPHAS), key=lambda t: t[1])
    awq = get("outlier", "W4A16 g128 + AWQ-style")
    return (f"With the outlier channel, W8A8 per token costs {_vs_fp32(rows, 'W8A8 INT8 per token')} against "
            f"{get('trained', 'W8A8 INT8 per token'):+.2f} % on the trained model; SmoothQuant brings it to "
            f"{best:+.2f} % at α={best_a}{_against(rows, f'W8A8 + SmoothQuant α={best_a}', 'W8A8 INT8 per token')}. "
            f"At 4 bits the same channel makes plain rounding cost {_vs_fp32(rows, 'W4A16 g128')}, and the "
            f"activation-aware scales {awq:+.2f} %{_against(rows, 'W4A16 g128 + AWQ-style', 'W4A16 g128')}. "
            f"W8A16 keeps activations in floating point: {_vs_fp32(rows, 'W8A16 per channel')}.")


def channel_ranges(model: TinyLM, calib: torch.Tensor, block: int = 0, alpha: float = 0.5) -> dict[str, torch.Tensor]:
    """Per-channel max |x| of block `block`'s attention input, before and after SmoothQuant's division."""
    x = lm_quant.linear_inputs(model, calib)[f"blocks.{block}.attn.q"]
    attn = model.blocks[block].attn
    s = smoothing.smoothquant_scales(x.abs().amax(dim=0), smoothing.weight_column_amax(
        [attn.q.weight, attn.k.weight, attn.v.weight]), alpha)
    return {"before": x.abs().amax(dim=0), f"after SmoothQuant (α={alpha})": (x / s).abs().amax(dim=0)}
