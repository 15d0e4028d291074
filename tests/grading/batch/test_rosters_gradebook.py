"""Class logistics without kernels: who submitted what (folders, sections, LMS exports, rosters, download
suffixes), clear errors for bad arguments, and the gradebook, summary and feedback files."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from tests.support.grading import solution_nb, write_exercises, write_solution

from helpers.errors import InputError
from instructors.batch.grade import grade, main
from instructors.batch.gradebook import Graded, write_feedback, write_gradebook, write_summary
from instructors.batch.runner import RunResult, TestOutcome
from instructors.batch.submissions import Submission, describe, match_solution, read_roster
from instructors.batch.worker import solution_tests


@pytest.fixture
def sols(tmp_path: Path) -> list[Path]:
    return [tmp_path / "lab04_per_channel_and_requant.ipynb", tmp_path / "lab05_entropy.ipynb"]


def _who(path: str, sols: list[Path], roster: dict | None = None) -> tuple[str, str]:
    root = sols[0].parent / "subs"
    s = describe(root / path, root, sols, roster)
    return s.student, s.lab


def test_lab_matching(sols: list[Path]) -> None:
    assert match_solution("lab04_per_channel_and_requant", sols) == sols[0]
    assert match_solution("lab04_per_channel_and_requant (1)", sols) == sols[0]
    assert match_solution("lab05_renamed_by_student", sols) == sols[1]
    assert match_solution("my_lab05-Copy1", sols) == sols[1]
    assert match_solution("homework", sols) is None


def test_student_identity_from_names_and_folders(sols: list[Path]) -> None:
    assert _who("lab05_entropy__alice.ipynb", sols) == ("alice", "lab05_entropy")
    assert _who("bob/lab05_entropy.ipynb", sols) == ("bob", "lab05_entropy")
    assert _who("section1/alice/lab05_entropy.ipynb", sols) == ("section1/alice", "lab05_entropy")
    assert _who("section2/alice/lab05_entropy.ipynb", sols) == ("section2/alice", "lab05_entropy")
    assert _who("frank (1)/lab05_entropy.ipynb", sols) == _who("frank/lab05_entropy.ipynb", sols)
    assert _who("lab05_entropy__frank (1).ipynb", sols)[0] == "frank"
    assert _who("smithalice_1234_5678_lab04_per_channel_and_requant.ipynb", sols) == \
        ("smithalice", "lab04_per_channel_and_requant")
    assert _who("smithalice_LATE_1234_5678_lab05_entropy-1.ipynb", sols) == ("smithalice", "lab05_entropy")
    assert _who("Alice Smith_77_assignsubmission_file_lab05_entropy.ipynb", sols) == ("Alice Smith", "lab05_entropy")


def test_roster_maps_names_and_ids(sols: list[Path], tmp_path: Path) -> None:
    (tmp_path / "roster.csv").write_text("alias,student\nsmithalice,s001\n999,s002\nfrank,s003\n", encoding="utf-8")
    roster = read_roster(tmp_path / "roster.csv")
    assert _who("smithalice_1234_5678_lab05_entropy.ipynb", sols, roster)[0] == "s001"
    assert _who("someone_999_5678_lab05_entropy.ipynb", sols, roster)[0] == "s002"
    assert _who("frank (2)/lab05_entropy.ipynb", sols, roster)[0] == "s003"
    with pytest.raises(InputError, match="roster"):
        read_roster(tmp_path / "missing.csv")


def test_solution_tests_read_points_exercise_and_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADING_EXERCISES", str(write_exercises(tmp_path / "keys")))
    tests = solution_tests(solution_nb())
    assert [(t.grade_id, t.points, t.exercise, t.function) for t in tests] == [
        ("lab98-add", 2, "lab98.add", "add"), ("lab98-mul", 3, "lab98.mul", "mul")]
    assert [c.label for c in tests[0].cases][0] == "small" and "HIDDEN-SENTINEL-add" in tests[0].cases[1].label
    bad = solution_nb()
    bad["cells"][5]["metadata"]["nbgrader"]["grade_id"] = "lab98-add"
    with pytest.raises(InputError, match="repeated grade_id"):
        solution_tests(bad)


def test_bad_arguments_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(InputError, match="no submissions"):
        grade([], tmp_path)
    with pytest.raises(InputError, match="no solution notebooks"):
        grade([tmp_path], tmp_path / "out", solutions_dir=tmp_path / "none")
    write_solution(tmp_path / "solutions")
    with pytest.raises(InputError, match="neither a notebook"):
        grade([tmp_path / "missing.ipynb"], tmp_path / "out", solutions_dir=tmp_path / "solutions")
    assert main([str(tmp_path / "missing.ipynb"), "--solutions", str(tmp_path / "solutions")]) == 2
    assert "neither a notebook" in capsys.readouterr().err
    with pytest.raises(InputError, match="positive"):
        grade([tmp_path], tmp_path / "out", cell_timeout=0)
    with pytest.raises(InputError, match="jobs"):
        grade([tmp_path], tmp_path / "out", solutions_dir=tmp_path / "solutions", jobs=0)
    with pytest.raises(InputError, match="sandbox"):
        grade([tmp_path], tmp_path / "out", solutions_dir=tmp_path / "solutions", sandbox_mode="docker")


def _sub(tmp_path: Path, student: str, lab: str) -> Submission:
    return Submission(tmp_path / f"{lab}__{student}.ipynb", student, lab, None)


def test_gradebook_summary_and_feedback_files(tmp_path: Path) -> None:
    wrong = "case 'ties': 2 of 4 elements differ.\n    at (1,): yours 3 vs expected 2"
    graded = [
        Graded(_sub(tmp_path, "ann", "lab01_x"), RunResult([TestOutcome("lab01-a", 2, 2, True, "passed")])),
        Graded(_sub(tmp_path, "ann", "lab00_y"), RunResult([TestOutcome("lab00-q", 0, 2, False, wrong),
                                                            TestOutcome("lab00-s", 1, 1, True, "passed")],
                                                           cell_errors=[(4, "ValueError", "bad")])),
        Graded(_sub(tmp_path, "ann", "lab00_y"), RunResult([TestOutcome("lab00-q", 2, 2, True, "passed"),
                                                            TestOutcome("lab00-s", 1, 1, True, "passed")])),
        Graded(_sub(tmp_path, "bo", "lab00_y"), RunResult([], not_graded="the kernel did not start: boom")),
    ]
    path = tmp_path / "out" / "gradebook.csv"
    path.parent.mkdir()
    path.write_text("forged\n")
    write_gradebook(graded, path)
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    assert list(rows[0]) == ["student", "lab", "submission", "lab00-q", "lab00-s", "lab01-a",
                             "points", "max_points", "status", "notes"]
    assert [(r["lab"], r["points"], r["status"]) for r in rows] == [  # sorted by student, then lab
        ("lab00_y", "1", "graded"), ("lab00_y", "3", "graded"), ("lab01_x", "2", "graded"),
        ("lab00_y", "", "not graded: the kernel did not start: boom")]
    assert rows[0]["notes"] == "code cell 4: ValueError: bad" and rows[1]["notes"] == ""  # text, not a count
    write_summary(graded, tmp_path / "out" / "summary.csv")
    summary = {r["student"]: r for r in csv.DictReader((tmp_path / "out" / "summary.csv").open(encoding="utf-8"))}
    assert (summary["ann"]["lab00_y"], summary["ann"]["lab01_x"], summary["ann"]["total"]) == ("3", "2", "5")
    assert summary["bo"]["lab00_y"] == "not graded" and summary["bo"]["not_graded"] == "lab00_y"
    files = write_feedback(graded, tmp_path / "out" / "feedback")
    assert [p.name for p in files] == ["ann__lab01_x.md", "ann__lab00_y.md", "ann__lab00_y_2.md", "bo__lab00_y.md"]
    text = files[1].read_text(encoding="utf-8")
    assert "| `lab00-q` | ✗ fail | 0 / 2 | case 'ties': 2 of 4 elements differ. (details below) |" in text
    assert "```text\n" + wrong + "\n```" in text and "code cell 4: ValueError: bad" in text
    assert "not graded" in files[3].read_text(encoding="utf-8") and "grader's failure, not yours" in files[3].read_text()
