"""A tiny fixture lab (lab98) and student submissions of it, for the grading tests."""

from __future__ import annotations

from pathlib import Path

from helpers.grading.labgen import lab_from_solution
from helpers.tools.notebooks import canonical, dumps

LAB = "lab98_fixture"
SENTINEL = "HIDDEN-SENTINEL"

ADD = "def add(a, b):\n    return a + b"
MUL = "def mul(a, b):\n    return a * b"

SOLUTION_CELLS = [
    ("md", "# Fixture lab\nTwo tiny exercises."),
    ("code", "import math"),
    ("code", "def add(a, b):\n    # HINT: use the + operator\n    ### BEGIN SOLUTION\n"
             "    return a + b\n    ### END SOLUTION"),
    ("test", "lab98.add", 2, "assert add(1, 2) == 3\n### BEGIN HIDDEN TESTS\n"
                             f"assert add(-5, 5) == 0, '{SENTINEL}-add'\n### END HIDDEN TESTS"),
    ("code", "def mul(a, b):\n    ### BEGIN SOLUTION\n    return a * b\n    ### END SOLUTION"),
    ("test", "lab98.mul", 3, "assert mul(2, 3) == 6\n### BEGIN HIDDEN TESTS\n"
                             f"assert mul(-2, 0.5) == -1, '{SENTINEL}-mul'\n### END HIDDEN TESTS"),
    ("answer", "Why is 8 bits enough?\n### BEGIN SOLUTION\nBecause the errors are small.\n### END SOLUTION"),
]


def _cell(spec: tuple) -> dict:
    """A notebook cell dict from a SOLUTION_CELLS entry."""
    kind = spec[0]
    if kind == "test":
        _, gid, points, src = spec
        meta = {"nbgrader": {"grade": True, "grade_id": gid, "points": points, "solution": False}}
        return {"cell_type": "code", "metadata": meta, "source": src}
    if kind == "answer":
        meta = {"nbgrader": {"grade": False, "grade_id": "lab98.why", "solution": True}}
        return {"cell_type": "markdown", "metadata": meta, "source": spec[1]}
    return {"cell_type": "markdown" if kind == "md" else "code", "metadata": {}, "source": spec[1]}


def solution_nb() -> dict:
    """The fixture solution notebook (canonical dict)."""
    return canonical({"cells": [_cell(c) for c in SOLUTION_CELLS]})


def write_solution(folder: Path) -> Path:
    """Write solutions/lab98_fixture.ipynb under `folder`; return its path."""
    path = folder / f"{LAB}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(solution_nb()), encoding="utf-8")
    return path


def student_nb(*cells: str) -> dict:
    """A submission: code cells, where 'TEST_ADD' / 'TEST_MUL' stand for the lab's visible tests."""
    lab = lab_from_solution(solution_nb())
    tests = {"TEST_ADD": lab["cells"][3], "TEST_MUL": lab["cells"][5]}
    out = [lab["cells"][0], lab["cells"][1]]
    for src in cells:
        out.append(tests[src] if src in tests else {"cell_type": "code", "metadata": {}, "source": src})
    return canonical({"cells": out})


def write_nb(path: Path, nb: dict) -> Path:
    """Write a notebook dict to `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(nb), encoding="utf-8")
    return path
