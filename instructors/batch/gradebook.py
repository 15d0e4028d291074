"""Write what grading found: the per-submission gradebook, the per-student summary, and one markdown
feedback file per submission. Only the batch process writes these, from the workers' results.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import csv
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from instructors.batch.manual import write_csv
from instructors.batch.runner import RunResult, TestOutcome
from instructors.batch.submissions import Submission

FIXED_COLUMNS = ["student", "lab", "submission"]
TOTAL_COLUMNS = ["points", "max_points", "status", "notes"]
GRADED = "graded"


@dataclass
class Graded:
    """A submission and what grading it found."""

    submission: Submission
    result: RunResult

    def status(self) -> str:
        """'graded', or 'not graded: <the grader's own failure>'."""
        return f"not graded: {self.result.not_graded}" if self.result.not_graded else GRADED

    def scores(self) -> dict[str, float]:
        """Points per grade_id (cells sharing a grade_id add up)."""
        out: dict[str, float] = {}
        for o in self.result.outcomes:
            out[o.grade_id] = out.get(o.grade_id, 0.0) + o.points
        return out

    def points(self) -> tuple[float, float]:
        """(scored, possible) of the auto-graded tests of the submission."""
        return (sum(o.points for o in self.result.outcomes),
                sum(o.max_points for o in self.result.outcomes))

    def possible(self) -> float:
        """The lab's full points: the auto-graded tests and the questions read by the instructor."""
        return self.points()[1] + sum(float(q["max_points"]) for q in self.result.manual)


def _fmt(x: float) -> str:
    """Points without a needless '.0'."""
    return f"{x:g}"


def grade_columns(graded: list[Graded]) -> list[str]:
    """Every grade_id seen, in lab order and, within a lab, the tests then the questions read by the instructor."""
    cols: list[str] = []
    for g in sorted(graded, key=lambda g: g.submission.lab):
        ids = [o.grade_id for o in g.result.outcomes] + [q["grade_id"] for q in g.result.manual]
        cols += [c for c in ids if c not in cols]
    return cols


def _notes(g: Graded, unread: list[str]) -> str:
    """The row's notes as text: the grader's notes, the errors in the student's cells, the unread questions."""
    r = g.result
    parts = list(r.notes) + [f"code cell {i}: {e}: {v}".rstrip(": ") for i, e, v in r.cell_errors]
    if unread:
        parts.append(f"not yet read by you: {' '.join(unread)} (give points in manual.csv or --overrides)")
    return " | ".join(" ".join(p.split()) for p in parts)


def _key(g: Graded) -> tuple[str, str, str]:
    """Rows are sorted by student, then lab, then submission path."""
    return g.submission.student, g.submission.lab, str(g.submission.path)


def gradebook_rows(graded: list[Graded], overrides: list[dict[str, str]] | None = None,
                   marks: dict | None = None) -> tuple[list[str], list[dict[str, str]]]:
    """The gradebook's header and rows (one per submission, sorted by student), with the points of the
    questions read by the instructor (`marks`, from manual.csv) and the instructor's overrides merged."""
    from instructors.batch import manual
    from instructors.batch import overrides as ov

    cols = grade_columns(graded)
    header = FIXED_COLUMNS + cols + TOTAL_COLUMNS
    rows = []
    for g in sorted(graded, key=_key):
        s = g.submission
        scores = {k: _fmt(v) for k, v in g.scores().items()}
        unread = []
        for q in g.result.manual:
            scores[q["grade_id"]] = manual.given(marks or {}, str(s.path), q)
            if not scores[q["grade_id"]]:
                unread.append(q["grade_id"])
        got = g.points()[0] + sum(float(scores[q["grade_id"]] or 0) for q in g.result.manual)
        values = ([s.student, s.lab, str(s.path)] + [scores.get(c, "") for c in cols]
                  + [_fmt(got) if not g.result.not_graded else "", _fmt(g.possible()), g.status(),
                     _notes(g, unread)])
        rows.append(dict(zip(header, values)))
    return ov.merge(header, rows, overrides or [], cols)


def manual_rows(graded: list[Graded], marks: dict | None = None) -> list[dict[str, str]]:
    """manual.csv's rows: one per submission and question read by the instructor, with the answer's text."""
    from instructors.batch import manual

    return [{"student": g.submission.student, "lab": g.submission.lab, "submission": str(g.submission.path),
             "question": q["grade_id"], "max_points": _fmt(float(q["max_points"])),
             "points": manual.given(marks or {}, str(g.submission.path), q), "answer": q["answer"]}
            for g in sorted(graded, key=_key) for q in g.result.manual]


def write_gradebook(graded: list[Graded], path: Path, overrides: list[dict[str, str]] | None = None,
                    marks: dict | None = None) -> Path:
    """Write the CSV (one row per submission, overrides merged) atomically, replacing whatever is at `path`."""
    header, rows = gradebook_rows(graded, overrides, marks)
    return write_csv(path, header, rows, ".gradebook-")


