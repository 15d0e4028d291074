"""Every real lab end to end: its solution scores full marks; the generated lab scores zero, and
running it (every code cell, then the solution's tests) fails only with the stubs' NotImplementedError."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.grading.grade import grade

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("lab*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("solution", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_solution_full_marks_and_lab_only_not_implemented(solution: Path, tmp_path: Path) -> None:
    lab = ROOT / "labs" / solution.name
    assert lab.exists(), f"{lab} is missing. Fix: python -m helpers.grading generate"
    graded = grade([solution, lab], tmp_path, solutions_dir=ROOT / "solutions", cell_timeout=170,
                   total_timeout=400, jobs=2, quiet=True)
    by_folder = {g.submission.path.parent.name: g for g in graded}
    sol, stub = by_folder["solutions"], by_folder["labs"]

    got, possible = sol.points()
    failed = [f"{o.grade_id}: {o.message}" for o in sol.result.outcomes if not o.passed]
    assert possible > 0 and got == possible, f"solution lost points: {failed}; notes {sol.result.notes}"
    assert not sol.result.cell_errors, f"solution cells raised: {sol.result.cell_errors}"

    got, _ = stub.points()
    assert got == 0, f"the generated lab scored {got} points"
    bad_tests = [(o.grade_id, o.message) for o in stub.result.outcomes
                 if not o.message.startswith("NotImplementedError")]
    assert not bad_tests, f"lab tests failed with something else than the stub's NotImplementedError: {bad_tests}"
    bad_cells = [e for e in stub.result.cell_errors if e[1] != "NotImplementedError"]
    assert not bad_cells, f"lab cells failed with something else than NotImplementedError: {bad_cells}"
    assert any("Hint:" in o.message for o in stub.result.outcomes), "no stub carries a hint"
    assert not stub.result.notes and not sol.result.notes, (stub.result.notes, sol.result.notes)
