"""Chapter 12's quality table: perplexity of the tiny LM under every scheme, with the lesson each row teaches.

Every lesson is a sentence filled in from the measured numbers (the verdict words follow fixed thresholds
on the change in perplexity: < 0.2 % negligible, < 1 % practically free, < 3 % small, < 10 % visible, else large;
a change whose interval reaches across a threshold names both ends' words).

Noise: every row keeps its per-window losses (``_nll``), and a paired bootstrap over the held-out windows
gives each comparison its 95 % interval. Every lesson that compares two rows prints that interval, and a
change whose interval contains zero, against FP32 or between two rows, is "not resolved at this noise",
never a finding.

Serves: chapter 12.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from helpers import spread
from helpers.findings import NOT_RESOLVED
from helpers.model_quant import lm_quant
from helpers.models.tiny_lm import TinyLM

PER_ROW = 1 << 20  # a group size larger than any K: one scale per output row
SPECS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("FP32", {}),
    ("FP16", {"scheme": "fp16"}),
    ("W8A16 per channel", {"scheme": "w8a16"}),
    ("W4A16 per channel", {"scheme": "w4a16", "group_size": PER_ROW}),
    ("W4A16 g128", {"scheme": "w4a16", "group_size": 128}),
    ("W4A16 g64", {"scheme": "w4a16", "group_size": 64}),
    ("W4A16 g32", {"scheme": "w4a16", "group_size": 32}),
    ("W4A16 g128 + AWQ-style scales", {"scheme": "w4a16", "group_size": 128, "smooth": "awq"}),
    ("W3A16 g32", {"scheme": "w4a16", "group_size": 32, "bits": 3}),
    ("W2A16 g32", {"scheme": "w4a16", "group_size": 32, "bits": 2}),
    ("W8A8 INT8 per token", {"scheme": "w8a8"}),
    ("W8A8 INT8 per tensor", {"scheme": "w8a8_tensor"}),
    ("W8A8 INT8 + SmoothQuant α=0.5", {"scheme": "w8a8", "smooth": "smoothquant"}),
    ("W8A8 FP8 E4M3", {"scheme": "fp8"}),
    ("KV cache INT8", {"kv": "int8"}),
    ("KV cache FP8", {"kv": "fp8"}),
    ("KV cache INT4", {"kv": "int4"}),
)


def weight_bits(spec: dict[str, Any], k: int = 128) -> float:
    """Bits a weight costs in storage, FP16 scales included (K inputs per row for per-row scales)."""
    scheme = spec.get("scheme")
    if scheme is None:
        return 32.0
    if scheme == "fp16":
        return 16.0
    if scheme == "w4a16":
        return spec.get("bits", 4) + 16 / min(spec["group_size"], k)
    return 8 + 16 / k


def variant(model: TinyLM, spec: dict[str, Any], calib: torch.Tensor) -> tuple[TinyLM, dict[str, float]]:
    """The model under one spec: quantized Linears, or a quantized KV cache, or itself."""
    if "kv" in spec:
        return lm_quant.with_kv_cache(model, spec["kv"]), {}
    if "scheme" not in spec:
        return model, {}
    return quantize(model, spec, calib)


def quantize(model: TinyLM, spec: dict[str, Any], calib: torch.Tensor) -> tuple[TinyLM, dict[str, float]]:
    """quantize_lm with the spec's own options only: calibration windows go where the spec smooths."""
    return lm_quant.quantize_lm(model, **spec, **({"calib": calib} if spec.get("smooth") else {}))


@torch.no_grad()
def window_nll(model: TinyLM, windows: torch.Tensor, batch_size: int = 64) -> np.ndarray:
    """Mean next-token cross-entropy of each held-out window (n,): exp of their mean is the perplexity."""
    was = model.training
    model.eval()
    out = []
    for i in range(0, len(windows), batch_size):
        chunk = windows[i:i + batch_size]
        logits = model(chunk[:, :-1]).float()
        ce = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1),
                                               reduction="none")
        out.append(ce.view(len(chunk), -1).mean(1))
    model.train(was)
    return torch.cat(out).numpy().astype(np.float64)


