"""The questions read by the instructor: which they are, each student's answer, and the points given.

A manually graded cell of a lab (nbgrader ``grade`` and ``solution`` both true, "(1 point, read by your
instructor)") gets a gradebook column of its own. The grader copies each submission's answer into
``manual.csv`` in the output folder (one row per submission and question: ``student``, ``lab``,
``submission``, ``question``, ``max_points``, ``points``, ``answer``); the instructor fills in ``points``
there (or sets the question's column in ``--overrides``), and the next run reads them back, keeps them
while the answer is unchanged, and counts them in ``points`` and the summary.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import csv
import json
import math
import os
import tempfile
from pathlib import Path

from helpers.errors import InputError

MANUAL = "manual.csv"
HEADER = ["student", "lab", "submission", "question", "max_points", "points", "answer"]


def _graded(solution: Path | None) -> list[dict]:
    """The graded cells of a solution notebook (nbgrader grade=true with a grade_id), in notebook order."""
    if solution is None or not solution.is_file():
        return []
    try:
        cells = json.loads(solution.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError):
        return []
    return [c for c in cells if (c.get("metadata", {}).get("nbgrader") or {}).get("grade")
            and c["metadata"]["nbgrader"].get("grade_id")]


def _points(cell: dict) -> tuple[str, float]:
    """(grade_id, points) of a graded cell."""
    meta = cell["metadata"]["nbgrader"]
    return meta["grade_id"], float(meta.get("points", 0) or 0)


def questions(solution: Path | None) -> list[tuple[str, float]]:
    """(grade_id, points) of every question read by the instructor (grade and solution true), in order."""
    return [_points(c) for c in _graded(solution) if c["metadata"]["nbgrader"].get("solution")]


def maxima(solution: Path | None) -> dict[str, float]:
    """The most points each graded cell of a lab gives, auto-graded tests and questions alike."""
    return dict(_points(c) for c in _graded(solution))


def answers(notebook: Path, solution: Path | None) -> list[dict]:
    """For each manual question of the lab: its grade_id, its points and the answer text in `notebook`."""
    wanted = questions(solution)
    if not wanted:
        return []
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        cells = []
    text: dict[str, str] = {}
    for c in cells if isinstance(cells, list) else []:
        meta = c.get("metadata", {}).get("nbgrader") or {} if isinstance(c, dict) else {}
        gid = meta.get("grade_id")
        if gid and gid not in text:
            src = c.get("source", "")
            text[gid] = ("".join(src) if isinstance(src, list) else str(src)).strip()
    return [{"grade_id": g, "max_points": p, "answer": text.get(g, "(no answer cell with this id)")}
            for g, p in wanted]


def read_marks(path: Path) -> dict[tuple[str, str], tuple[float, str]]:
    """The points the instructor filled into a manual.csv: (submission, question) -> (points, answer)."""
    from instructors.batch.overrides import parse_csv, points_in

    if not path.is_file():
        return {}
    marks = {}
    for n, row in enumerate(parse_csv(path), start=2):
        if not row.get("points"):
            continue
        top = points_in(row.get("max_points", ""), math.inf)
        if not row.get("submission") or not row.get("question") or top is None:
            raise InputError(f"{path}, line {n}: points without its submission, question or max_points; keep "
                             f"those columns as the grader wrote them.")
        got = points_in(row["points"], top)
        if got is None:
            raise InputError(f"{path}, line {n}: points {row['points']!r} must be a number from 0 to {top:g}, the "
                             f"question's points. Fix that line; nothing was graded.")
        marks[(row["submission"], row["question"])] = (got, row.get("answer", ""))
    return marks


def given(marks: dict, submission: str, q: dict) -> str:
    """The points given to one question of one submission ('' while not read, or when the answer changed)."""
    got = marks.get((submission, q["grade_id"]))
    if got is None or got[1].strip() != q["answer"].strip():
        return ""
    return f"{got[0]:g}"


def write_csv(path: Path, header: list[str], rows: list[dict[str, str]], prefix: str) -> Path:
    """Write a CSV with `header` atomically: beside `path` first (named `prefix`…), then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".csv")
    with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, header)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)
    return path


def write(rows: list[dict[str, str]], path: Path) -> Path:
    """Write manual.csv (one row per submission and question) atomically."""
    return write_csv(path, list(HEADER), rows, ".manual-")
