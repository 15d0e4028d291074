"""Chapter 5-6 experiments as functions returning rows: error vs bits, outliers, per-channel, calibrators.

Serves: chapter 5 (also chapter 6).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.quant.core import quant_range, quantize, roundtrip
from helpers.quant.metrics import mse, sqnr_db
from helpers.validation import require_int_range


def rounding_table(values: tuple[float, ...] = (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6)) -> list[dict]:
    """Rows value / half_even / half_away: where the two rounding rules disagree (ties)."""
    x = np.array(values, np.float32)
    even, away = quantize(x, 1.0), quantize(x, 1.0, rounding="half_away")
    return [{"x / scale": float(v), "half_even": int(e), "half_away": int(a), "differ": bool(e != a)}
            for v, e, a in zip(x, even, away)]


def error_vs_bits(samples: dict[str, np.ndarray], bits: range = range(2, 9)) -> dict[str, list[float]]:
    """SQNR (dB) of per-tensor symmetric quantization at each bit width, per named sample set."""
    return {name: [sqnr_db(x, roundtrip(x, bits=b)) for b in bits] for name, x in samples.items()}


def outlier_effect(n: int = 10000, outlier: float = 20.0, seed: int = 0) -> list[dict]:
    """Per-tensor INT8 of Gaussian values with and without one large value: scale and SQNR of the rest."""
    require_int_range(n, 2, 10**8, "n")
    x = np.random.default_rng(seed).normal(size=n).astype(np.float32)
    y = x.copy()
    y[0] = outlier
    rows = []
    for name, v in (("no outlier", x), (f"one value = {outlier:g}", y)):
        back = roundtrip(v)
        _, qmax = quant_range(8)
        rows.append({"data": name, "scale": float(np.abs(v).max() / qmax),
                     "levels used": int(np.unique(np.rint(v[1:] / (np.abs(v).max() / qmax))).size),
                     "SQNR of the others (dB)": sqnr_db(v[1:], back[1:])})
    return rows


def per_channel_table(weights: dict[str, np.ndarray], bits: tuple[int, ...] = (8, 4)) -> list[dict]:
    """Per layer and bit width: SQNR of per-tensor vs per-channel (axis 0) symmetric weights."""
    rows = []
    for name, w in weights.items():
        for b in bits:
            t = sqnr_db(w, roundtrip(w, bits=b))
            c = sqnr_db(w, roundtrip(w, bits=b, axis=0))
            rows.append({"layer": name, "shape": str(w.shape), "bits": b, "per-tensor dB": t,
                         "per-channel dB": c, "gain dB": c - t})
    return rows


def channel_ranges(w: np.ndarray) -> np.ndarray:
    """max |w| of each output channel (row), the spread per-channel scales absorb."""
    return np.abs(w.reshape(w.shape[0], -1)).max(axis=1)


def calibrator_error_rows(acts: dict[str, Any], amaxes: dict[str, dict[str, float]],
                          bits: int = 8) -> list[dict]:
    """Per layer and method: amax, share of values clipped, MSE and SQNR of fake-quantized activations."""
    from helpers.quant.core import fake_quantize

    rows = []
    _, qmax = quant_range(bits)
    for layer, a in acts.items():
        x = a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a)
        for method, amax in amaxes[layer].items():
            fq = fake_quantize(x, max(amax, 1e-12) / qmax, bits=bits)
            rows.append({"layer": layer, "method": method, "amax": amax,
                         "clipped %": float((np.abs(x) > amax).mean() * 100),
                         "MSE": mse(x, fq), "SQNR dB": sqnr_db(x, fq)})
    return rows