def pct_interval(a: np.ndarray, b: np.ndarray) -> spread.Spread:
    """95 % paired-bootstrap interval of the perplexity change of `a` over `b`, in percent (same windows)."""
    d = spread.bootstrap_paired(a, b, what="held-out windows")
    return spread.Spread(100 * math.expm1(d.lo), 100 * math.expm1(d.hi), d.method)


def _ppl_spread(nll: np.ndarray) -> spread.Spread:
    """The 95 % bootstrap interval of the perplexity over the held-out windows."""
    s = spread.bootstrap(nll, what="held-out windows")
    return spread.Spread(math.exp(s.lo), math.exp(s.hi), s.method)


def quality_table(model: TinyLM, heldout: torch.Tensor, calib: torch.Tensor,
                  specs: tuple[tuple[str, dict[str, Any]], ...] = SPECS, progress: bool = True) -> list[dict]:
    """One row per scheme: weight bits, KV bits, held-out perplexity, its change from FP32 and that
    change's 95 % interval (a paired bootstrap over the windows); '_nll' keeps the per-window losses."""
    rows, base = [], None
    for label, spec in tqdm(specs, desc="perplexity of each scheme", disable=not progress, leave=False):
        m, alphas = variant(model, spec, calib)
        nll = window_nll(m, heldout)
        base = nll if base is None else base
        ci = pct_interval(nll, base) if nll is not base else spread.Spread(0.0, 0.0, "the reference")
        kv = {"int8": 8, "fp8": 8, "int4": 4}.get(spec.get("kv", ""), 32)
        rows.append({"scheme": label, "weight bits": round(weight_bits(spec), 2), "KV bits": kv,
                     "perplexity": math.exp(nll.mean()), "vs FP32 %": 100 * math.expm1(nll.mean() - base.mean()),
                     "95 % interval": f"{ci.lo:+.2f}..{ci.hi:+.2f}", "_nll": nll, "_ci": ci,
                     "_vs_lo": ci.lo, "_vs_hi": ci.hi, "_spread": _ppl_spread(nll),
                     **({"α per layer group": sorted(set(alphas.values()))} if spec.get("smooth") == "awq" else {})})
    for r in rows:
        r["lesson"] = lesson(r["scheme"], rows)
    return rows


def shown(rows: list[dict]) -> list[dict]:
    """The rows as the table shows them: no lesson, no per-window losses."""
    return [{k: v for k, v in r.items() if k != "lesson" and not k.startswith("_")} for r in rows]


def verdict(pct: float, ci: spread.Spread | None = None) -> str:
    """A word for a change in perplexity of `pct` percent; with its interval `ci`, both ends' words when the
    interval reaches across a threshold (the band itself is then not resolved at this noise)."""
    if ci is not None and (lo := verdict(ci.lo)) != (hi := verdict(ci.hi)):
        return f"{lo} to {hi} at this noise"
    a = abs(pct)
    if a < 0.2:
        return "a change under 0.2 %, negligible"
    if a < 1:
        return "practically free"
    if a < 3:
        return "a small cost" if pct > 0 else "a small gain"
    if a < 10:
        return "a visible cost" if pct > 0 else "a visible gain"
    return "a large loss" if pct > 0 else "a large gain"


def _d(rows: list[dict], label: str) -> float | None:
    """The change in perplexity (%) of the row with this label, None when the table has no such row."""
    return next((r["vs FP32 %"] for r in rows if r["scheme"] == label), None)


def _row(rows: list[dict], label: str) -> dict | None:
    """The row with this label, or None."""
    return next((r for r in rows if r["scheme"] == label), None)


def compare(rows: list[dict], a: str, b: str) -> tuple[bool | None, str]:
    """(whether row a's change over row b is resolved, ' (lo to hi %, paired bootstrap 95% over n held-out
    windows)' with 'not resolved at this noise' first when the interval holds zero); (None, '') when a row
    carries no per-window losses."""
    ra, rb = _row(rows, a), _row(rows, b)
    if ra is None or rb is None or "_nll" not in ra or "_nll" not in rb:
        return None, ""
    ci = pct_interval(ra["_nll"], rb["_nll"])
    unresolved = ci.contains(0.0)
    return not unresolved, f" ({NOT_RESOLVED + ': ' if unresolved else ''}{ci.lo:+.2f} to {ci.hi:+.2f} %, {ci.method})"


