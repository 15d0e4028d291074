"""Generate labs/ from solutions/ with nbgrader's own preprocessors (those of `nbgrader
generate_assignment`, less the database step), then the course's canonical JSON.

Markers (nbgrader's): ``### BEGIN SOLUTION`` / ``### END SOLUTION`` in answer cells (code: a stub
that raises NotImplementedError; markdown: "YOUR ANSWER HERE"), and ``### BEGIN HIDDEN TESTS`` /
``### END HIDDEN TESTS`` in test cells. The solutions are valid nbgrader source notebooks
(schema version 3), so a real nbgrader course can use them unchanged.

Serves: instructors (lab generation).
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from helpers import cli
from helpers.tools.notebooks import canonical, dumps

BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
MARKDOWN_STUB = "YOUR ANSWER HERE"
CODE_STUB = "raise NotImplementedError()"
SOLUTIONS, LABS = cli.COURSE / "solutions", cli.COURSE / "labs"  # this course's, whatever the working folder


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


def generate(solutions_dir: Path = SOLUTIONS, labs_dir: Path = LABS) -> list[Path]:
    """Write labs_dir/<name>.ipynb for every solutions_dir/<name>.ipynb; return the written paths.

    Every lab is made first, so a broken solution writes nothing; each file is then written beside and
    renamed (its mode kept). Nothing else in labs_dir is touched.
    """
    made = [(lab_path(sol, labs_dir), dumps(lab_from_solution(json.loads(sol.read_text(encoding="utf-8")))))
            for sol in sorted(solutions_dir.glob("*.ipynb"))]
    for path, text in made:
        with cli.write_beside(path) as tmp:
            tmp.write_text(text, encoding="utf-8")
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
