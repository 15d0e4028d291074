"""'Accuracy dropped more than 5 points after INT8': run helpers.model_quant.diagnose, apply what it recommends,
and repeat until the drop is within a target, one recorded step at a time.

Serves: chapter 11.
"""

from __future__ import annotations

from typing import Any

from helpers.errors import InputError


def _settings_from(recommendations: list[str], settings: dict) -> tuple[dict, str]:
    """The next PTQ settings implied by diagnose()'s recommendations, and what changed (or '')."""
    new = {**settings, "skip": list(settings["skip"])}
    text = " ".join(recommendations)
    if "per-channel" in text and not new["per_channel"]:
        new["per_channel"] = True
        return new, "per-channel weights"
    if "percentile" in text and new["method"] != "percentile":
        new["method"] = "percentile"
        return new, "percentile calibration"
    for r in recommendations:
        if "keep this layer in FP16" in r:
            layer = r.split(":", 1)[0]
            if layer not in new["skip"]:
                new["skip"].append(layer)
                return new, f"keep {layer} in floating point"
    return new, ""


def fix_until_recovered(model: Any, data: Any, *, target_pts: float = 1.0, max_steps: int = 5,
                        start: dict | None = None) -> list[dict]:
    """Quantize (start: per-tensor max), diagnose, apply the first applicable recommendation, repeat.

    Stops when FP32 − INT8 accuracy ≤ target_pts, when no recommendation applies, or after max_steps.
    Returns one row per attempt: settings, accuracy, drop, and the recommendations seen.
    """
    from helpers.model_quant.diagnose import diagnose
    from helpers.model_quant.ptq import ptq

    if not 0 <= target_pts <= 100:
        raise InputError(f"target_pts must be in 0..100 points, got {target_pts!r}.")
    settings = {"method": "max", "per_channel": False, "skip": [], **(start or {})}
    rows: list[dict] = []
    change = "start: " + ("per-channel" if settings["per_channel"] else "per-tensor") + f" weights, {settings['method']}"
    for _ in range(max_steps):
        q = ptq(model, data, method=settings["method"], per_channel=settings["per_channel"], skip=settings["skip"])
        d = diagnose(model, q, data)
        rows.append({"step": change, "accuracy %": d.quant_acc, "drop pts": d.drop,
                     "recommendations": len(d.recommendations), "diagnosis": d})
        if d.drop <= target_pts:
            break
        settings, change = _settings_from(d.recommendations, settings)
        if not change:
            break
    return rows