def _vs(rows: list[dict], label: str, other: str, what: str) -> str:
    """' vs +x.xx % <what>' with the paired interval of the difference, or nothing when that row was not measured."""
    d = _d(rows, other)
    return "" if d is None else f" vs {d:+.2f} % {what}" + compare(rows, label, other)[1]


def lesson(label: str, rows: list[dict]) -> str:
    """The sentence one row teaches, filled in from the table's numbers."""
    d = _d(rows, label) or 0.0
    row = _row(rows, label) or {}
    ci = row.get("_ci")
    inside = ci is not None and label != rows[0]["scheme"] and ci.contains(0.0)
    v = f"{d:+.2f} % ({NOT_RESOLVED} against FP32)" if inside else f"{d:+.2f} % ({verdict(d, ci)})"
    per_row, rtn, tok = _d(rows, "W4A16 per channel"), _d(rows, "W4A16 g128"), _d(rows, "W8A8 INT8 per token")
    if label == "FP32":
        return f"the reference: perplexity {rows[0]['perplexity']:.2f} (a blind guess over 256 bytes scores 256)"
    if label == "FP16":
        return f"FP16 weights and activations: {v}; the GPU baseline of the speed section"
    if label == "W8A16 per channel":
        return f"8-bit weights, one scale per output row: {v}, for half the bytes of FP16"
    if label == "W4A16 per channel":
        return f"4-bit weights, one scale per row: {v}; 16 levels stretched over the largest value of each row"
    if label.startswith("W4A16 g") and "AWQ" not in label:
        g = int(label.split("g")[1])
        text = f"groups of {g}: {v}, for {16 / g:.2f} extra bits a weight"
        if per_row is not None:
            gain = per_row - d
            text += (f"; {abs(gain):.2f} points {'better' if gain >= 0 else 'worse'} than one scale per row"
                     + compare(rows, label, "W4A16 per channel")[1])
        return text
    if "AWQ" in label:
        if rtn is None:
            return f"scales searched on calibration activations before 4-bit rounding: {v}"
        rec = (rtn - d) / rtn if rtn > 0 else 0.0
        resolved, noise = compare(rows, label, "W4A16 g128")
        what = ("against plain rounding" if resolved is False else f"recovers {rec:.0%} of plain rounding's loss"
                if d < rtn else "no gain over plain rounding here") + noise
        return f"scales searched on calibration activations before 4-bit rounding: {v} vs {rtn:+.2f} % (g128): {what}"
    if label.startswith(("W3A16", "W2A16")):
        return f"{label[1]}-bit weights in groups of 32: {v}" + _vs(rows, label, "W4A16 g32", "at 4 bits")
    if label == "W8A8 INT8 per token":
        return f"8-bit activations too, one dynamic scale per token: {v}; INT8 tensor cores can then do the math"
    if label == "W8A8 INT8 per tensor":
        return f"one dynamic scale for all tokens: {v}" + _vs(rows, label, "W8A8 INT8 per token", "per token")
    if "SmoothQuant" in label:
        resolved = compare(rows, label, "W8A8 INT8 per token")[0]
        what = ("" if tok is None or resolved is False else "; it helps" if d < tok - 0.1 else
                "; it costs" if d > tok + 0.1 else "; it changes little")
        return f"activation ranges moved into the weights first: {v}" + _vs(rows, label, "W8A8 INT8 per token",
                                                                           "without") + what
    if label == "W8A8 FP8 E4M3":
        return f"FP8 for weights and activations: {v}" + _vs(rows, label, "W8A8 INT8 per token", "for INT8 per token")
    kind = label.split()[-1]
    return f"keys and values stored in {kind} (one scale per token and head): {v}"
