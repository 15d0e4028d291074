"""An instructor's own columns and corrected scores, kept apart from what the grader writes.

The grader rewrites ``gradebook.csv`` and ``summary.csv`` on every run, so edits there would be lost:
a run refuses to start when either file changed since it wrote it. Corrections live in a CSV file of
the instructor's own, outside the output folder, passed with ``--overrides FILE``: a header with
``student`` and ``lab`` (or ``submission``, the path as in the gradebook), then any columns. A value replaces the grader's in
that column (an exercise's points, ``status``, ``notes``) or adds a column of the instructor's
(``comment``, ``late_penalty``); corrected exercise points change ``points`` and the summary, and the
row's ``overridden`` column names what was replaced. Every resume merges it again.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from helpers import cli
from helpers.errors import InputError

WRITTEN = "written.json"  # in the state folder: the SHA-256 of each file as the grader last wrote it
KEYS = ("student", "lab", "submission")
PROTECTED = ("max_points", "overridden")


def read(path: str | Path | None) -> list[dict[str, str]]:
    """The rows of an overrides file ([] without one), validated."""
    from helpers.grading.batch.roster import decode

    if path is None:
        return []
    path = Path(path)
    if not path.is_file():
        raise InputError(f"--overrides {path} does not exist. Pass a CSV file with the columns student,lab and "
                         f"the ones to set.")
    text, _ = decode(path.read_bytes(), path)
    try:
        dialect = csv.Sniffer().sniff("\n".join(text.splitlines()[:20]), delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel  # type: ignore[assignment]
    try:
        rows = list(csv.DictReader(text.splitlines(), dialect=dialect, strict=True))
    except csv.Error as err:
        raise InputError(f"{path}: {err} (an unterminated quote?). Fix the file; nothing was graded.") from None
    fields = [f.strip() for f in (rows[0].keys() if rows else [])]
    if rows and "submission" not in fields and not {"student", "lab"} <= set(fields):
        raise InputError(f"{path}: needs the columns student and lab (or submission) to say which row each line "
                         f"corrects; got {', '.join(fields)}. Nothing was graded.")
    bad = [f for f in fields if f in PROTECTED]
    if bad:
        raise InputError(f"{path}: the column {bad[0]!r} is computed by the grader and cannot be set; remove it.")
    return [{k.strip(): (v or "").strip() for k, v in r.items() if k is not None} for r in rows]


def _matches(o: dict[str, str], row: dict[str, str]) -> bool:
    """True when an override line names this gradebook row."""
    if o.get("submission"):
        return o["submission"] == row["submission"]
    return o.get("student") == row["student"] and o.get("lab") == row["lab"]


def merge(header: list[str], rows: list[dict[str, str]], overrides: list[dict[str, str]],
          grade_cols: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """The gradebook's header and rows with every override applied (points recomputed where scores changed)."""
    if not overrides:
        return header, rows
    own = set(header)
    extra = [k for o in overrides for k in o if k not in header and k not in KEYS]
    header = header + list(dict.fromkeys(extra)) + ["overridden"]
    for row in rows:
        changed: list[str] = []
        for o in (o for o in overrides if _matches(o, row)):
            for k, v in o.items():
                if k in KEYS or v == "":
                    continue
                if k in grade_cols or k == "points":
                    try:
                        if not math.isfinite(float(v)):
                            raise ValueError
                    except ValueError:
                        raise InputError(f"overrides: {v!r} for {k} of {row['student']}/{row['lab']} is not a "
                                         f"finite number of points. Fix it; nothing was graded.") from None
                if row.get(k) != v and k in own:
                    changed.append(k)
                row[k] = v
        if any(k in grade_cols for k in changed) and "points" not in changed:
            row["points"] = f"{sum(float(row[c]) for c in grade_cols if row.get(c)):g}"
        row["overridden"] = " ".join(dict.fromkeys(changed))
    return header, rows


def remember(out: Path, state: Path, names: tuple[str, ...]) -> None:
    """Record how the grader left each of `names` in `out`."""
    state.mkdir(parents=True, exist_ok=True)
    (state / WRITTEN).write_text(json.dumps({n: cli.digest(out / n) for n in names}), encoding="utf-8")


def refuse_hand_edits(out: Path, state: Path, names: tuple[str, ...]) -> None:
    """Raise when a file the grader wrote in `out` was changed since (the change would be lost)."""
    try:
        written = json.loads((state / WRITTEN).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    for n in names:
        if n in written and (out / n).is_file() and cli.digest(out / n) != written[n]:
            raise InputError(f"{out / n} was changed since the grader wrote it, and a run rewrites it. Put your "
                             f"changes in a CSV file of your own (columns student,lab and the ones to set) passed "
                             f"with --overrides FILE, then delete {n}; nothing was changed.")
