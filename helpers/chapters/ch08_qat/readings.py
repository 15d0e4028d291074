"""The sentences chapter 8 prints about its QAT runs, computed from the results table.

Serves: chapter 8.
"""

from __future__ import annotations

from collections.abc import Sequence

from helpers.errors import InputError
from helpers.findings import NOT_RESOLVED

FULL = 0.9  # "recovers (nearly) all" of what PTQ lost


def qat_summary(results: Sequence[dict]) -> str:
    """One line per bit width: what PTQ lost, what QAT won back (median of the seeds), and the seed spread;
    a gain no larger than the seeds' spread is 'not resolved at this noise', not a finding."""
    if not results:
        raise InputError("qat_summary needs the rows of chapter 8's results table.")
    lines = []
    for r in results:
        lost = r["FP32 %"] - r["PTQ %"]
        left = r["FP32 %"] - r["QAT % (median)"]
        seeds = [float(a) for a in str(r["QAT % per seed"]).split(" / ")]
        spread = max(seeds) - min(seeds)
        if lost <= 0:
            verdict = "PTQ lost nothing, so QAT had nothing to recover"
        elif abs(lost - left) <= spread:
            verdict = (f"what QAT changed ({lost - left:+.1f} points) is inside the spread of its seeds: "
                       f"{NOT_RESOLVED}")
        else:
            share = (lost - left) / lost
            verdict = ("QAT won back (nearly) all of it" if share >= FULL else
                       f"QAT won back {share:.0%} of it" if share > 0 else "QAT won nothing back")
        ends = f"{abs(left):.1f} points {'below' if left > 0 else 'above'} FP32"
        lines.append(f"{r['bits']}: PTQ lost {lost:.1f} points, QAT (median of {len(seeds)} seeds) ends "
                     f"{ends}: {verdict}; the seeds spread over {spread:.1f} points.")
    return "\n".join(lines)
