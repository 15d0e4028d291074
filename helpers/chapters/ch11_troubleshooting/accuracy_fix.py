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


def step_gains(steps: list[dict]) -> list[dict]:
    """Each fix's accuracy change over the attempt before it, with its paired-bootstrap interval (None without
    per-sample results)."""
    from helpers.model_quant.diagnose import accuracy_gap

    rows = []
    for before, after in zip(steps, steps[1:]):
        b, a = before["diagnosis"], after["diagnosis"]
        paired = a.quant_correct is not None and b.quant_correct is not None
        spread = accuracy_gap(a.quant_correct, b.quant_correct) if paired else None
        rows.append({"step": after["step"], "gain pts": a.quant_acc - b.quant_acc, "spread": spread,
                     "resolved": spread is not None and not spread.contains(0.0)})
    return rows


def reading(steps: list[dict], blown_input: str) -> list[str]:
    """The fix loop read from its own rows: what each fix bought against the noise, which fix recovered the
    accuracy, and whether it was keeping `blown_input` (the layer whose input range was blown up) in floating point."""
    from helpers.findings import NOT_RESOLVED, NOT_RESOLVED_ZH

    if not steps:
        raise InputError("the fix loop returned no rows: run fix_until_recovered first.")
    gains = step_gains(steps)
    lines = []
    for g in gains:
        s = g["spread"]
        noise = ("no per-sample results, so its noise is unknown" if s is None else
                 f"{s.method}: {s.lo:+.1f} to {s.hi:+.1f}, " +
                 ("resolved" if g["resolved"] else f"{NOT_RESOLVED} ({NOT_RESOLVED_ZH})"))
        lines.append(f"{g['step']}: accuracy {g['gain pts']:+.1f} points over the attempt before ({noise}).")
    best = max((g for g in gains if g["resolved"] and g["gain pts"] > 0), key=lambda g: g["gain pts"], default=None)
    keep = f"keep {blown_input} in floating point"
    if best is None:
        lines.append("No fix bought a gain larger than the test set's noise.")
    elif best["step"] == keep:
        lines.append(f"The largest resolved gain came from '{keep}': {blown_input}'s input is the activation with "
                     "the blown-up channel, and its per-tensor scale was what cost the accuracy.")
    else:
        lines.append(f"The largest resolved gain came from '{best['step']}', not from '{keep}' (the layer whose "
                     "input range was blown up).")
    if len(steps) > 2:
        later = ", then ".join(f"'{g['step']}'" for g in gains[1:])
        lines.append(f"After '{gains[0]['step']}' ({steps[1]['drop pts']:.1f} points still lost) the loop went on "
                     f"with {later}.")
    lines.append(f"After {len(steps)} attempt(s): {steps[-1]['diagnosis'].summary()}")
    return lines
