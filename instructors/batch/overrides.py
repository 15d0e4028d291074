"""An instructor's own columns and corrected scores, kept apart from what the grader writes.

The grader rewrites ``gradebook.csv`` and ``summary.csv`` on every run, so edits there would be lost:
a run refuses to start when either file changed since it wrote it. Corrections live in a CSV file of
the instructor's own, outside the output folder, passed with ``--overrides FILE``: a header with
``student`` and ``lab`` (or ``submission``, the path as in the gradebook), then any columns. A value replaces the grader's in
that column (an exercise's points, ``status``, ``notes``) or adds a column of the instructor's
(``comment``, ``late_penalty``); corrected exercise points change ``points`` and the summary, and the
row's ``overridden`` column names what was replaced. Every line is checked before anything is graded:
a student, lab or submission the batch does not have, or points outside 0..the most the exercise gives,
is refused with the line. A run without ``--overrides`` applies the last ones given to that output
folder (a file with only the header clears them).

Serves: instructors (batch grading).
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

from helpers import cli
from helpers.errors import InputError

WRITTEN = "written.json"  # in the state folder: the SHA-256 of each file as the grader last wrote it
KEPT = "overrides.json"  # in the state folder: the overrides of the last run that was given some
WHERE = "#where"  # each override row's file and line, for errors
KEYS = ("student", "lab", "submission", WHERE)
PROTECTED = ("max_points", "overridden")
GRADE_ID = re.compile(r"^lab\d\d[-_]")


def parse_csv(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV file an instructor saved (UTF-8, Windows-1252 or Latin-1; comma, semicolon or tab)."""
    from instructors.batch.roster import decode

    text, _ = decode(path.read_bytes(), path)
    try:
        dialect = csv.Sniffer().sniff("\n".join(text.splitlines()[:20]), delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = list(csv.DictReader(text.splitlines(), dialect=dialect, strict=True))
    except csv.Error as err:
        raise InputError(f"{path}: {err} (an unterminated quote?). Fix the file; nothing was graded.") from None
    return [{k.strip(): (v or "").strip() for k, v in r.items() if k is not None} for r in rows]


def read(path: str | Path | None) -> list[dict[str, str]]:
    """The rows of an overrides file ([] without one), each with its file and line under WHERE."""
    if path is None:
        return []
    path = Path(path)
    if not path.is_file():
        raise InputError(f"--overrides {path} does not exist. Pass a CSV file with the columns student,lab and "
                         f"the ones to set.")
    rows = parse_csv(path)
    fields = list(rows[0]) if rows else []
    if rows and "submission" not in fields and not {"student", "lab"} <= set(fields):
        raise InputError(f"{path}: needs the columns student and lab (or submission) to say which row each line "
                         f"corrects; got {', '.join(fields)}. Nothing was graded.")
    bad = [f for f in fields if f in PROTECTED or f == WHERE]
    if bad:
        raise InputError(f"{path}: the column {bad[0]!r} is computed by the grader and cannot be set; remove it.")
    return [dict(r, **{WHERE: f"{path}, line {n}"}) for n, r in enumerate(rows, start=2)]


def points_in(text: str, top: float) -> float | None:
    """`text` as a number of points from 0 to `top`, or None when it is not one."""
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) and 0 <= x <= top else None


def _points(o: dict[str, str], k: str, top: float) -> None:
    """Refuse a value of points that is not a number from 0 to `top`."""
    if points_in(o[k], top) is None:
        raise InputError(f"{o[WHERE]}: {k} = {o[k]!r} is not a number of points from 0 to {top:g} (the most "
                         f"{k} gives). Fix that line; nothing was graded.")


def validate(fixes: list[dict[str, str]], subs: list[tuple[str, str, str]],
             maxima: dict[str, dict[str, float]]) -> None:
    """Refuse an override line that names no submission of the batch (`subs`: student, lab, path), an
    exercise or question its lab does not have, or points outside 0..the most it gives (`maxima`: per lab)."""
    students = {s for s, _, _ in subs}
    for o in fixes:
        if o.get("submission"):
            labs = [lab for _, lab, p in subs if p == o["submission"]]
            if not labs:
                raise InputError(f"{o[WHERE]}: no submission {o['submission']!r} in this batch; copy the path from "
                                 f"the gradebook's submission column, or remove the line.")
        elif o.get("student") not in students:
            raise InputError(f"{o[WHERE]}: no student {o.get('student')!r} in this batch; write the name as the "
                             f"gradebook's student column has it, or remove the line.")
        else:
            labs = [lab for s, lab, _ in subs if s == o["student"] and lab == o.get("lab")]
            if not labs:
                raise InputError(f"{o[WHERE]}: {o['student']!r} handed in no {o.get('lab')!r}; write the lab as the "
                                 f"gradebook's lab column has it, or remove the line.")
        most = maxima.get(labs[0], {})
        for k, v in o.items():
            if k in KEYS or v == "":
                continue
            if k in most:
                _points(o, k, most[k])
            elif k == "points":
                _points(o, k, sum(most.values()))
            elif GRADE_ID.match(k):
                raise InputError(f"{o[WHERE]}: {labs[0]} has no exercise or question {k!r}; use a grade id of its "
                                 f"gradebook columns ({', '.join(most) or 'none'}).")


def keep(state: Path, fixes: list[dict[str, str]]) -> None:
    """Remember the overrides given, so that a later run without --overrides still applies them."""
    state.mkdir(parents=True, exist_ok=True)
    (state / KEPT).write_text(json.dumps(fixes), encoding="utf-8")


def recall(state: Path) -> list[dict[str, str]]:
    """The overrides of the last run that was given some ([] when none was)."""
    try:
        rows = json.loads((state / KEPT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


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