def write_summary(graded: list[Graded], path: Path, corrected: dict[str, float] | None = None) -> Path:
    """Write one row per student: the best score of each lab, the total, and the total possible
    (`corrected`: submission path -> the gradebook's points, with the instructor's points and overrides)."""
    labs = sorted({g.submission.lab for g in graded})
    corrected = corrected or {}

    def got(g: Graded) -> float:
        return corrected.get(str(g.submission.path), g.points()[0])

    best: dict[str, dict[str, Graded]] = {}
    for g in graded:
        mine = best.setdefault(g.submission.student, {})
        old = mine.get(g.submission.lab)
        if old is None or (bool(old.result.not_graded) and not g.result.not_graded) or got(g) > got(old):
            mine[g.submission.lab] = g
    possible = {g.submission.lab: g.possible() for g in graded if g.possible()}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".summary-", suffix=".csv")
    with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student"] + labs + ["total", "max_total", "not_graded"])
        for student in sorted(best):
            row, total, missing = [], 0.0, []
            for lab in labs:
                kept = best[student].get(lab)
                if kept is None:
                    row.append("")
                elif kept.result.not_graded:
                    row.append("not graded")
                    missing.append(lab)
                else:
                    row.append(_fmt(got(kept)))
                    total += got(kept)
            w.writerow([student] + row + [_fmt(total), _fmt(sum(possible.values())), " ".join(missing)])
    os.replace(tmp, path)
    return path


def _safe(name: str) -> str:
    """A file-name-safe version of a student or lab name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "unnamed"


def _row(o: TestOutcome) -> str:
    """One markdown table row for a test outcome (the message's first line)."""
    mark = "✓ pass" if o.passed else "✗ fail"
    text = o.message.strip()
    first = text.splitlines()[0] if text else ""
    more = " (details below)" if "\n" in text else ""
    msg = (first + more).replace("|", "\\|")
    return f"| `{o.grade_id}` | {mark} | {_fmt(o.points)} / {_fmt(o.max_points)} | {msg} |"


def _details(outcomes: list[TestOutcome]) -> list[str]:
    """A section with the full message of each failed test whose message has several lines."""
    lines: list[str] = []
    for o in outcomes:
        text = o.message.strip()
        if not o.passed and "\n" in text:
            lines += ["", f"### `{o.grade_id}`", "", "```text", text.replace("```", "'''"), "```"]
    return ["", "## Details"] + lines if lines else []


def feedback_markdown(g: Graded) -> str:
    """The feedback text for one submission."""
    s, r = g.submission, g.result
    got, possible = g.points()
    score = (f"**not graded** ({r.not_graded}); this is the grader's failure, not yours: it will be graded again"
             if r.not_graded else f"Score: **{_fmt(got)} / {_fmt(possible)}**")
    if r.manual and not r.not_graded:
        score += (f" from the checks, of the lab's {_fmt(g.possible())}: your instructor reads "
                  f"{' '.join(q['grade_id'] for q in r.manual)} and gives the other "
                  f"{_fmt(g.possible() - possible)}")
    lines = [f"# Feedback: {s.lab} — {s.student}", "", f"Submission: `{s.path.name}`. {score}.", ""]
    if r.outcomes:
        lines += ["| exercise | result | points | message |", "|---|---|---|---|"]
        lines += [_row(o) for o in r.outcomes]
        lines += _details(r.outcomes)
    if r.cell_errors:
        lines += ["", "## Errors in your cells", ""]
        lines += [f"- code cell {i}: {e}: {v}".rstrip(": ") for i, e, v in r.cell_errors]
    if r.notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in r.notes]
    return "\n".join(lines) + "\n"


def feedback_names(graded: list[Graded]) -> list[str]:
    """A unique file name per submission: <student>__<lab>.md (then _2, _3 ...)."""
    names, used = [], set()
    for g in graded:
        base = f"{_safe(g.submission.student)}__{_safe(g.submission.lab)}"
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base}_{n}"
        used.add(name)
        names.append(f"{name}.md")
    return names


def write_feedback(graded: list[Graded], folder: Path, only: set[int] | None = None) -> list[Path]:
    """Write folder/<student>__<lab>.md for each submission (or the indexes in `only`); return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, (g, name) in enumerate(zip(graded, feedback_names(graded))):
        p = folder / name
        if only is None or i in only:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".feedback-", suffix=".md")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(feedback_markdown(g))
            os.replace(tmp, p)
        paths.append(p)
    return paths


def write_skipped(skipped: list[tuple[Path, str]], path: Path) -> Path:
    """Write one row per file of the submissions folders that was not graded, with the reason."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".skipped-", suffix=".csv")
    with os.fdopen(fd, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["file", "reason"])
        w.writerows([str(p), why] for p, why in skipped)
    os.replace(tmp, path)
    return path
