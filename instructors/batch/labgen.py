"""Generate labs/ from solutions/ with nbgrader's own preprocessors (those of `nbgrader
generate_assignment`, less the database step), then the course's canonical JSON.

Markers (nbgrader's): ``### BEGIN SOLUTION`` / ``### END SOLUTION`` in answer cells (code: a stub
that raises NotImplementedError; markdown: "YOUR ANSWER HERE"), and ``### BEGIN HIDDEN TESTS`` /
``### END HIDDEN TESTS`` in test cells. The solutions are valid nbgrader source notebooks
(schema version 3), so a real nbgrader course can use them unchanged.

``labs/.generated.json`` records the SHA-256 of each lab as generate last wrote it: a lab that changed
since (a student's answers, an added cell) is never replaced without ``--force``.

Serves: instructors (lab generation).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import nbformat

from helpers import cli
from helpers.errors import InputError
from helpers.tools.notebooks import canonical, dumps

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
MARKDOWN_STUB = "YOUR ANSWER HERE"
CODE_STUB = "raise NotImplementedError()"
SOLUTIONS, LABS = cli.COURSE / "solutions", cli.COURSE / "labs"  # this course's, whatever the working folder
RECORD = ".generated.json"  # in the labs folder: name -> SHA-256 of each lab as generate last wrote it


def _preprocessors() -> list:
    """nbgrader's generate_assignment steps, in its order (without SaveCells, which needs its database)."""
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearHiddenTests,
        ClearMarkScheme,
        ClearOutput,
        ClearSolutions,
        ComputeChecksums,
        LockCells,
    )

    return [LockCells(), ClearSolutions(), ClearOutput(), CheckCellMetadata(), ComputeChecksums(),
            ClearHiddenTests(), ClearMarkScheme(), ComputeChecksums(), CheckCellMetadata()]


def lab_from_solution(solution: dict) -> dict:
    """The student version of a solution notebook dict."""
    nb = nbformat.reads(dumps(canonical(solution)), as_version=4)
    resources: dict = {}
    for pp in _preprocessors():
        nb, resources = pp.preprocess(nb, resources)
    return canonical(json.loads(nbformat.writes(nb)))


def lab_path(solution_path: Path, labs_dir: Path) -> Path:
    """Where the lab generated from a solution notebook goes (same file name)."""
    return labs_dir / solution_path.name


def _sha(data: bytes) -> str:
    """The SHA-256 of some bytes, in hex."""
    return hashlib.sha256(data).hexdigest()


def _record(labs_dir: Path) -> dict[str, str]:
    """What generate last wrote in `labs_dir` ({} when nothing is recorded)."""
    try:
        data = json.loads((labs_dir / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def changed(made: list[tuple[Path, str]], labs_dir: Path) -> list[Path]:
    """The labs generate would replace that differ from what it last wrote there (or were never recorded)."""
    record = _record(labs_dir)
    out = []
    for path, text in made:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            out.append(path)
        elif path.is_file():
            now = _sha(path.read_bytes())
            if now != _sha(text.encode("utf-8")) and now != record.get(path.name):
                out.append(path)
    return out


def generate(solutions_dir: Path = SOLUTIONS, labs_dir: Path = LABS, force: bool = False) -> list[Path]:
    """Write labs_dir/<name>.ipynb for every solutions_dir/<name>.ipynb; return the written paths.

    Every lab is made first, so a broken solution writes nothing, and a lab that changed since generate wrote
    it is refused (unless `force`) before anything is written; each file is then written beside and renamed
    (its mode kept), and recorded in labs_dir/.generated.json. Nothing else in labs_dir is touched.
    """
    made = [(lab_path(sol, labs_dir), dumps(lab_from_solution(json.loads(sol.read_text(encoding="utf-8")))))
            for sol in sorted(solutions_dir.glob("*.ipynb"))]
    edited = [] if force else changed(made, labs_dir)
    if edited:
        raise InputError(f"{edited[0]}{f' and {len(edited) - 1} more' if len(edited) > 1 else ''} changed since "
                         f"generate wrote it (a student's answers or an added cell?), and generating replaces it; "
                         f"nothing was written. Move it away to keep it, or run python -m instructors.batch "
                         f"generate --force to replace it.")
    record = _record(labs_dir)
    for path, text in made:
        with cli.write_beside(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
        record[path.name] = _sha(text.encode("utf-8"))
    if made:
        with cli.write_beside(labs_dir / RECORD) as tmp:
            tmp.write_text(json.dumps(dict(sorted(record.items())), indent=1) + "\n", encoding="utf-8")
    return [path for path, _ in made]


def stale(solutions_dir: Path = SOLUTIONS, labs_dir: Path = LABS) -> list[Path]:
    """Labs whose committed file differs from what generate() would write (or that are missing)."""
    out = []
    for sol in sorted(solutions_dir.glob("*.ipynb")):
        path = lab_path(sol, labs_dir)
        want = dumps(lab_from_solution(json.loads(sol.read_text(encoding="utf-8"))))
        if not path.exists() or path.read_text(encoding="utf-8") != want:
            out.append(path)
    return out
