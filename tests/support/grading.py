"""A tiny fixture lab (lab98) with its answer key, and student submissions of it (and an old release's lab06), for the
grading tests."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.tools.notebooks import canonical, dumps
from instructors.batch.labgen import BEGIN_HIDDEN, BEGIN_SOLUTION, END_HIDDEN, END_SOLUTION, lab_from_solution

LAB = "lab98_fixture"
SENTINEL = "HIDDEN-SENTINEL"

@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """PyTorch on one thread during a test, as in graded kernels (instructors.batch.sandbox.ONE_THREAD): the labs'
    models are small, and two threads on a busy 2-core machine mostly wait for each other."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


ADD = "def add(a, b):\n    return a + b"
MUL = "def mul(a, b):\n    return a * b"

EXERCISES = f'''"""Answer key of the fixture lab (tests only).

Serves: tests.
"""
from helpers.grading.exercise import Case, Exercise, register

register(
    Exercise(id="lab98.add", title="add two numbers", spec=lambda a, b: a + b, compare="exact",
             cases=lambda: [Case("small", (1, 2))],
             hidden=lambda: [Case("hidden: {SENTINEL}-add", (-5, 5)), Case("hidden: big", (10**6, 7))],
             hint="Use the + operator.", hints=("Return a + b.",)),
    Exercise(id="lab98.mul", title="multiply two numbers", spec=lambda a, b: a * b, compare="close",
             cases=lambda: [Case("small", (2, 3))],
             hidden=lambda: [Case("hidden: {SENTINEL}-mul", (-2, 0.5))], hint="Use the * operator."),
)
'''


def _test(gid: str, exercise: str, fn: str, points: int) -> dict:
    """A test cell: the visible check, then the hidden verify."""
    src = (f'check("{exercise}", {fn})\n### BEGIN HIDDEN TESTS\nfrom helpers.grading import verify\n'
           f'verify("{exercise}", {fn})\n### END HIDDEN TESTS')
    meta = {"grade": True, "grade_id": gid, "points": points, "solution": False, "locked": True,
            "schema_version": 3, "task": False}
    return {"cell_type": "code", "metadata": {"nbgrader": meta}, "source": src}


def _answer(gid: str, src: str, markdown: bool = False) -> dict:
    """An answer cell."""
    meta = {"grade": markdown, "grade_id": gid, "solution": True, "locked": False, "schema_version": 3, "task": False}
    if markdown:
        meta["points"] = 1
    return {"cell_type": "markdown" if markdown else "code", "metadata": {"nbgrader": meta}, "source": src}


def solution_nb() -> dict:
    """The fixture solution notebook (canonical dict)."""
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": "# Fixture lab\nTwo tiny exercises (5 points)."},
        {"cell_type": "code", "metadata": {}, "source": "import math\nfrom helpers.grading import check"},
        _answer("lab98-add-answer", "def add(a, b):\n    ### BEGIN SOLUTION\n    return a + b\n    ### END SOLUTION"),
        _test("lab98-add", "lab98.add", "add", 2),
        _answer("lab98-mul-answer", "def mul(a, b):\n    ### BEGIN SOLUTION\n    return a * b\n    ### END SOLUTION"),
        _test("lab98-mul", "lab98.mul", "mul", 3),
        _answer("lab98-why", "Why is 8 bits enough?\n### BEGIN SOLUTION\nBecause the errors are small.\n"
                             "### END SOLUTION", markdown=True),
    ]
    return canonical({"cells": cells})


def write_solution(folder: Path) -> Path:
    """Write solutions/lab98_fixture.ipynb under `folder`; return its path."""
    path = folder / f"{LAB}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(solution_nb()), encoding="utf-8")
    return path


def write_exercises(folder: Path) -> Path:
    """Write the fixture's answer key folder/lab98.py; return the folder (for grade(exercises=...))."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lab98.py").write_text(EXERCISES, encoding="utf-8")
    return folder


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


ROOT = Path(__file__).resolve().parents[2]
SOLUTION_FILES = sorted((ROOT / "solutions").glob("lab*.ipynb"))
LAB06 = ROOT / "solutions" / "lab06_ptq_sensitivity.ipynb"
NEW_IMPORT, OLD_IMPORT = "from helpers.model_quant import ptq", "from helpers import ptq"  # the module moved after a release


def cell_source(cell: dict) -> str:
    """A cell's source as one string."""
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def old_release_lab06() -> dict:
    """lab06's solution as a student of the previous release sent it: its setup cell imports the old module,
    and the student added a scratch cell."""
    nb = json.loads(LAB06.read_text(encoding="utf-8"))
    setup = next(c for c in nb["cells"] if NEW_IMPORT in cell_source(c))
    setup["source"] = cell_source(setup).replace(NEW_IMPORT, OLD_IMPORT)
    nb["cells"].insert(5, {"cell_type": "code", "metadata": {}, "id": "a1b2c3d4", "execution_count": None,
                           "outputs": [], "source": "print('my own scratch work')"})
    return nb
BOILERPLATE = {"i = cuda.grid(1)"}  # also in the code a lab gives (the kernel to fix), not an answer
CODE_LIKE = re.compile(r"=|\breturn\b|[-+*/%\[]| if | for ")  # a statement, not a bare name or call


def _sources(nb: dict) -> list[str]:
    """Every cell's source text."""
    return ["".join(c["source"]) for c in nb["cells"]]


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _marked(nb: dict, begin: str, end: str):
    """(stripped line, whether it lies between the `begin` and `end` markers) for every line of every cell."""
    for src in _sources(nb):
        inside = False
        for line in src.splitlines():
            s = line.strip()
            if s in (begin, end):
                inside = s == begin
            else:
                yield s, inside


def solution_lines(nb: dict) -> set[str]:
    """Non-trivial lines inside solution blocks (what must never reach students)."""
    return {s for s, inside in _marked(nb, BEGIN_SOLUTION, END_SOLUTION)
            if inside and len(s) >= 16 and not s.startswith("#") and CODE_LIKE.search(s) and s not in BOILERPLATE}


def _hidden_lines(nb: dict) -> set[str]:
    """Lines only inside hidden-test blocks."""
    hidden, visible_ = set(), set()
    for s, inside in _marked(nb, BEGIN_HIDDEN, END_HIDDEN):
        if s:
            (hidden if inside else visible_).add(s)
    return hidden - visible_


def leaks(texts: dict[str, str]) -> list[str]:
    """(where, line) of every solution or hidden-only line found in `texts` (name -> text)."""
    found = []
    for sol in SOLUTION_FILES:
        nb = _load(sol)
        for line in solution_lines(nb) | (_hidden_lines(nb) - {"from helpers.grading import verify"}):
            found += [f"{name}: {line}" for name, text in texts.items() if line in text]
    return found




def answer_tests(good: dict, wrong: dict) -> tuple:
    """Two parametrized tests for a lab's checks: every correct answer passes, every known-wrong one is
    rejected. Use as ``test_correct_answers_pass, test_wrong_variants_rejected = answer_tests(GOOD, WRONG)``."""
    from helpers.grading import CheckFailed, check

    @pytest.mark.parametrize("exercise", sorted(good))
    def test_correct_answers_pass(exercise: str) -> None:
        assert check(exercise, good[exercise], plot=False).passed

    @pytest.mark.parametrize("exercise,variant", [(e, v) for e, vs in wrong.items() for v in vs])
    def test_wrong_variants_rejected(exercise: str, variant: str) -> None:
        with pytest.raises(CheckFailed):
            check(exercise, wrong[exercise][variant], plot=False)

    return test_correct_answers_pass, test_wrong_variants_rejected
