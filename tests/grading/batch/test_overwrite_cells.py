"""Submissions started on an older release still grade: the cells a student is not meant to edit (setup,
imports, read-only cells) are restored from the lab's current version before grading, as nbgrader's
OverwriteCells does; the student's answers and added cells stay, and the hidden tests never enter the kernel."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from instructors.batch.grade import grade
from instructors.batch.overwrite import restore

ROOT = Path(__file__).resolve().parents[3]
LAB06 = ROOT / "solutions" / "lab06_ptq_sensitivity.ipynb"
NEW, OLD = "from helpers.model_quant import ptq", "from helpers import ptq"  # the module moved after a release


def _src(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _old_release_submission() -> dict:
    """lab06's solution as a student of the previous release sent it: its setup cell imports the old module,
    and the student added a scratch cell."""
    nb = json.loads(LAB06.read_text(encoding="utf-8"))
    setup = next(c for c in nb["cells"] if NEW in _src(c))
    setup["source"] = _src(setup).replace(NEW, OLD)
    nb["cells"].insert(5, {"cell_type": "code", "metadata": {}, "id": "a1b2c3d4", "execution_count": None,
                           "outputs": [], "source": "print('my own scratch work')"})
    return nb


def test_setup_cells_restored_answers_and_added_cells_kept() -> None:
    current = json.loads(LAB06.read_text(encoding="utf-8"))
    sub = _old_release_submission()
    answer = next(c for c in sub["cells"] if c["metadata"].get("nbgrader", {}).get("solution"))
    answer["source"] = "def ptq_accuracy(model, data, method, per_channel, bits):\n    return 'mine'"
    fixed, notes = restore(sub, current)
    sources = [_src(c) for c in fixed["cells"]]
    assert any(NEW in s for s in sources) and not any(OLD in s for s in sources)
    assert "print('my own scratch work')" in sources and answer["source"] in sources
    assert len(notes) == 1 and "restored from the current lab" in notes[0]
    assert sub["cells"] != fixed["cells"] and any(OLD in _src(c) for c in sub["cells"])  # the input is not changed


def test_a_deleted_setup_cell_is_put_back_and_hidden_tests_stay_out() -> None:
    current = json.loads(LAB06.read_text(encoding="utf-8"))
    sub = copy.deepcopy(current)
    tests = [c for c in sub["cells"] if c["metadata"].get("nbgrader", {}).get("grade")
             and not c["metadata"]["nbgrader"].get("solution")]
    for t in tests:
        t["source"] = "check(...)  # the student's copy of a test cell, without hidden tests"
    gone = next(i for i, c in enumerate(sub["cells"]) if NEW in _src(c))
    del sub["cells"][gone]
    fixed, notes = restore(sub, current)
    assert [_src(c) for c in fixed["cells"]].index(_src(current["cells"][gone])) == gone
    assert "put back" in notes[0]
    assert not any("HIDDEN TESTS" in _src(c) for c in fixed["cells"])
    assert restore(current, current) == (current, [])


@pytest.mark.slow
def test_an_old_release_lab06_submission_scores_its_answers(tmp_path: Path) -> None:
    path = tmp_path / "subs" / "lab06_ptq_sensitivity__oldrelease.ipynb"
    path.parent.mkdir()
    path.write_text(json.dumps(_old_release_submission()), encoding="utf-8")
    (g,) = grade([path], tmp_path / "out", solutions_dir=ROOT / "solutions", quiet=True)
    assert not g.result.not_graded, g.result.not_graded
    assert g.points() == (8, 8), (g.result.outcomes, g.result.cell_errors)
    assert any("restored from the current lab" in n for n in g.result.notes)
