"""Find submitted notebooks, tell whose they are, and match each to its solution notebook.

Names that work (they mix):
- a suffix:              lab04_per_channel_and_requant__alice.ipynb          student 'alice'
- a folder each:         alice/lab04_per_channel_and_requant.ipynb           student 'alice'
- sections:              section1/alice/lab04_....ipynb                     student 'section1/alice'
- LMS exports (Canvas):  alicesmith_1234_5678_lab04_....ipynb (also _LATE_)  student 'alicesmith'
- LMS exports (Moodle):  Alice Smith_123_assignsubmission_file_lab04_....ipynb
A download suffix (' (1)', '-Copy1') is ignored, on the student and on the lab; `--roster` maps
any name or id that appears to the student's canonical id (instructors.batch.roster). Every other
file in a submissions folder is listed with the reason it was not graded (``skipped_files``).

Serves: instructors (batch grading).
"""

from __future__ import annotations

import hashlib
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import InputError
from instructors.batch.roster import read_roster

__all__ = ["Submission", "clean", "describe", "discover", "file_hash", "find_notebooks", "match_solution",
           "read_roster", "skipped_files"]

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


def _why_not(path: Path) -> str:
    """Why a file found in a submissions folder is not graded."""
    if zipfile.is_zipfile(path):
        return (f"a zip archive, not a notebook: unpack it into its own folder (python -m zipfile -e "
                f"'{path.name}' '{path.stem}/') and grade that folder")
    if path.name.startswith("."):
        return "a hidden file, not a notebook"
    if ".ipynb_checkpoints" in path.parts:
        return "a Jupyter checkpoint copy (the notebook beside it is graded)"
    return f"not a notebook (.ipynb): a {path.suffix or 'file without an extension'}"


def skipped_files(paths: list[str | Path]) -> list[tuple[Path, str]]:
    """(file, why it is not graded) for every file in the given folders that is not a graded notebook."""
    out = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(q for q in p.rglob("*") if q.is_file() or q.is_symlink()):
                if f.suffix != ".ipynb" or ".ipynb_checkpoints" in f.parts:
                    out.append((f, _why_not(f) if f.is_file() else "a link, not a notebook"))
    return out


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
    found = [(nb, root, describe(nb, root, solutions, roster)) for nb, root in find_notebooks(paths)]
    if not found:
        raise InputError(f"no submitted notebooks found in {', '.join(map(str, paths))}.")
    if roster:
        _one_person_per_student(found)
    return [s for _, _, s in found]


def _one_person_per_student(found: list[tuple[Path, Path, Submission]]) -> None:
    """Refuse a roster that maps two different people who submitted the same lab to one student."""
    seen: dict[tuple[str, str], tuple[str, Path]] = {}
    for nb, root, s in found:
        person = _identity(nb, root)[0]
        key = (s.student, s.lab)
        if key in seen and seen[key][0] != person:
            raise InputError(f"the roster maps both {seen[key][0]!r} ({seen[key][1].name}) and {person!r} "
                             f"({nb.name}) to student {s.student!r} for {s.lab}. Give each person their own id "
                             f"in the roster.")
        seen.setdefault(key, (person, nb))
