"""The class leaderboard of the ranked kernel exercises: ``leaderboard.csv`` and ``leaderboard.html`` (a table and a
plot per exercise: each kernel's fraction of the speed-of-light limit per shape and its geometric mean), written
beside the gradebook. Kernels that were not timed (no GPU, rejected, not correct, none handed in) are listed under
the ranked ones with the reason, never with a number.

Serves: instructors (ranking of labs 11, 12 and 13).
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass, field
from pathlib import Path

from helpers.errors import InputError
from helpers.grading import speed_of_light as sol
from helpers.spread import geomean
from instructors.batch.manual import write_csv

TIMED = "timed"
NOT_TIMED = "no GPU: not timed"
MAX_SHAPES = max(len(t.shapes) for t in sol.TARGETS.values())


@dataclass
class Entry:
    """One student's kernel of one exercise: its verdict, flags, and seconds per shape label when timed."""

    student: str
    exercise: str
    submission: str
    verdict: str
    flags: str = ""
    seconds: dict[str, float] = field(default_factory=dict)
    device: str = ""
    precheck: str = ""  # the static pre-check's verdict: 'clean', 'flagged: …' or 'rejected: …'


def fractions(e: Entry, limits: dict[str, float]) -> dict[str, float]:
    """Limit ÷ time for each shape of a timed entry (InputError for a shape it lacks or a bad time)."""
    missing = [s for s in limits if s not in e.seconds]
    if missing:
        raise InputError(f"{e.student}'s {e.exercise} has no time for {missing}; a timed kernel needs every shape.")
    return {s: sol.fraction(lim, e.seconds[s]) for s, lim in limits.items()}


def limits_of(exercise: str, card: str, records: dict | None = None) -> dict[str, float]:
    """Shape label -> the limit in seconds on the card."""
    r = sol.rates(card, records)
    return {s.label: sol.limit_seconds(s, r)[0] for s in sol.target(exercise).shapes}


def ranked(entries: list[Entry], card: str, records: dict | None = None) -> list[dict]:
    """The leaderboard's rows: per exercise, timed kernels by geometric mean (best first), then the others."""
    rows: list[dict] = []
    for ex in sol.TARGETS:
        mine = [e for e in entries if e.exercise == ex]
        if not mine:
            continue
        limits = limits_of(ex, card, records)
        timed = [(e, fractions(e, limits)) for e in mine if e.verdict == TIMED]
        timed.sort(key=lambda ef: (-geomean(ef[1].values()), ef[0].student))
        others = sorted((e for e in mine if e.verdict != TIMED), key=lambda e: e.student)
        for place, (e, fr) in enumerate(timed, 1):
            rows.append(_row(ex, str(place), e, fr, limits))
        rows += [_row(ex, "", e, None, limits) for e in others]
    return rows


def _row(ex: str, place: str, e: Entry, fr: dict[str, float] | None, limits: dict[str, float]) -> dict:
    """One CSV row."""
    row = {"exercise": ex, "rank": place, "student": e.student,
           "geomean_fraction": f"{geomean(fr.values()):.4g}" if fr else "", "verdict": e.verdict,
           "flags": e.flags, "device": e.device, "submission": e.submission}
    for i, (label, lim) in enumerate(limits.items(), 1):
        row[f"shape{i}"] = label
        row[f"shape{i}_limit_us"] = f"{lim * 1e6:.4g}"
        row[f"shape{i}_us"] = f"{e.seconds[label] * 1e6:.4g}" if fr else ""
        row[f"shape{i}_fraction"] = f"{fr[label]:.4g}" if fr else ""
    return row


HEADER = (["exercise", "rank", "student", "geomean_fraction"]
          + [f"shape{i}{k}" for i in range(1, MAX_SHAPES + 1) for k in ("", "_limit_us", "_us", "_fraction")]
          + ["verdict", "flags", "device", "submission"])


def _plot(ex: str, rows: list[dict], card: str) -> str:
    """A PNG (base64) of the timed kernels' fraction of the limit per shape and their geometric mean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in rows if r["rank"]][:12]
    labels = [rows[0][f"shape{i}"] for i in range(1, MAX_SHAPES + 1) if r_has(rows[0], i)] + ["geometric mean"]
    fig, ax = plt.subplots(figsize=(7.5, 3.2))
    if not timed:
        ax.text(0.5, 0.5, f"{NOT_TIMED}: no kernel of {ex} was timed", ha="center", va="center")
        ax.set_axis_off()
    else:
        width = 0.8 / len(timed)
        for j, r in enumerate(timed):
            vals = [float(r[f"shape{i}_fraction"]) for i in range(1, len(labels))] + [float(r["geomean_fraction"])]
            ax.bar([i + j * width for i in range(len(labels))], vals, width, label=f"{r['rank']}. {r['student']}")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("fraction of the limit")
        ax.axhline(1.0, color="k", lw=0.8)
        ax.legend(fontsize=7, ncol=2)
    devices = sorted({r["device"] for r in timed if r["device"]})
    where = f"timed on {', '.join(devices)}; " if devices else ""
    ax.set_title(f"{ex}: fraction of the speed of light ({where}limits: stored {card.upper()} run)", fontsize=9)
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def r_has(row: dict, i: int) -> bool:
    """True when the row has a shape number i."""
    return bool(row.get(f"shape{i}"))


def write(out: Path, entries: list[Entry], card: str, records: dict | None = None) -> tuple[Path, Path]:
    """Write leaderboard.csv and leaderboard.html under `out`; return both paths."""
    rows = ranked(entries, card, records)
    csv_path = write_csv(out / "leaderboard.csv", HEADER, [{k: r.get(k, "") for k in HEADER} for r in rows],
                         ".leaderboard-")
    parts = [f"<!doctype html><meta charset='utf-8'><title>Kernel leaderboard</title><h1>Kernel leaderboard</h1>"
             f"<p>Fraction of the speed-of-light limit (1 = the limit): bytes ÷ the card's measured copy bandwidth "
             f"or operations ÷ its measured GEMM rate, whichever is longer, from the stored {card.upper()} run "
             f"(never from these timings). Ranked by the geometric mean over shapes; correctness decides the grade, "
             f"not this table.</p>"]
    for ex in sol.TARGETS:
        mine = [r for r in rows if r["exercise"] == ex]
        if not mine:
            continue
        parts.append(f"<h2>{html.escape(ex)}: {html.escape(sol.target(ex).title)}</h2>"
                     f"<img alt='fraction of the limit per shape' src='data:image/png;base64,{_plot(ex, mine, card)}'>")
        cols = ["rank", "student", "geomean_fraction"] + [f"shape{i}_fraction" for i in range(1, MAX_SHAPES + 1)
                                                          if r_has(mine[0], i)] + ["verdict", "flags"]
        heads = [c if not c.startswith("shape") else f"{mine[0][c.removesuffix('_fraction')]}" for c in cols]
        parts.append("<table border='1' cellpadding='3'><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads)
                     + "</tr>" + "".join("<tr>" + "".join(f"<td>{html.escape(str(r[c]))}</td>" for c in cols)
                                        + "</tr>" for r in mine) + "</table>")
    html_path = out / "leaderboard.html"
    html_path.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return csv_path, html_path
