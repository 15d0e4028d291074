"""Find submitted notebooks, tell whose they are, and match each to its solution notebook.

Names that work (they mix):
- a suffix:              lab04_per_channel_and_requant__alice.ipynb          student 'alice'
- a folder each:         alice/lab04_per_channel_and_requant.ipynb           student 'alice'
- sections:              section1/alice/lab04_....ipynb                     student 'section1/alice'
- LMS exports (Canvas):  alicesmith_1234_5678_lab04_....ipynb (also _LATE_)  student 'alicesmith'
- LMS exports (Moodle):  Alice Smith_123_assignsubmission_file_lab04_....ipynb
A download suffix (' (1)', '-Copy1') is ignored, on the student and on the lab; `--roster` maps
any name or id that appears to the student's canonical id.

Serves: instructors (batch grading).
"""

from __future__ import annotations

import csv
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import InputError

STUDENT_SEP = "__"
LAB_NUMBER = re.compile(r"(?:^|[^a-z0-9])(lab\d+)(?:[^0-9]|$)")
COPY_SUFFIX = re.compile(r"(\s*\(\d+\)|-Copy\d*|\s+copy)$", re.IGNORECASE)
CANVAS = re.compile(r"^(?P<name>[^_]+)(?:_LATE)?_(?P<uid>\d+)_(?P<sid>\d+)_(?P<file>.+)$")
MOODLE = re.compile(r"^(?P<name>.+?)_(?P<uid>\d+)_assignsubmission_file_(?P<file>.+)$")


@dataclass
class Submission:
    """One submitted notebook, its student and the solution it is graded against."""

    path: Path
    student: str
    lab: str  # the solution's stem, or the submission's own stem when none matches
    solution: Path | None


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def clean(name: str) -> str:
    """A name without download suffixes such as ' (1)' or '-Copy1'."""
    prev = None
    while prev != name:
        prev, name = name, COPY_SUFFIX.sub("", name).strip()
    return name


def find_notebooks(paths: list[str | Path]) -> list[tuple[Path, Path]]:
    """(notebook, the root it was found under) for every .ipynb given or inside a given folder."""
    found: list[tuple[Path, Path]] = []
    for p in map(Path, paths):
        if p.is_file() and p.suffix == ".ipynb":
            found.append((p, p.parent))
        elif p.is_dir():
            found += [(nb, p) for nb in sorted(p.rglob("*.ipynb")) if ".ipynb_checkpoints" not in nb.parts]
        else:
            raise InputError(f"{p} is neither a notebook (.ipynb) nor a folder. "
                             f"Pass submitted notebooks or folders that hold them.")
    return found


def match_solution(stem: str, solutions: list[Path]) -> Path | None:
    """The solution for a file stem: exact name, longest name prefix, or a unique lab number in it."""
    stem = clean(stem)
    by_stem = {s.stem: s for s in solutions}
    if stem in by_stem:
        return by_stem[stem]
    prefixed = [s for s in solutions if stem.startswith(s.stem)]
    if prefixed:
        return max(prefixed, key=lambda s: len(s.stem))
    m = LAB_NUMBER.search(stem.lower())
    if m:
        same = [s for s in solutions if s.stem.split("_", 1)[0] == m.group(1)]
        if len(same) == 1:
            return same[0]
    return None


def read_roster(path: str | Path | None) -> dict[str, str]:
    """alias -> student from a CSV whose rows are `alias,student` (a header row is skipped)."""
    if path is None:
        return {}
    p = Path(path)
    if not p.is_file():
        raise InputError(f"roster {p} does not exist. Pass a CSV of alias,student rows.")
    out: dict[str, str] = {}
    with p.open(newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.reader(f)):
            if len(row) < 2 or not row[0].strip():
                continue
            if i == 0 and row[0].strip().lower() in ("alias", "name", "login", "from"):
                continue
            out[row[0].strip().lower()] = row[1].strip()
    return out


def _identity(path: Path, root: Path) -> tuple[str, str, list[str]]:
    """(student, file stem holding the lab name, aliases to look up in a roster)."""
    stem = path.stem
    for pattern in (CANVAS, MOODLE):
        m = pattern.match(stem)
        if m:
            return clean(m["name"]), m["file"], [m["name"], m["uid"]]
    lab_part, sep, student = stem.partition(STUDENT_SEP)
    if sep and student:
        return clean(student), lab_part, [student]
    rel = path.parent.relative_to(root) if path.parent != root else Path()
    parts = [clean(p) for p in rel.parts]
    if parts:
        return "/".join(parts), stem, [parts[-1], "/".join(parts)]
    return clean(path.parent.name or "unknown"), stem, [path.parent.name]


def describe(path: Path, root: Path, solutions: list[Path], roster: dict[str, str] | None = None) -> Submission:
    """Work out student and lab of one submitted notebook."""
    student, lab_part, aliases = _identity(path, root)
    for alias in aliases:
        if roster and alias.strip().lower() in roster:
            student = roster[alias.strip().lower()]
            break
    solution = match_solution(lab_part, solutions)
    return Submission(path, student, solution.stem if solution else clean(lab_part), solution)


def discover(paths: list[str | Path], solutions_dir: Path, roster: dict[str, str] | None = None) -> list[Submission]:
    """Every submission under `paths`, matched to solutions_dir/<lab>.ipynb."""
    solutions = sorted(Path(solutions_dir).glob("*.ipynb"))
    if not solutions:
        raise InputError(f"no solution notebooks in {solutions_dir}. Run from the course folder, "
                         f"or pass --solutions DIR.")
    subs = [describe(nb, root, solutions, roster) for nb, root in find_notebooks(paths)]
    if not subs:
        raise InputError(f"no submitted notebooks found in {', '.join(map(str, paths))}.")
    return subs
