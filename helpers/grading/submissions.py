"""Find submitted notebooks, tell whose they are, and match each to its solution notebook.

Naming convention (either works, and they mix):
- a suffix:        lab04_per_channel_and_requant__alice.ipynb   (student 'alice')
- a folder each:   alice/lab04_per_channel_and_requant.ipynb    (student 'alice')
A download suffix such as ' (1)' or '-Copy1' after the lab name is tolerated.

Serves: the labs (self-checks) and instructors (lab generation, batch grading).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from helpers.errors import InputError
from helpers.grading.runner import TestCell

STUDENT_SEP = "__"
LAB_NUMBER = re.compile(r"^(lab\d+)")


@dataclass
class Submission:
    """One submitted notebook, its student and the solution it is graded against."""

    path: Path
    student: str
    lab: str  # the solution's stem, or the submission's own stem when none matches
    solution: Path | None


def file_hash(path: Path) -> str:
    """SHA-256 of a file's bytes (to prove the grader never changes a submission)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_notebooks(paths: list[str | Path]) -> list[tuple[Path, Path]]:
    """(notebook, the root it was found under) for every .ipynb given or inside a given folder."""
    found: list[tuple[Path, Path]] = []
    for p in map(Path, paths):
        if p.is_file() and p.suffix == ".ipynb":
            found.append((p, p.parent))
        elif p.is_dir():
            found += [(nb, p) for nb in sorted(p.rglob("*.ipynb"))
                      if ".ipynb_checkpoints" not in nb.parts]
        else:
            raise InputError(f"{p} is neither a notebook (.ipynb) nor a folder. "
                             f"Pass submitted notebooks or folders that hold them.")
    return found


def match_solution(stem: str, solutions: list[Path]) -> Path | None:
    """The solution for a submission's file stem: exact name, longest name prefix, or lab number."""
    by_stem = {s.stem: s for s in solutions}
    if stem in by_stem:
        return by_stem[stem]
    prefixed = [s for s in solutions if stem.startswith(s.stem)]
    if prefixed:
        return max(prefixed, key=lambda s: len(s.stem))
    m = LAB_NUMBER.match(stem)
    if m:
        same = [s for s in solutions if s.stem.split("_", 1)[0] == m.group(1)]
        if len(same) == 1:
            return same[0]
    return None


def describe(path: Path, root: Path, solutions: list[Path]) -> Submission:
    """Work out student and lab of one submitted notebook."""
    stem = path.stem
    lab_part, sep, student = stem.partition(STUDENT_SEP)
    if not sep or not student:
        rel = path.parent.relative_to(root) if path.parent != root else Path()
        student = rel.parts[0] if rel.parts else (path.parent.name or "unknown")
        lab_part = stem
    solution = match_solution(lab_part, solutions)
    return Submission(path, student, solution.stem if solution else lab_part, solution)


def discover(paths: list[str | Path], solutions_dir: Path) -> list[Submission]:
    """Every submission under `paths`, matched to solutions_dir/<lab>.ipynb."""
    solutions = sorted(solutions_dir.glob("*.ipynb"))
    if not solutions:
        raise InputError(f"no solution notebooks in {solutions_dir}. Run from the course folder, "
                         f"or pass --solutions DIR.")
    subs = [describe(nb, root, solutions) for nb, root in find_notebooks(paths)]
    if not subs:
        raise InputError(f"no submitted notebooks found in {', '.join(map(str, paths))}.")
    return subs


def graded_tests(solution: dict) -> list[TestCell]:
    """The auto-graded test cells of a solution notebook: code cells with nbgrader grade=true."""
    tests, seen = [], set()
    for i, cell in enumerate(solution.get("cells", [])):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        gid = meta.get("grade_id")
        if not gid or gid in seen:
            raise InputError(f"test cell {i} of the solution has a missing or repeated grade_id "
                             f"{gid!r}; give each graded cell a unique one.")
        seen.add(gid)
        points = meta.get("points", 0)
        if isinstance(points, bool) or not isinstance(points, (int, float)) or points < 0:
            raise InputError(f"test cell {gid!r} has points={points!r}; use a number of 0 or more.")
        src = cell.get("source", "")
        tests.append(TestCell(gid, float(points), "".join(src) if isinstance(src, list) else src))
    return tests


def is_test_cell(cell: dict) -> bool:
    """True for a visible test cell left in a lab (graded, not an answer cell)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")
