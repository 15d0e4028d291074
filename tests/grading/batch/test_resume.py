"""instructors.batch.grade: a re-run reuses a grade only while the submission and its lab's solution are unchanged."""

from __future__ import annotations


def test_a_changed_solution_changes_the_resume_key(tmp_path):
    from instructors.batch.grade import resume_key
    from instructors.batch.submissions import Submission

    sol = tmp_path / "lab00_x.ipynb"
    sol.write_text("one")
    sub = Submission(path=tmp_path / "lab00_x__ann.ipynb", student="ann", lab="lab00_x", solution=sol)
    before = resume_key("abc", sub)
    assert resume_key("abc", sub) == before and resume_key("abd", sub) != before
    sol.write_text("two")
    assert resume_key("abc", sub) != before
