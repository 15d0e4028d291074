"""The decode step launched two ways: each kernel only after the one before has finished ("plain"), and with
programmatic dependent launch ("PDL", ``helpers.kernels.pdl``), where a GEMV may start streaming its weights while
the kernel before it is still finishing.

Both launches of a path are captured as CUDA graphs of one step and timed interleaved, on the stack that chapter 12's
decode table times; before timing, a PDL step is checked to give exactly the plain step's logits (PDL changes when a
kernel starts, never what it computes). Without PDL (no Hopper GPU) there are no rows.

Serves: chapter 12.
"""

from __future__ import annotations

from typing import Any

from helpers.chapters.ch12_language_models import decode_bench, timing

PATHS = ("fp16 fused (CUDA)", "w8a16 fused (CUDA)", "w4a16 fused (CUDA)")
LAUNCHES = ("plain", "PDL")


def pdl_rows(m: dict[str, Any], rounds: int = timing.ROUNDS) -> list[dict[str, Any]]:
    """Rows (path, launch, µs/step, × plain, spread) for the fused CUDA paths of a built stack ``m``
    (``decode_bench.build``), both launches of a path interleaved; [] where this GPU has no PDL."""
    from helpers.kernels import pdl
    from helpers.spread import paired_ratio

    if not pdl.supported():
        return []
    names = [p for p in PATHS if p in m["layers"]]
    for path in names:
        plain = decode_bench.step_fused(m, path, pdl=False).float()
        diff = float((decode_bench.step_fused(m, path, pdl=True).float() - plain).abs().max())
        if diff != 0.0:
            raise AssertionError(f"{path}: the PDL step's logits differ from the plain step's by up to {diff:.1e}; "
                                 "a kernel reads an input before its griddepcontrol.wait")
    spreads = timing.interleaved({f"{p}|{launch}": [lambda p=p, on=launch == "PDL": decode_bench.step_fused(m, p, on)]
                                  for p in names for launch in LAUNCHES}, rounds=rounds, replays=2)
    rows: list[dict[str, Any]] = []
    for path in names:
        base = spreads[f"{path}|plain"].samples_us
        for launch in LAUNCHES:
            s = spreads[f"{path}|{launch}"]
            rows.append({"path": path, "launch": launch, "µs/step": s.median,
                         "× plain": paired_ratio(base, s.samples_us)[0], "spread": s.extra()})
    return rows


def sentence(rows: list[dict[str, Any]]) -> str:
    """Per path: the step with PDL against the plain step, and whether they differ outside their rounds' min..max
    (else "not resolved")."""
    parts = []
    for path in dict.fromkeys(r["path"] for r in rows):
        by = {r["launch"]: r for r in rows if r["path"] == path}
        if set(LAUNCHES) - by.keys():
            continue
        p, q = by["plain"], by["PDL"]
        apart = q["spread"]["max_us"] < p["spread"]["min_us"] or p["spread"]["max_us"] < q["spread"]["min_us"]
        verdict = ("faster" if q["µs/step"] < p["µs/step"] else "slower") if apart else \
            "not resolved: the rounds' ranges overlap"
        parts.append(f"{path.split()[0].upper()} {q['µs/step']:.0f} µs a step with PDL against {p['µs/step']:.0f} "
                     f"plain ({q['× plain']:.3f}× the plain step's speed, {verdict})")
    if not parts:
        return "Programmatic dependent launch: no rows (it needs a Hopper GPU)."
    return "Programmatic dependent launch, the same steps launched both ways: " + "; ".join(parts) + "."
