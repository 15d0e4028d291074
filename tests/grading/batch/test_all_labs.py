"""Every real lab end to end, graded the way instructors grade, all in one batch: its official solution
scores full marks (on this machine, with the default limits), and the generated lab, untouched, scores zero
with "not done yet" on every test while every one of its cells runs without an error ("Run All" never
stops: demo cells that need a student's function ask helpers.grading.ready() first)."""

from __future__ import annotations

from pathlib import Path

import pytest

from instructors.batch.grade import grade
from instructors.batch.gradebook import Graded

ROOT = Path(__file__).resolve().parents[3]
SOLUTIONS = sorted((ROOT / "solutions").glob("lab*.ipynb"))


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Graded]:
    """(folder, lab) -> graded, for every solution and its generated lab."""
    labs = [ROOT / "labs" / s.name for s in SOLUTIONS if (ROOT / "labs" / s.name).exists()]
    graded = grade(SOLUTIONS + labs, tmp_path_factory.mktemp("labs"), solutions_dir=ROOT / "solutions",
                   jobs=2, quiet=True)
    return {(g.submission.path.parent.name, g.submission.lab): g for g in graded}


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_solution_full_marks_and_lab_only_not_done_yet(solution: Path, batch: dict) -> None:
    assert (ROOT / "labs" / solution.name).exists(), "the lab is missing. Fix: python -m instructors.batch generate"
    sol, stub = batch[("solutions", solution.stem)], batch[("labs", solution.stem)]

    got, possible = sol.points()
    failed = [f"{o.grade_id}: {o.message}" for o in sol.result.outcomes if not o.passed]
    assert not sol.result.not_graded, sol.result.not_graded
    assert possible > 0 and got == possible, f"solution lost points: {failed}; notes {sol.result.notes}"
    assert not sol.result.cell_errors, f"solution cells raised: {sol.result.cell_errors}"

    assert not stub.result.not_graded and stub.points()[0] == 0, stub.result
    bad_tests = [(o.grade_id, o.message) for o in stub.result.outcomes if "not done yet" not in o.message]
    assert not bad_tests, f"lab tests failed with something else than 'not done yet': {bad_tests}"
    assert not stub.result.notes and not sol.result.notes, (stub.result.notes, sol.result.notes)
    stops = (f"Run All stops in the unfinished lab: (cell, error, message) {stub.result.cell_errors}. "
             f"Wrap each demo that calls a student's function in `if ready(fn, ...):`")
    assert not stub.result.cell_errors, stops
