"""Every real lab's official solution, graded the way instructors grade, all in one batch: it scores full marks
(on this machine, with the default limits) without a cell error or a note. In the same batch, a lab06 submission
started on an older release (its setup cell imports a module that has moved since) scores its answers: the cells a
student may not edit are restored from the current lab (test_overwrite_cells.py checks the restoring).

The generated lab, untouched, is run once, by Run All in test_lab_spoilers.py: every cell runs without an error
("Run All" never stops: demo cells that need a student's function ask helpers.grading.ready() first), every graded
test says "not done yet" (check() and the grader's probe decide that with the same helpers.grading.unfinished.is_stub)
and no cell prints more than the grader keeps. What the grader adds for a lab that is not done yet (nothing restored:
below; zero points and "not done yet" from the probe, for a plain and a kernel exercise) is in this file, test_batch.py
and test_sent_kernels.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.grading import old_release_lab06, write_nb

from instructors.batch.grade import grade
from instructors.batch.gradebook import Graded
from instructors.batch.overwrite import restore

ROOT = Path(__file__).resolve().parents[3]
SOLUTIONS = sorted((ROOT / "solutions").glob("lab*.ipynb"))
OLD_RELEASE = "old_release"  # the folder of the old release's submission


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Graded]:
    """(folder, lab) -> graded, for every solution and the old release's lab06 submission."""
    old = write_nb(tmp_path_factory.mktemp("subs") / OLD_RELEASE / "lab06_ptq_sensitivity__oldrelease.ipynb",
                   old_release_lab06())
    graded = grade(SOLUTIONS + [old], tmp_path_factory.mktemp("labs"), solutions_dir=ROOT / "solutions",
                   jobs=2, quiet=True)
    return {(g.submission.path.parent.name, g.submission.lab): g for g in graded}


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_solution_full_marks(solution: Path, batch: dict) -> None:
    sol = batch[("solutions", solution.stem)]
    got, possible = sol.points()
    failed = [f"{o.grade_id}: {o.message}" for o in sol.result.outcomes if not o.passed]
    assert not sol.result.not_graded, sol.result.not_graded
    assert possible > 0 and got == possible, f"solution lost points: {failed}; notes {sol.result.notes}"
    assert not sol.result.cell_errors, f"solution cells raised: {sol.result.cell_errors}"
    assert not sol.result.notes, sol.result.notes


@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_grading_the_untouched_lab_restores_nothing(solution: Path) -> None:
    """The grader restores a submission's locked cells from the solution before it runs them: the generated lab's
    are already the solution's (else its grading would carry a note, and run other cells than the lab's)."""
    lab = ROOT / "labs" / solution.name
    assert lab.exists(), "the lab is missing. Fix: python -m instructors.batch generate"
    nb = json.loads(lab.read_text(encoding="utf-8"))
    fixed, notes = restore(nb, json.loads(solution.read_text(encoding="utf-8")))
    assert (fixed, notes) == (nb, []), notes


@pytest.mark.slow
def test_an_old_release_lab06_submission_scores_its_answers(batch: dict) -> None:
    g = batch[(OLD_RELEASE, "lab06_ptq_sensitivity")]
    assert not g.result.not_graded, g.result.not_graded
    assert g.points() == (8, 8), (g.result.outcomes, g.result.cell_errors)
    assert any("restored from the current lab" in n for n in g.result.notes)
