"""Submissions started on an older release still grade: the cells a student is not meant to edit (setup,
imports, read-only cells) are restored from the lab's current version before grading, as nbgrader's
OverwriteCells does; the student's answers and added cells stay, and the hidden tests never enter the kernel.
An old release's lab06 submission graded end to end is in test_all_labs.py, in the batch that grades the official
solutions (its lab's calibration is the one the solution's grading already runs)."""

from __future__ import annotations

import copy
import json

from tests.support.grading import LAB06
from tests.support.grading import NEW_IMPORT as NEW
from tests.support.grading import OLD_IMPORT as OLD
from tests.support.grading import cell_source as _src
from tests.support.grading import old_release_lab06 as _old_release_submission

from instructors.batch.overwrite import restore


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
